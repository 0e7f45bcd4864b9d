"""Review (issue 14; fixed: Engine.forget now drops the search rows first, under the turn lock, so a failure there
leaves the session whole and a retry deletes everything). As found: Engine.forget on PostgreSQL dropped the session's search rows after its turn lock was released
(PgIndex.drop_session), and nothing drops them later if that step fails (a lost connection, a replica stopped
between the two): PgIndex.search reads search_sessions/search_events without asking the ledger, and only
`retrieval rebuild` (catch_up) drops sessions that left the ledger. So the deleted session's words stay in the
database and are returned, with their text, to whoever searches that session id — the same visitor after
"delete my session", or a new visitor whose session starts under that id.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chat.engine import Engine
from chat.llm import LLM
from control.forget import forget_session, recover
from storage import BackendError
from storage.stores import pg_stores

S = "alice"


@pytest.mark.pg
def test_a_forget_whose_index_drop_fails_keeps_the_session_whole_and_a_retry_leaves_nothing_searchable(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with pg_stores(pg_url, tmp_path, pool_size=2) as stores:
        eng = Engine(tmp_path, llm=LLM(api_key=""), stores=stores)
        eng.remember(S, "My passport number is Q9371X and it expires next spring")
        eng.turn(S, "What is my passport number?")

        def lost(_session: str) -> None:
            raise BackendError("PostgreSQL at …: server closed the connection unexpectedly")

        monkeypatch.setattr(stores.index, "drop_session", lost)
        with pytest.raises(BackendError):
            eng.forget(S)
        monkeypatch.undo()
        # the search rows go first, inside the turn lock: a failure there leaves the session whole, to be deleted again
        assert stores.ledger.exists(S)
        assert eng.forget(S) is True and not stores.ledger.exists(S)
        again = Engine(tmp_path, llm=LLM(api_key=""), stores=stores)  # a restart, or another replica
        texts = [h.text for h in again.index.search(S, "passport number", 8).results]
        assert texts == [], f"the deleted session still answers searches: {texts}"


@pytest.mark.pg
def test_a_forget_session_whose_index_drop_fails_keeps_the_session_whole_and_recover_leaves_nothing_searchable(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """control.forget.forget_session runs the same deletion (control.steps.delete_session): the search rows go
    first there too, and the journal it leaves lets recover finish what the failure stopped."""
    with pg_stores(pg_url, tmp_path, pool_size=2) as stores:
        eng = Engine(tmp_path, llm=LLM(api_key=""), stores=stores)
        eng.remember(S, "My passport number is Q9371X and it expires next spring")
        eng.turn(S, "What is my passport number?")

        def lost(_session: str) -> None:
            raise BackendError("PostgreSQL at …: server closed the connection unexpectedly")

        monkeypatch.setattr(stores.index, "drop_session", lost)
        with pytest.raises(BackendError):
            forget_session(tmp_path, S, key=eng.key, stores=stores)
        monkeypatch.undo()
        assert stores.ledger.exists(S) and stores.receipts.receipt_ids(S) != []
        assert len(recover(tmp_path, key=eng.key, stores=stores)) == 1
        assert not stores.ledger.exists(S)
        again = Engine(tmp_path, llm=LLM(api_key=""), stores=stores)
        texts = [h.text for h in again.index.search(S, "passport number", 8).results]
        assert texts == [], f"the deleted session still answers searches: {texts}"
