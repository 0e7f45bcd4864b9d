"""Nothing the visitor withheld reaches a model (issue 28, item 1).

A revoked memory (and an answer that may quote one), an erased one, and — with ask me first on — any memory the
person did not approve must appear in no request to any model, whatever the purpose: the answer, or the
supersession proposer that runs on every new user statement (a turn's question, MCP `remember`, the question of an
ask-me-first turn). The provider is a fake OpenAI-compatible server on 127.0.0.1 that logs every request body and,
as the worst model would, proposes every earlier statement it is shown as superseded. Each test checks every byte of
every logged request body for the withheld marker, on both backends.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from chat.engine import Engine
from control.revocation import revoke
from control.settings import set_consent
from facts.model import INSTRUCTIONS
from storage.stores import file_stores, pg_stores

from .test_llm import KEY, FakeGroq, Reply, chunk, clear_groq_env, completion_body, serving, sse

SUPERSEDE_HEAD = INSTRUCTIONS.splitlines()[0]


class LoggingModel(FakeGroq):
    """Logs every request (FakeGroq.requests); answers a supersession prompt by proposing every statement shown,
    and a chat prompt with a short streamed or plain answer."""

    @property  # type: ignore[override]
    def reply(self) -> Reply:
        req = self.requests[-1]["json"]
        messages = req["messages"]
        if messages and messages[0]["content"].startswith(SUPERSEDE_HEAD):
            shown = json.loads(messages[1]["content"])
            items = [
                {"newer_id": shown["new_statement"]["id"], "older_id": e["id"], "attribute": "residence", "reason": "changed"}
                for e in shown["earlier_statements"]
            ]
            return Reply(body=completion_body(json.dumps(items)))
        if req.get("stream"):
            return Reply(body=sse(chunk("Noted."), chunk(finish="stop")), content_type="text/event-stream")
        return Reply(body=completion_body("Noted."))

    @reply.setter
    def reply(self, value: Reply) -> None:
        pass

    def bodies(self) -> list[str]:
        return [json.dumps(r["json"], ensure_ascii=False) for r in self.requests]

    def supersession_requests(self) -> int:
        return sum(1 for r in self.requests if r["json"]["messages"][0]["content"].startswith(SUPERSEDE_HEAD))


Opener = Callable[[], Engine]


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoggingModel]:
    clear_groq_env(monkeypatch)
    with serving(LoggingModel()) as server:
        yield server


@pytest.fixture(params=["files", pytest.param("postgresql", marks=pytest.mark.pg)])
def engine(request: pytest.FixtureRequest, tmp_path: Path, model: LoggingModel) -> Iterator[Engine]:
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    data = tmp_path / "data"
    data.mkdir()
    stores = file_stores(data) if url is None else pg_stores(url, data)
    eng = Engine(stores.data_dir, stores=stores, llm=model.llm(api_key=KEY))
    yield eng
    eng.close()


def _revoke(eng: Engine, session: str, seq: int) -> None:
    revoke(eng.data_dir, session, seq, stores=eng.stores, key=eng.key)


def _absent(model: LoggingModel, marker: str) -> None:
    """The marker is in no request body, in any case (each body whole, as sent)."""
    assert model.requests, "the fake provider saw no request at all: the test would prove nothing"
    leaked = [i for i, body in enumerate(model.bodies()) if marker.lower() in body.lower()]
    assert not leaked, f"{marker!r} reached the model in request(s) {leaked} of {len(model.requests)}"


class TestRevoked:
    def test_a_revoked_statement_is_in_no_request_when_a_turns_question_changes_its_fact(self, engine: Engine, model: LoggingModel) -> None:
        engine.turn("s1", "I live in Quuxborough")
        _revoke(engine, "s1", 0)
        model.requests.clear()
        engine.turn("s1", "we've just moved to Bristol, so I live there now")
        _absent(model, "Quuxborough")

    def test_a_revoked_statement_is_in_no_request_when_remember_states_a_new_fact(self, engine: Engine, model: LoggingModel) -> None:
        engine.remember("s1", "I live in Quuxborough")
        engine.remember("s1", "my sister lives in Paris")
        _revoke(engine, "s1", 0)
        model.requests.clear()
        engine.remember("s1", "we've just moved to Bristol, so I live there now")
        engine.turn("s1", "where do I live now?")
        _absent(model, "Quuxborough")

    def test_a_revoked_statement_is_never_superseded_by_a_model_proposal(self, engine: Engine, model: LoggingModel) -> None:
        from control.revocation import current

        engine.remember("s1", "I live in Quuxborough")
        _revoke(engine, "s1", 0)
        engine.remember("s1", "we've just moved to Bristol, so I live there now")
        assert 0 not in current(engine.ledger, "s1").supersessions.superseded


class TestAskMeFirst:
    def test_an_unapproved_memory_is_in_no_request_of_a_consent_turn(self, engine: Engine, model: LoggingModel) -> None:
        engine.remember("s1", "my dev server port is 47113")
        set_consent(engine.stores, "s1", True)
        model.requests.clear()
        proposal = engine.propose("s1", "I moved the dev server to 8080")
        assert any(c.text == "my dev server port is 47113" for c in proposal.candidates)  # it was proposed, not approved
        turn = engine.answer(proposal.token, [])
        assert turn.hits == [] or list(turn.hits) == []
        _absent(model, "47113")

    def test_with_ask_me_first_on_the_supersession_detector_makes_no_request(self, engine: Engine, model: LoggingModel) -> None:
        engine.remember("s1", "my dev server port is 47113")
        set_consent(engine.stores, "s1", True)
        model.requests.clear()
        engine.remember("s1", "I moved the dev server to 8080")
        proposal = engine.propose("s1", "which port is the dev server on?")
        engine.answer(proposal.token, [])
        assert model.supersession_requests() == 0
        _absent(model, "47113")

    def test_with_ask_me_first_on_the_local_rules_still_record_the_change(self, engine: Engine, model: LoggingModel) -> None:
        from control.revocation import current

        engine.remember("s1", "my dev server port is 47113")
        set_consent(engine.stores, "s1", True)
        engine.remember("s1", "I moved the dev server to 8080")
        held = current(engine.ledger, "s1").supersessions.superseded
        assert 0 in held and held[0].decided_by.startswith("rule:")

    def test_a_revoked_memory_is_in_no_request_when_remember_runs_with_ask_me_first_on(self, engine: Engine, model: LoggingModel) -> None:
        engine.remember("s1", "my dev server port is 47113")
        set_consent(engine.stores, "s1", True)
        _revoke(engine, "s1", 0)
        model.requests.clear()
        engine.remember("s1", "I moved the dev server to 8080")
        proposal = engine.propose("s1", "what port is the dev server on?")
        engine.answer(proposal.token, [c.event_id for c in proposal.candidates])  # everything proposed, approved
        _absent(model, "47113")


class TestLinesNoTurnAccountsFor:
    def test_an_imported_reply_after_a_revoked_statement_is_in_no_request(self, engine: Engine, model: LoggingModel) -> None:
        lines = [
            json.dumps({"role": "user", "text": "my locker code word is Quuxborough"}).encode(),
            json.dumps({"role": "assistant", "text": "Got it: your locker code word is Quuxborough."}).encode(),
            json.dumps({"role": "user", "text": "I like green tea"}).encode(),
        ]
        engine.ledger.import_jsonl("s1", lines)
        engine.index.index_session("s1")
        _revoke(engine, "s1", 0)
        model.requests.clear()
        turn = engine.turn("s1", "what is my locker code word?")
        _absent(model, "Quuxborough")
        assert 1 not in [h.seq for h in turn.hits]

    def test_an_imported_reply_before_every_revoked_statement_still_reaches_the_model(self, engine: Engine, model: LoggingModel) -> None:
        lines = [
            json.dumps({"role": "user", "text": "my locker code word is Quuxborough"}).encode(),
            json.dumps({"role": "assistant", "text": "Got it: your locker code word is Quuxborough."}).encode(),
            json.dumps({"role": "user", "text": "I like green tea"}).encode(),
        ]
        engine.ledger.import_jsonl("s1", lines)
        engine.index.index_session("s1")
        _revoke(engine, "s1", 2)  # after the reply: the reply cannot quote it
        turn = engine.turn("s1", "what is my locker code word?")
        assert 1 in [h.seq for h in turn.hits]
