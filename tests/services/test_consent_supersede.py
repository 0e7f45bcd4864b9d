"""Ask me first and facts that change (issues 11 and 12): a person's approval never hands the model a dead fact unmarked.

Between a proposal and its answer a proposed statement may be superseded, or an answer that quoted one may become
an answer that may repeat a dead fact. An approved statement superseded by now is sent marked (template v2) and
its state is in the receipt; an approved answer that may quote a superseded statement is refused, as one that
may quote a revoked memory is: before the token is spent when the supersession came first, as a failed turn
(nothing sent to the model) when the consent turn's own question made it.

The answers are a model's that quotes its memories (tests/quoting_model.py, a loopback server the real SDK talks to):
the offline stand-in's replies are never handed back as memories (chat.stand_ins), so they cannot be proposed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chat.consent import ConsentError
from chat.engine import Engine, Turn, TurnError
from control.revocation import current
from receipts.prompt import TEMPLATE_V2
from receipts.verify import FAIL, Report
from storage.files.receipts.api import verify_bytes

from ..quoting_model import quoting_engine

LEEDS, DOG, BRISTOL = "I live in Leeds", "My dog is called Rex", "We've just moved to Bristol"
NOW = "Which city do I live in?"




def ledger_bytes(e: Engine) -> dict[str, str]:
    """Every session file but the locks, by hash: what 'nothing appended' compares."""
    root = e.data_dir / "sessions"
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file() and "lock" not in p.name}


def verify(e: Engine, turn: Turn) -> Report:
    return verify_bytes(turn.receipt_path.read_bytes(), trusted=[e.key.public_key], data_dir=e.data_dir)


def failed(report: Report) -> list[dict[str, Any]]:
    return [c.to_dict() for c in report.checks if c.status == FAIL]


def receipts(e: Engine, session: str = "alice") -> list[Path]:
    return sorted((e.data_dir / "sessions" / session / "receipts").glob("*.json"))


@pytest.fixture
def eng(tmp_path: Path) -> Iterator[Engine]:
    e = quoting_engine(tmp_path / "d")
    yield e
    e.index.close()
    e.ledger.close()


@pytest.fixture
def quoted(eng: Engine) -> Turn:
    """'I live in Leeds' (seq 0), then a turn whose answer (seq 2) quotes it."""
    eng.remember("alice", LEEDS)
    asked = eng.turn("alice", NOW)  # question 1, answer 2
    assert asked.assistant_event.seq == 2 and LEEDS in asked.answer, "the answer must quote the old fact"
    return asked


class TestApprovedStatement:
    def test_a_statement_superseded_after_the_proposal_is_sent_marked_and_its_state_is_in_the_receipt(self, eng: Engine) -> None:
        eng.remember("alice", LEEDS)
        eng.remember("alice", DOG)
        p = eng.propose("alice", NOW)
        assert 0 in [c.seq for c in p.candidates]
        eng.remember("alice", BRISTOL)  # seq 2, its record at 3
        assert current(eng.ledger, "alice").supersessions.excluded() == [0]
        t = eng.answer(p.token, [c.event_id for c in p.candidates if c.seq == 0], session="alice")
        assert t.body["prompt"]["template"] == TEMPLATE_V2
        [entry] = t.body["states"]["superseded"]
        assert (entry["rank"], entry["seq"], entry["by"]["event"]["seq"]) == (1, 0, 3)
        assert f"[superseded at {entry['by']['event']['ts']} by seq 2] {LEEDS}" in t.answer  # the model quotes the mark
        report = verify(eng, t)
        assert report.verdict == "verified", failed(report)

    def test_a_statement_the_consent_question_supersedes_is_sent_marked(self, eng: Engine) -> None:
        eng.remember("alice", LEEDS)
        p = eng.propose("alice", f"{BRISTOL}. {NOW}")
        t = eng.answer(p.token, [c.event_id for c in p.candidates if c.seq == 0], session="alice")
        assert [(x["seq"], x["by"]["event"]["seq"]) for x in t.body["states"]["superseded"]] == [(0, t.user_event.seq + 1)]
        assert t.body["prompt"]["template"] == TEMPLATE_V2 and verify(eng, t).verdict == "verified"


class TestApprovedAnswerQuotingADeadFact:
    def test_an_answer_that_cited_a_statement_superseded_since_the_proposal_is_refused_and_nothing_is_appended(self, eng: Engine, quoted: Turn) -> None:
        p = eng.propose("alice", NOW)
        answer = quoted.assistant_event
        assert answer.seq in [c.seq for c in p.candidates]
        eng.remember("alice", BRISTOL)  # seq 3 supersedes seq 0
        before = ledger_bytes(eng)
        with pytest.raises(ConsentError, match=f"memory seq {answer.seq} is an answer that cited seq 0, superseded by seq 3 since it was proposed; propose again"):
            eng.answer(p.token, [answer.id], session="alice")
        assert ledger_bytes(eng) == before
        # withholding it is fine, and the refusal did not spend the token
        t = eng.answer(p.token, [c.event_id for c in p.candidates if c.seq != answer.seq], session="alice")
        assert answer.seq not in [m["event"]["seq"] for m in t.body["memories"]]
        assert verify(eng, t).verdict == "verified"

    def test_a_question_about_the_past_does_not_let_it_through(self, eng: Engine, quoted: Turn) -> None:
        p = eng.propose("alice", "Which city did I live in before?")
        eng.remember("alice", BRISTOL)
        with pytest.raises(ConsentError, match="superseded by seq 3 since it was proposed"):
            eng.answer(p.token, [quoted.assistant_event.id], session="alice")

    def test_an_answer_quoting_a_statement_the_question_itself_supersedes_fails_the_turn_before_the_model(self, eng: Engine, quoted: Turn) -> None:
        p = eng.propose("alice", f"{BRISTOL}. {NOW}")
        answer = quoted.assistant_event
        assert answer.seq in [c.seq for c in p.candidates]
        called: list[Any] = []
        eng.llm.complete = lambda *a, **k: called.append(a)  # type: ignore[method-assign]
        with pytest.raises(TurnError, match=f"approved memory seq {answer.seq} is an answer that cited seq 0, which the message at seq 3 supersedes"):
            eng.answer(p.token, [answer.id], session="alice")
        assert called == [] and len(receipts(eng)) == 1  # the model saw nothing; no receipt but the first turn's
        count = eng.ledger.head("alice")[0]
        q, _record, note = eng.ledger.read_events("alice", range(3, count))
        assert (q.seq, q.role, note.role, note.meta["kind"]) == (3, "user", "system", "turn_failure")
        assert "seq 3 was refused" in note.text and LEEDS not in note.text
        assert current(eng.ledger, "alice").supersessions.excluded() == [0]
        with pytest.raises(ConsentError, match="already used"):
            eng.answer(p.token, [], session="alice")
        # proposed again, the answer is left out and the old fact is not proposed for a question about now
        again = eng.propose("alice", NOW)
        assert {0, answer.seq}.isdisjoint(c.seq for c in again.candidates)

    def test_withholding_that_answer_lets_the_same_question_through(self, eng: Engine, quoted: Turn) -> None:
        p = eng.propose("alice", f"{BRISTOL}. {NOW}")
        t = eng.answer(p.token, [c.event_id for c in p.candidates if c.seq != quoted.assistant_event.seq], session="alice")
        assert verify(eng, t).verdict == "verified"
