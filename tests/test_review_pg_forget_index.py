"""Review (issue 14): Engine.forget on PostgreSQL drops the session's search rows after its turn lock is released
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
from storage import BackendError
from storage.stores import pg_stores

S = "alice"


@pytest.mark.pg
def test_a_deleted_session_is_not_searchable_after_its_index_drop_failed(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
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
        assert not stores.ledger.exists(S)  # the ledger, receipts and checkpoint are gone
        assert eng.forget(S, idle_before=1e12) is False  # a retention sweep finds nothing to finish
        again = Engine(tmp_path, llm=LLM(api_key=""), stores=stores)  # a restart does not either
        texts = [h.text for h in again.index.search(S, "passport number", 8).results]
        assert texts == [], f"the deleted session still answers searches: {texts}"
