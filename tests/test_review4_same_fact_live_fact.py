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


def test_a_model_proposal_never_hides_another_live_fact_of_the_older_statement(eng: Engine) -> None:
    eng.remember("s1", "I live in Leeds and my dev server port is 3000")
    eng.remember("s1", "I moved the dev server to 8080")
    held = current(eng.ledger, "s1").supersessions.superseded
    # the rules say: "the older statement also states residence (you), which stays true" -- superseding it hides Leeds
    assert 0 not in held, f"'I live in Leeds' was hidden by a dev-server change: {held.get(0)}"


def test_accept_older_statement_with_another_live_fact_is_a_suggestion() -> None:
    o = Statement("e0", 0, "s", "I live in Leeds and my dev server port is 3000")
    n = Statement("e1", 1, "s", "I moved the dev server to 8080")
    verdict = accept(_reply_all(n, [o]), n, [o], model="m")
    assert verdict.accepted == () and [p.older_seq for p in verdict.suggested] == [0]
