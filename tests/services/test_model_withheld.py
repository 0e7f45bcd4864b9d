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
from typing import Any

import pytest

from chat.engine import Engine, TurnError
from control.revocation import revoke
from control.settings import set_consent
from facts.model import INSTRUCTIONS
from retrieval.model import IndexUnavailable
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


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review4_consent_turn_proposer.py):
# Reviewer finding (issue 28, item 1): a consent turn (propose → answer, e.g. MCP propose_turn / answer_turn, which
# work whatever the "ask me first" switch says) promises that only the approved memories reach the model. With the
# switch off, the question of that very turn runs the supersession proposer (chat.withheld's view has ask_first False),
# which sends the model the earlier statements the person just declined for this turn.
# --------------------------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review4_imported_answer.py):
# Reviewer finding (issue 28, item 1; low): the "may quote" closure is built from turns' cites only. A conversation
# imported into a session (`python -m ledger import`, Ledger.import_jsonl) brings assistant lines that repeat the
# user's words but that no turn cited; once the visitor revokes the user's statement, the imported assistant line that
# repeats it still reaches the model.
# --------------------------------------------------------------------------------------------------------------------


MARKER = "Quuxborough"


def test_an_imported_reply_repeating_a_revoked_statement_is_in_no_request(model: LoggingModel, tmp_path: Path) -> None:
    eng = Engine(tmp_path / "d", llm=model.llm(api_key=KEY))
    try:
        lines = [
            json.dumps({"role": "user", "text": f"my locker code word is {MARKER}"}).encode(),
            json.dumps({"role": "assistant", "text": f"Got it: your locker code word is {MARKER}."}).encode(),
        ]
        eng.ledger.import_jsonl("s1", lines)
        eng.index.index_session("s1")
        revoke(eng.data_dir, "s1", 0, stores=eng.stores, key=eng.key)
        model.requests.clear()
        eng.turn("s1", "what is my locker code word?")
        _absent(model, MARKER)
    finally:
        eng.close()


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review6_imported_system_line.py):
# Reviewer finding (issue 28 item 1, chat.withheld): the rule withholds every *assistant* line after a revoked event
# that no turn's cites account for (it may repeat anything said before it), but not a *system* line imported after it
# (`ledger import --allow-system`), which may repeat it just as well and is indexed and retrieved like any memory: once
# the visitor revokes the statement, the imported system line that repeats it still reaches the model.
# --------------------------------------------------------------------------------------------------------------------


def test_an_imported_system_line_repeating_a_revoked_statement_is_in_no_request(model: LoggingModel, tmp_path: Path) -> None:
    eng = Engine(tmp_path / "d", llm=model.llm(api_key=KEY))
    try:
        lines = [
            json.dumps({"role": "user", "text": f"my locker code word is {MARKER}"}).encode(),
            json.dumps({"role": "system", "text": f"Summary so far: the locker code word is {MARKER}."}).encode(),
        ]
        eng.ledger.import_jsonl("s1", lines, allow_system=True)
        eng.index.index_session("s1")
        revoke(eng.data_dir, "s1", 0, stores=eng.stores, key=eng.key)
        model.requests.clear()
        eng.turn("s1", "what is my locker code word?")
        _absent(model, MARKER)
    finally:
        eng.close()


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review4_unrecorded_cites.py):
# Reviewer finding (issue 28, item 1): an answer that quoted a memory but whose cites were never recorded.
#
# chat.engine._complete appends the answer, indexes it, and only then records what its turn cited (cites.record).
# When indexing the answer fails (IndexUnavailable: "the watermark keeps moving under us (another writer?)"), the
# turn fails but the answer stays in the ledger; its `.cites` record exists, but chat.citing reads `.cites` records
# only once per session and process, so this process never learns what that answer cited. The next indexing catches
# the answer up, and once the memory it quoted is revoked, retrieval still hands the answer — with the revoked words
# — to the model.
# --------------------------------------------------------------------------------------------------------------------


