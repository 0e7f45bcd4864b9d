"""Review (issue 14): "ask me first" is read before the turn lock (Engine.turn: refuse_direct_turn, then
backend.turn_lock). A one-step turn queued behind another turn of the session — on PostgreSQL, behind a turn on any
replica, held through its model call — passes the check, then waits; if the visitor turns ask me first on
meanwhile (on any replica), the queued turn still hands the top-K memories to the model without asking.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from chat.engine import Engine, InputError
from chat.llm import LLM
from control.settings import set_consent
from storage.stores import pg_stores

S = "alice"


@pytest.mark.pg
def test_a_turn_queued_behind_another_is_refused_once_ask_me_first_is_on(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECEIPT_SIGNING_KEY", "33" * 32)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with pg_stores(pg_url, tmp_path / "a", pool_size=3) as sa, pg_stores(pg_url, tmp_path / "b", pool_size=3) as sb:
        a = Engine(tmp_path / "a", llm=LLM(api_key=""), stores=sa)
        a.remember(S, "My bank PIN is 8080")
        before = sa.ledger.head(S)[0]
        outcome: list[object] = []
        with sb.receipts.turn_lock(S):  # replica B's turn of this session is in its model call
            t = threading.Thread(target=lambda: outcome.append(_try(a)))
            t.start()
            time.sleep(1.0)  # A's turn has read the setting (off) and waits for the lock
            set_consent(sb, S, True)  # the visitor turns ask me first on, through replica B
        t.join(30)
        assert isinstance(outcome[0], InputError), f"the queued turn ran without asking: {type(outcome[0]).__name__}"
        assert sa.ledger.head(S)[0] == before


def _try(eng: Engine) -> object:
    try:
        return eng.turn(S, "What is my bank PIN?")
    except Exception as exc:  # noqa: BLE001
        return exc
