"""The model path reads what the detector reads (issue 12): a statement over MAX_READ_CHARS is a note, not a single
fact, and code — not the model — keeps the model from superseding it, older or new. Through the engine and the
fake OpenAI-compatible server of tests/services/test_llm.py on 127.0.0.1; nothing touches the network."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chat.engine import Engine
from facts.rules import MAX_READ_CHARS
from ledger.supersessions import SUPERSEDE_TEXT, supersession_of_record

from .test_llm import KEY, FakeGroq, Reply, clear_groq_env, completion_body, serving

NOTE = "I live in Leeds. " + "We walked along the canal and had lunch by the water. " * 8
LEEDS, BRISTOL = "I live in Leeds", "We've just moved to Bristol"
LONG_BRISTOL = "We've just moved to Bristol. " + "The van was late and it rained all afternoon. " * 9
assert len(NOTE) > MAX_READ_CHARS and len(LONG_BRISTOL) > MAX_READ_CHARS


class Proposing(FakeGroq):
    """A model that proposes every id in `older` as superseded by the new statement it was shown — shown or not."""

    older: list[str]

    @property  # type: ignore[override]
    def reply(self) -> Reply:
        shown = json.loads(self.requests[-1]["json"]["messages"][1]["content"])
        new = shown["new_statement"]["id"]
        items = [{"newer_id": new, "older_id": o, "attribute": "residence", "reason": "the person moved"} for o in self.older]
        return Reply(body=completion_body(json.dumps(items), model="served-model-id"))

    @reply.setter
    def reply(self, value: Reply) -> None:
        pass


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[Proposing]:
    clear_groq_env(monkeypatch)
    with serving(Proposing()) as server:
        server.older = []
        yield server


@pytest.fixture
def eng(model: Proposing, tmp_path: Path) -> Iterator[Engine]:
    e = Engine(tmp_path / "d", llm=model.llm(api_key=KEY))
    yield e
    e.index.close()
    e.ledger.close()


def links(e: Engine, session: str = "alice") -> list[tuple[int, int, str]]:
    count = e.ledger.head(session)[0]
    found = [supersession_of_record(ev.to_dict()) for ev in e.ledger.read_events(session, range(count)) if ev.text == SUPERSEDE_TEXT]
    return [(s.old_seq, s.new_seq, s.decided_by) for s in found if s is not None]


def shown_ids(model: Proposing) -> list[list[Any]]:
    return [[x["id"] for x in json.loads(r["json"]["messages"][1]["content"])["earlier_statements"]] for r in model.requests]


def test_the_model_cannot_supersede_an_older_statement_over_max_read_chars(model: Proposing, eng: Engine) -> None:
    note = eng.remember("alice", NOTE)  # seq 0
    leeds = eng.remember("alice", LEEDS)  # seq 1
    model.older = [note.id, leeds.id]  # the model names the note too, though it was not shown
    eng.remember("alice", BRISTOL)  # seq 2
    assert shown_ids(model) == [[leeds.id]]
    assert links(eng) == [(1, 2, "model:served-model-id")]


def test_with_only_a_note_to_compare_no_request_is_made_and_nothing_is_superseded(model: Proposing, eng: Engine) -> None:
    note = eng.remember("alice", NOTE)
    model.older = [note.id]
    eng.remember("alice", BRISTOL)
    assert model.requests == [] and links(eng) == []


def test_a_new_statement_over_max_read_chars_supersedes_nothing_and_asks_no_model(model: Proposing, eng: Engine) -> None:
    leeds = eng.remember("alice", LEEDS)
    model.older = [leeds.id]
    eng.remember("alice", LONG_BRISTOL)
    assert model.requests == [] and links(eng) == []


def test_a_readable_pair_is_still_the_models_to_decide(model: Proposing, eng: Engine) -> None:
    leeds = eng.remember("alice", LEEDS)
    model.older = [leeds.id]
    eng.remember("alice", BRISTOL)
    assert links(eng) == [(0, 1, "model:served-model-id")] and len(model.requests) == 1
