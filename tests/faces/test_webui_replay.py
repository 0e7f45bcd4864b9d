"""The Verify tab's "Why these memories" (issue 34): under a verified receipt of the visitor's own session, the replay
of its ranking — replayed with the ranked list, an event a rule left out with the rule, not replayable with why — and
for anyone else's receipt a sentence saying it is replayed only for one's own (handlers called directly)."""

from __future__ import annotations

from pathlib import Path

import pytest

from chat.engine import Engine
from chat.llm import LLM
from control.forget import forget
from control.revocation import revoke
from webui.handlers import UI
from webui.render_replay import TITLE
from webui.service import Service
from webui.sessions import new_session_key, session_id


@pytest.fixture
def ui(tmp_path: Path) -> UI:
    return UI(Service(Engine(tmp_path / "data", llm=LLM(api_key=""))))


def turn(ui: UI, key: str, message: str) -> str:
    last = list(ui.chat(message, [], 8, key))[-1]
    value = last[3].value
    return value["path"] if isinstance(value, dict) else value


def why(verdict: str) -> str:
    assert TITLE in verdict
    return verdict[verdict.index(TITLE):]


def test_an_own_receipt_shows_it_replayed_with_the_ranked_list(ui: UI) -> None:
    key = new_session_key()
    turn(ui, key, "My sister Ana lives in Lisbon")
    receipt = turn(ui, key, "Where does my sister live?")
    verdict, _ = ui.verify(receipt, key)
    section = why(verdict)
    assert "✅ pass — **replayed**" in section and "| 1 | 0 |" in section and "handed to the model" in section


def test_a_memory_a_revoke_left_out_is_listed_with_its_rule(ui: UI) -> None:
    key = new_session_key()
    turn(ui, key, "My locker code is 4711")
    turn(ui, key, "My sister Ana lives in Lisbon")
    revoke(ui.service.data_dir, session_id(key), 0, stores=ui.service.engine.stores, key=ui.service.engine.key)
    verdict, _ = ui.verify(turn(ui, key, "What is my locker code?"), key)
    section = why(verdict)
    assert "**replayed**" in section and "- seq 0 (rank 1 without the rules): revoked" in section
    assert "may quote revoked seq 0" in section  # the stand-in's reply that quoted it


def test_a_receipt_whose_search_saw_a_forgotten_event_is_not_replayable_and_says_which(ui: UI) -> None:
    key = new_session_key()
    turn(ui, key, "The tax form is due on Friday")
    receipt = Path(turn(ui, key, "When is the tax form due?")).read_bytes()
    engine = ui.service.engine
    forget(ui.service.data_dir, session_id(key), [1], cascade=False, stores=engine.stores, key=engine.key)  # the stand-in's reply
    copy = Path(ui.service.data_dir).parent / "kept.json"
    copy.write_bytes(receipt)
    verdict, _ = ui.verify(str(copy), key)
    assert "⚠️ not replayable — seq 1 was erased" in why(verdict)


def test_another_visitors_receipt_is_not_replayed_against_this_ledger(ui: UI) -> None:
    key = new_session_key()
    receipt = turn(ui, key, "I like green tea")
    verdict, _ = ui.verify(receipt, new_session_key())
    assert "Replayed only for a receipt of your own session" in why(verdict)


