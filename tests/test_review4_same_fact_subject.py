"""Reviewer findings (issue 28, item 2): facts.rules.same_fact accepts model proposals the rules
themselves refuse — so a model's proposal is recorded where only a person should decide (it should have been
`ModelVerdict.suggested`). The fake provider proposes every statement it is shown (tests/test_model_withheld.py)."""

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


@pytest.fixture
def eng(greedy: LoggingModel, tmp_path: Path) -> Iterator[Engine]:
    e = Engine(tmp_path / "d", llm=greedy.llm(api_key=KEY))
    yield e
    e.close()


def test_two_sisters_are_not_the_same_subject_model_proposal_is_only_a_suggestion(eng: Engine) -> None:
    eng.remember("s1", "my older sister lives in Leeds")
    eng.remember("s1", "my younger sister lives in Bristol")
    held = current(eng.ledger, "s1").supersessions.superseded
    assert 0 not in held, f"the older sister's residence was superseded by the younger sister's: {held.get(0)}"


def test_accept_two_sisters_is_a_suggestion() -> None:
    o = Statement("e0", 0, "s", "my older sister lives in Leeds")
    n = Statement("e1", 1, "s", "my younger sister lives in Bristol")
    verdict = accept(_reply_all(n, [o]), n, [o], model="m")
    assert verdict.accepted == () and [p.older_seq for p in verdict.suggested] == [0]


@pytest.mark.parametrize(
    ("new", "older"),
    [
        ("my husband works at Globex", "my ex-husband works at Acme"),
        ("my eldest son lives in Bristol", "my youngest son lives in Leeds"),
    ],
)
def test_accept_two_people_read_as_one_is_a_suggestion(new: str, older: str) -> None:
    o, n = Statement("e0", 0, "s", older), Statement("e1", 1, "s", new)
    verdict = accept(_reply_all(n, [o]), n, [o], model="m")
    assert verdict.accepted == () and [p.older_seq for p in verdict.suggested] == [0]
