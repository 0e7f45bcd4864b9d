"""Reviewer finding (issue 28, item 2): "the model may judge that a value changed, never which fact it is about" —
but the accepted proposal keeps the model's own attribute label, and the supersession record's stored reason is made
from it. A port change the rules read as (dev server, port) is recorded as "residence changed" because the model
said so: the record (kept for good, shown in memory_history) states a fact the rules did not find."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from chat.engine import Engine
from control.revocation import current
from facts.rules import same_fact

from .test_llm import KEY, clear_groq_env, serving
from .test_model_withheld import LoggingModel


@pytest.fixture
def greedy(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoggingModel]:
    clear_groq_env(monkeypatch)
    with serving(LoggingModel()) as server:  # labels every proposal "residence"
        yield server


def test_the_recorded_reason_names_the_fact_the_rules_read(greedy: LoggingModel, tmp_path: Path) -> None:
    old, new = "my dev server port is 47113", "I moved the dev server to 8080"
    assert same_fact(new, old) == ("dev server", "port")
    eng = Engine(tmp_path / "d", llm=greedy.llm(api_key=KEY))
    try:
        eng.remember("s1", old)
        eng.remember("s1", new)
        link = current(eng.ledger, "s1").supersessions.superseded[0]
        assert link.decided_by.startswith("model:")
        assert link.reason is None or "residence" not in link.reason, f"recorded reason {link.reason!r} names a fact the rules did not read"
    finally:
        eng.close()
