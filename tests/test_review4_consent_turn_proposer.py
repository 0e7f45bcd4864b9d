"""Reviewer finding (issue 28, item 1): a consent turn (propose → answer, e.g. MCP propose_turn / answer_turn, which
work whatever the "ask me first" switch says) promises that only the approved memories reach the model. With the
switch off, the question of that very turn runs the supersession proposer (chat.withheld's view has ask_first False),
which sends the model the earlier statements the person just declined for this turn."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from chat.engine import Engine

from .test_llm import KEY, clear_groq_env, serving
from .test_model_withheld import LoggingModel, _absent


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoggingModel]:
    clear_groq_env(monkeypatch)
    with serving(LoggingModel()) as server:
        yield server


def test_a_memory_declined_in_a_consent_turn_is_in_no_request_of_that_turn(model: LoggingModel, tmp_path: Path) -> None:
    eng = Engine(tmp_path / "d", llm=model.llm(api_key=KEY))
    try:
        eng.remember("s1", "my dev server port is 47113")
        model.requests.clear()
        proposal = eng.propose("s1", "I moved the dev server to 8080")
        assert any("47113" in c.text for c in proposal.candidates)  # proposed: the person sees it and declines it
        turn = eng.answer(proposal.token, [])  # nothing approved
        assert list(turn.hits) == []
        _absent(model, "47113")
    finally:
        eng.close()