def test_a_verify_of_garbage_has_no_replay_section(ui: UI, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    verdict, _ = ui.verify(str(bad), new_session_key())
    assert TITLE not in verdict




def search(ui: UI, key: str, query: str, as_of: str) -> tuple[str, list[list[object]], str]:
    status, table, explanation = ui.search(query, 8, key, False, False, False, as_of)
    return status, table["data"], explanation


def test_manual_search_as_of_a_questions_size_gives_its_receipts_memories(ui: UI) -> None:
    import json

    key = new_session_key()
    turn(ui, key, "My locker code is 4711")
    revoke(ui.service.data_dir, session_id(key), 0, stores=ui.service.engine.stores, key=ui.service.engine.key)
    turn(ui, key, "My sister Ana lives in Lisbon")
    receipt = json.loads(Path(turn(ui, key, "Where does my sister live?")).read_text())
    import base64

    body = json.loads(base64.b64decode(receipt["payload"]))
    q = body["query"]["event"]["seq"]
    status, rows, left = search(ui, key, "Where does my sister live?", str(q))
    assert status.startswith(f"**As of {q} events**")
    assert [row[2] for row in rows] == [m["event"]["seq"] for m in body["memories"]]
    turn(ui, key, "My sister moved to Porto")  # later history: the answer as of that size does not change
    again = search(ui, key, "Where does my sister live?", str(q))[1]
    assert [row[2] for row in again] == [row[2] for row in rows]


@pytest.mark.parametrize("as_of", ["-1", "abc", "1e3", "99999", " 12 34 ", "../etc"])
def test_a_bad_as_of_is_one_line_and_empties_the_results(ui: UI, as_of: str) -> None:
    key = new_session_key()
    turn(ui, key, "My sister Ana lives in Lisbon")
    status, rows, left = search(ui, key, "sister", as_of)
    assert "as of: expected a number of events from 0 to" in status and rows == [] and left == ""
    assert "/" not in status.split("as of:", 1)[1]  # no path of the server


def test_empty_as_of_is_a_search_of_now(ui: UI) -> None:
    key = new_session_key()
    turn(ui, key, "My sister Ana lives in Lisbon")
    status, rows, _ = search(ui, key, "sister", "  ")
    assert "As of" not in status and rows


def test_a_replay_that_cannot_run_leaves_the_verdict_and_says_so_without_a_path(ui: UI, monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    from storage.files.retrieval.db import Index

    key = new_session_key()
    turn(ui, key, "My sister Ana lives in Lisbon")
    receipt = turn(ui, key, "Where does my sister live?")

    def broken(self: Index, session: str, events: object = None) -> None:
        raise sqlite3.OperationalError(f"disk I/O error at {ui.service.data_dir}/secret")

    monkeypatch.setattr(Index, "index_session", broken)
    verdict, _ = ui.verify(receipt, key)
    section = why(verdict)
    assert "not replayable" in section and "could not be indexed" in section and "OperationalError" in section
    assert str(ui.service.data_dir) not in verdict and "secret" not in verdict


def test_a_replay_that_fails_unexpectedly_keeps_the_verify_verdict_and_shows_no_path(ui: UI, monkeypatch: pytest.MonkeyPatch) -> None:
    import webui.service

    key = new_session_key()
    turn(ui, key, "My sister Ana lives in Lisbon")
    receipt = turn(ui, key, "Where does my sister live?")
    honest, _ = ui.verify(receipt, key)

    def broken(*_a: object) -> None:
        raise PermissionError(13, "Permission denied", f"{ui.service.data_dir}/sessions")

    monkeypatch.setattr(webui.service, "replay", broken)
    ui.service._replays.clear()  # the honest replay above is kept: forget it
    verdict, _ = ui.verify(receipt, key)
    assert verdict.split(TITLE)[0] == honest.split(TITLE)[0]
    assert "could not run" in why(verdict) and str(ui.service.data_dir) not in verdict


def test_verifying_the_same_receipt_again_does_not_rebuild_the_index_until_the_ledger_moves(ui: UI, monkeypatch: pytest.MonkeyPatch) -> None:
    import webui.service

    key = new_session_key()
    turn(ui, key, "My sister Ana lives in Lisbon")
    receipt = turn(ui, key, "Where does my sister live?")
    calls: list[str] = []
    real = webui.service.replay

    def counted(*a: object) -> object:
        calls.append("replay")
        return real(*a)  # type: ignore[arg-type]

    monkeypatch.setattr(webui.service, "replay", counted)
    first, _ = ui.verify(receipt, key)
    again, _ = ui.verify(receipt, key)
    assert len(calls) == 1 and why(first) == why(again) and "**replayed**" in why(again)
    turn(ui, key, "And my brother?")  # the ledger moved: replayed anew (and still the same)
    later, _ = ui.verify(receipt, key)
    assert len(calls) == 2 and "**replayed**" in why(later)
