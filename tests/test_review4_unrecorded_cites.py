"""Reviewer finding (issue 28, item 1): an answer that quoted a memory but whose cites were never recorded.

chat.engine._complete appends the answer, indexes it, and only then records what its turn cited (cites.record).
When indexing the answer fails (IndexUnavailable: "the watermark keeps moving under us (another writer?)"), the
turn fails but the answer stays in the ledger; its `.cites` record exists, but chat.citing reads `.cites` records
only once per session and process, so this process never learns what that answer cited. The next indexing catches
the answer up, and once the memory it quoted is revoked, retrieval still hands the answer — with the revoked words
— to the model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chat.engine import Engine, TurnError
from control.revocation import revoke
from retrieval.model import IndexUnavailable

from .test_llm import KEY, Reply, clear_groq_env, completion_body, serving
from .test_model_withheld import SUPERSEDE_HEAD, LoggingModel, _absent

MARKER = "Quuxborough"


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
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[QuotingModel]:
    clear_groq_env(monkeypatch)
    with serving(QuotingModel()) as server:
        yield server


def test_an_answer_whose_turn_failed_after_it_was_appended_never_carries_a_revoked_memory(
    model: QuotingModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    eng = Engine(tmp_path / "d", llm=model.llm(api_key=KEY))
    try:
        eng.remember("s1", f"my locker code word is {MARKER}")  # seq 0
        eng.remember("s1", "I like green tea")  # seq 1
        revoke(eng.data_dir, "s1", 1, stores=eng.stores, key=eng.key)  # anything revoked: the session's .cites are read now

        real = eng.index.index_session
        failed: list[int] = []

        def flaky(session: str, new_events: Any = None, **kw: Any) -> Any:
            if new_events and new_events[0].role == "assistant" and not failed:
                failed.append(new_events[0].seq)
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
        model.requests.clear()
        eng.turn("s1", "what did you tell me about my locker code word?")
        _absent(model, MARKER)
    finally:
        eng.close()


def test_an_answer_left_by_another_process_killed_mid_turn_never_carries_a_revoked_memory(
    model: QuotingModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = Engine(tmp_path / "d", llm=model.llm(api_key=KEY))  # the long-running app
    try:
        app.remember("s1", f"my locker code word is {MARKER}")  # seq 0
        app.remember("s1", "I like green tea")  # seq 1
        revoke(app.data_dir, "s1", 1, stores=app.stores, key=app.key)
        app.turn("s1", "tell me about green tea")  # the app has read the session's .cites records once

        cli = Engine(tmp_path / "d", llm=model.llm(api_key=KEY))  # `python -m chat turn` on the same DATA_DIR

        class Killed(BaseException):
            pass

        def killed(*_a: Any, **_k: Any) -> None:
            raise Killed  # the process dies right after appending (and indexing) its answer

        monkeypatch.setattr(cli.cites, "record", killed)
        with pytest.raises(Killed):
            cli.turn("s1", "what is my locker code word?")
        cli.close()

        revoke(app.data_dir, "s1", 0, stores=app.stores, key=app.key)
        model.requests.clear()
        app.turn("s1", "what did you tell me about my locker code word?")
        _absent(model, MARKER)
    finally:
        app.close()
