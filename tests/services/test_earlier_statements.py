"""Earlier statements handed to the model, marked (issue 32, FORMAT.md §20.1): for a question about now the newest
statement of what it asks wins and an older one of another value goes to the model after it, marked with the date
it was said and the seq that replaced it; a question about the past gets them marked too; the receipt lists them
(states v2) and verifies, on files and PostgreSQL; a format-1 turn and a receipt's replay rank as they must."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from chat.citing import Cites
from chat.engine import Engine, Turn
from chat.llm import LLM
from chat.replay import REPLAYED, replay
from chat.supersede import earlier_among, with_earlier
from control.revocation import current as current_controls
from receipts import body as rbody
from receipts.body import parse_receipt
from receipts.prompt import TEMPLATE_V1, TEMPLATE_V3, build_messages, prompt_hash
from receipts.states import prompt_marks
from receipts.verify import PASS
from retrieval.model import Hit
from storage.offline import verify_bytes
from storage.stores import Stores, file_stores, pg_stores

S = "bob"
COMPOUND = "I live in Paris and I work as a nurse."
MOVED = "I moved to Berlin last month."
CHATTER = ["The weather is lovely today.", "I watched a film about old ships."]


@dataclass
class Deployment:
    engine: Engine
    stores: Stores
    pg: bool

    def turn(self, question: str, k: int = 3) -> Turn:
        return self.engine.turn(S, question, k=k)

    def report(self, t: Turn) -> dict[str, str]:
        source: Any = self.stores.ledger if self.pg else None  # the PostgreSQL ledger read as lines, as the CLI does
        got = verify_bytes(rbody.dump_file(t.envelope), trusted=[self.engine.key.public_key], data_dir=self.engine.data_dir, source=source)
        assert got.verdict == "verified", [c.to_dict() for c in got.checks if c.status != PASS]
        return {c.name: c.status for c in got.checks}


@pytest.fixture(params=["files", pytest.param("pg", marks=pytest.mark.pg)])
def dep(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Deployment]:
    data = tmp_path / "data"
    data.mkdir()
    if request.param == "files":
        stores = file_stores(data)
    else:
        stores = pg_stores(request.getfixturevalue("pg_url"), data, pool_size=2)
    e = Engine(data, llm=LLM(api_key=""), stores=stores)
    try:
        for text in (COMPOUND, *CHATTER, MOVED):
            e.remember(S, text)
        assert current_controls(e.ledger, S).supersessions.superseded == {}, "the property these tests rest on: no record at write time"
        yield Deployment(e, stores, request.param == "pg")
    finally:
        stores.close()


def _cited(t: Turn) -> list[int]:
    return [m["event"]["seq"] for m in t.body["memories"]]


def test_a_question_about_now_hands_the_earlier_statement_after_the_newer_one_marked(dep: Deployment) -> None:
    t = dep.turn("Where do I live?")
    cited = _cited(t)
    assert cited.index(3) + 1 == cited.index(0), cited  # Berlin, then Paris right after it
    assert t.body["prompt"]["template"] == TEMPLATE_V3
    assert t.body["states"]["v"] == 2
    assert t.body["states"]["earlier"] == [{"rank": cited.index(0) + 1, "seq": 0, "id": t.body["memories"][cited.index(0)]["event"]["id"], "newer": 3}]
    said = t.body["memories"][cited.index(0)]["event"]["ts"]
    assert f"[earlier statement, said {said}, replaced by seq 3]" in t.answer  # the stand-in repeats the prompt's marks
    rows = dep.report(t)
    assert rows["states.earlier"] == PASS and rows["prompt.hash"] == PASS and rows["ledger.states"] == PASS


def test_the_prompt_the_model_was_handed_carries_the_mark(dep: Deployment) -> None:
    t = dep.turn("Where do I live?")
    view = parse_receipt(rbody.dump_file(t.envelope)).body
    messages = build_messages(TEMPLATE_V3, view["query"]["event"]["text"], [m["event"] for m in view["memories"]], prompt_marks(view))
    assert prompt_hash(messages) == t.body["prompt"]["sha256"]
    quoted = json.loads(messages[1]["content"].split("\n", 1)[1].split("\n\nQUESTION:")[0])
    states = {m["seq"]: m["state"] for m in quoted}
    assert states[0].startswith("[earlier statement, said ") and states[0].endswith("replaced by seq 3]") and states[3] == "live"


def test_a_question_about_the_past_gets_the_earlier_statement_and_the_newer_marked(dep: Deployment) -> None:
    t = dep.turn("Where did I live before?")
    cited = _cited(t)
    assert 0 in cited and 3 in cited
    assert [(e["seq"], e["newer"]) for e in t.body["states"]["earlier"]] == [(0, 3)]
    assert dep.report(t)["states.earlier"] == PASS


def test_a_clause_that_did_not_change_is_not_marked(dep: Deployment) -> None:
    t = dep.turn("What is my job?")
    assert 0 in _cited(t) and "earlier" not in t.body.get("states", {})
    assert t.body["prompt"]["template"] != TEMPLATE_V3


def test_each_receipt_replays(dep: Deployment) -> None:
    for q in ("Where do I live?", "Where did I live before?"):
        t = dep.turn(q)
        got = replay(dep.stores, Cites(dep.stores), parse_receipt(rbody.dump_file(t.envelope)))
        assert got.verdict == REPLAYED, got.lines()


def test_a_format_1_turn_leaves_the_earlier_statement_out_unmarked(tmp_path: Path) -> None:
    e = Engine(tmp_path / "data", llm=LLM(api_key=""), receipt_format=rbody.RECEIPT_VERSION)
    try:
        for text in (COMPOUND, *CHATTER, MOVED):
            e.remember(S, text)
        t = e.turn(S, "Where do I live?", k=3)
        assert 0 not in [m["event"]["seq"] for m in t.body["memories"]] and t.body["prompt"]["template"] == TEMPLATE_V1
        assert "earlier statement" not in t.answer
    finally:
        e.index.close()
        e.ledger.close()


def hit(seq: int, rank: int, text: str, newest: bool = False) -> Hit:
    return Hit(S, f"e{seq}", seq, "user", text, {}, "d" * 64, "c" * 64, "2026-01-01T00:00:00Z", 1.0, 0.0, 1.0, rank, newest=newest)


class TestWithEarlierSlots:
    """chat.supersede.with_earlier, over hits (no store): how earlier statements take slots (FORMAT.md §20.1)."""

    PARIS, BERLIN = hit(0, 1, COMPOUND), hit(3, 3, MOVED, newest=True)

    def test_it_takes_back_the_slot_of_the_lowest_hit_after_the_statement_replacing_it(self) -> None:
        kept = [hit(1, 1, CHATTER[0]), hit(2, 2, CHATTER[1]), self.BERLIN]
        out, marks = with_earlier("Where do I live?", kept, [self.PARIS], 3)
        assert [h.seq for h in out] == [1, 3, 0] and [h.rank for h in out] == [1, 2, 3] and marks == {0: 3}

    def test_the_k_never_grows_and_the_newest_keeps_its_slot(self) -> None:
        out, marks = with_earlier("Where do I live?", [self.BERLIN], [self.PARIS], 1)
        assert [h.seq for h in out] == [3] and marks == {}

    def test_room_left_in_the_k_takes_it_without_dropping_anything(self) -> None:
        out, marks = with_earlier("Where do I live?", [hit(1, 1, CHATTER[0]), self.BERLIN], [self.PARIS], 5)
        assert [h.seq for h in out] == [1, 3, 0] and marks == {0: 3}

    def test_a_statement_that_is_not_earlier_among_the_k_is_not_handed_back(self) -> None:
        out, marks = with_earlier("Where do I live?", [hit(1, 1, CHATTER[0])], [self.PARIS], 3)
        assert [h.seq for h in out] == [1] and marks == {}  # its newer one is not in the K: no mark could name it

    def test_for_the_past_each_earlier_statement_among_the_k_is_named(self) -> None:
        assert earlier_among("Where did I live before?", [self.PARIS, hit(1, 2, CHATTER[0]), self.BERLIN]) == {0: 3}


def test_receipts_show_on_the_command_line_reads_the_mark(dep: Deployment, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cli.prog_receipts import main as receipts_main

    t = dep.turn("Where do I live?")
    kept = tmp_path / "receipt.json"  # the file a visitor keeps (on PostgreSQL the row is the record)
    kept.write_bytes(rbody.dump_file(t.envelope))
    assert receipts_main(["show", str(kept)]) == 0
    out = capsys.readouterr().out
    assert "1 earlier statement(s) (marked in the prompt)" in out and "earlier statement (said " in out and "replaced by seq 3" in out
