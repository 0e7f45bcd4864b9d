"""K is a ceiling, not a quota (issue 31): an echo — a question asked again with no new words, a reply that only
repeats what the session held (retrieval.scoring.is_echo) — takes no slot of a turn's K. The receipt's ranking names
the rule (`echo`, FORMAT.md §24), the replay gives the same list, and a receipt from before the rule (its list holds
an echo) replays as it ran."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

import chat.engine
from chat.citing import Cites
from chat.engine import Engine
from chat.llm import LLM
from chat.replay import REPLAYED, replay
from chat.retrieve import retrieve
from receipts.body import parse_receipt


@pytest.fixture
def eng(tmp_path: Path) -> Engine:
    e = Engine(tmp_path / "data", llm=LLM(api_key=""))
    e.remember("alice", "My sister is called Ana")
    e.remember("alice", "The tax form is due on Friday")
    e.turn("alice", "What is my sister called?")  # asked once: the second time it is an echo of the first
    return e


def test_an_echo_takes_no_slot_and_the_receipt_names_the_rule(eng: Engine) -> None:
    turn = eng.turn("alice", "What is my sister called?")
    assert not any(h.echo for h in turn.hits) and 0 in [h.seq for h in turn.hits]
    ranking = turn.body["ranking"]
    assert "echo" in ranking["rules"] and all(r["match"] != "echo" for r in ranking["ranked"])
    got = replay(eng.stores, Cites(eng.stores), parse_receipt(turn.receipt_path.read_bytes()))
    assert got.verdict == REPLAYED, got.lines()
    assert any(lo.why.startswith("an echo") for lo in got.left_out), got.lines()


def test_without_the_rule_the_echo_took_a_slot_and_such_a_receipt_replays_as_it_ran(eng: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chat.engine, "retrieve", functools.partial(retrieve, echoes_take_slots=True))
    turn = eng.turn("alice", "What is my sister called?")
    assert any(h.echo for h in turn.hits), "the property this test rests on: an echo ranked"
    monkeypatch.undo()
    got = replay(eng.stores, Cites(eng.stores), parse_receipt(turn.receipt_path.read_bytes()))
    assert got.verdict == REPLAYED, got.lines()
