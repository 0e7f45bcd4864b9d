"""A model's supersession proposal must pass the rules (issue 28, item 2): code accepts a proposal only where the
rules read both statements as the same attribute of the same subject (facts.rules.same_fact); any other
proposal is never recorded and is left to a person as a suggestion (Correct this)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from chat.engine import Engine
from control.revocation import current
from facts.model import Statement, accept
from facts.rules import same_fact

from .test_llm import KEY, clear_groq_env, serving
from .test_model_withheld import LoggingModel

BRISTOL = "we've just moved to Bristol, so I live there now"
PARIS = "my sister lives in Paris"
LEEDS = "I live in Leeds"


def _reply_all(new: Statement, older: list[Statement]) -> str:
    return json.dumps([{"newer_id": new.id, "older_id": o.id, "attribute": "residence", "reason": "moved"} for o in older])


class TestAccept:
    def test_a_proposal_about_another_subject_is_a_suggestion_never_accepted(self) -> None:
        paris, leeds = Statement("e0", 0, "s", PARIS), Statement("e1", 1, "s", LEEDS)
        new = Statement("e2", 2, "s", BRISTOL)
        verdict = accept(_reply_all(new, [paris, leeds]), new, [paris, leeds], model="m")
        assert [p.older_seq for p in verdict.accepted] == [1]
        assert [p.older_seq for p in verdict.suggested] == [0]
        assert verdict.decided_by == "model:m"

    @pytest.mark.parametrize(
        ("new", "older"),
        [
            (BRISTOL, "my favourite colour is blue"),
            (BRISTOL, "I work as a nurse"),
            ("I moved the dev server to 8080", "I live in Leeds"),
            ("I eat meat again", "my sister lives in Paris"),
            ("my sister moved to Rome", LEEDS),
        ],
    )
    def test_a_proposal_the_rules_read_as_another_fact_is_not_accepted(self, new: str, older: str) -> None:
        o, n = Statement("e0", 0, "s", older), Statement("e1", 1, "s", new)
        assert same_fact(new, older) is None
        verdict = accept(_reply_all(n, [o]), n, [o], model="m")
        assert verdict.accepted == () and [p.older_seq for p in verdict.suggested] == [0]

    @pytest.mark.parametrize(
        ("new", "older"),
        [(BRISTOL, LEEDS), ("I moved the dev server to 8080", "my dev server port is 47113"), ("I eat meat again", "I'm vegetarian")],
    )
    def test_a_proposal_of_the_same_subject_and_attribute_is_accepted(self, new: str, older: str) -> None:
        o, n = Statement("e0", 0, "s", older), Statement("e1", 1, "s", new)
        verdict = accept(_reply_all(n, [o]), n, [o], model="m")
        assert [p.older_seq for p in verdict.accepted] == [0] and verdict.suggested == ()


@pytest.fixture
def greedy(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoggingModel]:
    clear_groq_env(monkeypatch)
    with serving(LoggingModel()) as server:
        yield server


def test_a_model_proposing_every_statement_shown_supersedes_only_the_same_fact(greedy: LoggingModel, tmp_path: Path) -> None:
    eng = Engine(tmp_path / "d", llm=greedy.llm(api_key=KEY))
    try:
        eng.remember("s1", PARIS)
        eng.remember("s1", LEEDS)
        eng.remember("s1", BRISTOL)
        shown = [json.loads(r["json"]["messages"][1]["content"]) for r in greedy.requests if r["json"]["messages"][1]["content"].startswith("{")]
        assert any(e["text"] == PARIS for s in shown for e in s["earlier_statements"])  # the model was shown it, and proposed it
        held = current(eng.ledger, "s1").supersessions.superseded
        assert sorted(held) == [1] and held[1].decided_by == "model:served-model-id"
    finally:
        eng.close()
