"""Review (issue 14): an answer without receipt_cites rows, written by another replica, and chat.citing.Cites.

Cites._make_whole reads the turns left without a receipt (receipt_pending_cites on PostgreSQL: the `.cites`
records) once per session and process. With replicas, a turn that another replica's process left without its
receipt_cites rows (it failed or died after appending the answer) is never read by a replica that has already
checked the session: when a memory that answer quoted is revoked, that replica still hands the answer — which may
repeat the revoked words — to the model.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chat.engine import Engine, TurnError
from chat.llm import LLM
from control.revocation import revoke
from storage.stores import pg_stores

S = "alice"


@pytest.mark.pg
def test_a_replica_leaves_out_an_answer_another_replica_left_without_its_cites_rows(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECEIPT_SIGNING_KEY", "22" * 32)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with pg_stores(pg_url, tmp_path / "a", pool_size=2) as sa, pg_stores(pg_url, tmp_path / "b", pool_size=2) as sb:
        a = Engine(tmp_path / "a", llm=LLM(api_key=""), stores=sa)
        b = Engine(tmp_path / "b", llm=LLM(api_key=""), stores=sb)
        secret = a.remember(S, "My safe combination is 7319 and the safe is behind the painting")
        other = a.remember(S, "I had soup for lunch")
        a.remember(S, "I walked the dog in the park")
        revoke(tmp_path / "a", S, other.seq, stores=sa, key=a.key)  # something is revoked: A checks the session whole
        a._retrieve(S, "what did I eat", 8, [])

        def dies(*_a: object, **_k: object) -> None:
            raise RuntimeError("replica B stops after appending its answer")

        monkeypatch.setattr(b.cites, "record", dies)
        with pytest.raises(TurnError):
            b.turn(S, "What is my safe combination?")
        answer = sa.ledger.head(S)[0] - 2  # B's answer, then B's failure note
        (ev,) = sa.ledger.read_events(S, [answer])
        assert ev.role == "assistant" and "7319" in (ev.text or "")

        revoke(tmp_path / "a", S, secret.seq, stores=sa, key=a.key)
        in_a = answer in [h.seq for h in a._retrieve(S, "safe combination 7319", 8, [])[0]]
        fresh = Engine(tmp_path / "a", llm=LLM(api_key=""), stores=sa)  # as a process started now (its check also
        in_fresh = answer in [h.seq for h in fresh._retrieve(S, "safe combination 7319", 8, [])[0]]  # writes the rows)
        # (False, True) before a fix: a fresh process leaves the answer out, replica A still hands it to the model
        assert (in_fresh, in_a) == (False, False)
