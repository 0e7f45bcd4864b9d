"""Reviewer finding (issue 28, item 2): facts.rules.same_fact ignores negation and values, so a model
proposal is accepted where the new statement says that ANOTHER value no longer holds — "I no longer live in Leeds"
supersedes "I live in York", which stays true (the rules refuse the pair: "no attribute of the same subject changes
value"). A true, current fact is hidden from every later turn on a model's word alone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from chat.engine import Engine
from control.revocation import current
from facts.model import Statement, accept

from .test_facts_model_gate import _reply_all
from .test_llm import KEY, clear_groq_env, serving
from .test_model_withheld import LoggingModel


@pytest.fixture
def greedy(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoggingModel]:
    clear_groq_env(monkeypatch)
    with serving(LoggingModel()) as server:
        yield server


def test_a_negation_of_another_value_never_supersedes_a_live_fact(greedy: LoggingModel, tmp_path: Path) -> None:
    eng = Engine(tmp_path / "d", llm=greedy.llm(api_key=KEY))
    try:
        eng.remember("s1", "I live in York")
        eng.remember("s1", "I no longer live in Leeds")
        held = current(eng.ledger, "s1").supersessions.superseded
        assert 0 not in held, f"'I live in York' was hidden by 'I no longer live in Leeds': {held.get(0)}"
    finally:
        eng.close()


@pytest.mark.parametrize(
    ("new", "older"),
    [
        ("I no longer live in Leeds", "I live in York"),
        ("I used to work at Acme", "I work at Globex"),
        ("I'm not vegan anymore", "I'm vegetarian"),
    ],
)
def test_accept_a_negated_other_value_is_a_suggestion(new: str, older: str) -> None:
    o, n = Statement("e0", 0, "s", older), Statement("e1", 1, "s", new)
    verdict = accept(_reply_all(n, [o]), n, [o], model="m")
    assert verdict.accepted == () and [p.older_seq for p in verdict.suggested] == [0]