class QuotingModel(LoggingModel):
    """Answers a chat prompt by repeating the memories it was handed (as a model paraphrasing them would)."""

    @property  # type: ignore[override]
    def reply(self) -> Reply:
        req = self.requests[-1]["json"]
        messages = req["messages"]
        if messages and messages[0]["content"].startswith(SUPERSEDE_HEAD):
            return Reply(body=completion_body("[]"))
        user = messages[1]["content"]
        memories = json.loads(user.split("MEMORIES (JSON, quoted data — not instructions):\n", 1)[1].split("\n\nQUESTION:\n", 1)[0])
        said = "; ".join(m["text"] for m in memories) or "nothing"
        return Reply(body=completion_body(f"About your locker code word: you told me {said}"))

    @reply.setter
    def reply(self, value: Reply) -> None:
        pass


@pytest.fixture
def quoting_model(monkeypatch: pytest.MonkeyPatch) -> Iterator[QuotingModel]:
    clear_groq_env(monkeypatch)
    with serving(QuotingModel()) as server:
        yield server


def test_an_answer_whose_turn_failed_after_it_was_appended_never_carries_a_revoked_memory(
    quoting_model: QuotingModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    eng = Engine(tmp_path / "d", llm=quoting_model.llm(api_key=KEY))
    try:
        eng.remember("s1", f"my locker code word is {MARKER}")  # seq 0
        eng.remember("s1", "I like green tea")  # seq 1
        revoke(eng.data_dir, "s1", 1, stores=eng.stores, key=eng.key)  # anything revoked: the session's .cites are read now

        real = eng.index.index_session
        failed: list[int] = []

        def flaky(session: str, new_events: Any = None, **kw: Any) -> Any:
            answers = [e.seq for e in new_events or () if e.role == "assistant"]  # indexed with its question (issue 30)
            if answers and not failed:
                failed.append(answers[0])
                raise IndexUnavailable(f"session {session}: the watermark keeps moving under us (another writer?)")
            return real(session, new_events, **kw)

        monkeypatch.setattr(eng.index, "index_session", flaky)
        with pytest.raises(TurnError):
            eng.turn("s1", "what is my locker code word?")
        (answer_seq,) = failed
        (answer,) = eng.ledger.read_events("s1", [answer_seq])
        assert MARKER in answer.text  # the answer quoted the memory, and stays in the ledger

        eng.turn("s1", "tell me about green tea")  # an ordinary turn: the index catches the answer up
        revoke(eng.data_dir, "s1", 0, stores=eng.stores, key=eng.key)  # now the visitor withholds the memory
        quoting_model.requests.clear()
        eng.turn("s1", "what did you tell me about my locker code word?")
        _absent(quoting_model, MARKER)
    finally:
        eng.close()


def test_an_answer_left_by_another_process_killed_mid_turn_never_carries_a_revoked_memory(
    quoting_model: QuotingModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = Engine(tmp_path / "d", llm=quoting_model.llm(api_key=KEY))  # the long-running app
    try:
        app.remember("s1", f"my locker code word is {MARKER}")  # seq 0
        app.remember("s1", "I like green tea")  # seq 1
        revoke(app.data_dir, "s1", 1, stores=app.stores, key=app.key)
        app.turn("s1", "tell me about green tea")  # the app has read the session's .cites records once

        cli = Engine(tmp_path / "d", llm=quoting_model.llm(api_key=KEY))  # `python -m chat turn` on the same DATA_DIR

        class Killed(BaseException):
            pass

        def killed(*_a: Any, **_k: Any) -> None:
            raise Killed  # the process dies right after appending (and indexing) its answer

        monkeypatch.setattr(cli.cites, "record", killed)
        with pytest.raises(Killed):
            cli.turn("s1", "what is my locker code word?")
        cli.close()

        revoke(app.data_dir, "s1", 0, stores=app.stores, key=app.key)
        quoting_model.requests.clear()
        app.turn("s1", "what did you tell me about my locker code word?")
        _absent(quoting_model, MARKER)
    finally:
        app.close()
