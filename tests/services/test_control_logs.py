"""Memory text is never logged (issue 10 §6): a turn, a search and a forget at DEBUG, and the failures whose
messages would quote a memory, a query or an answer, leave no word of it in any log record — its message, its
arguments, its exception text or its stack."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from chat.engine import Engine
from chat.llm import LLM
from control import forget as control
from storage.files.receipts import files

from ..forget_support import MARKER, NEEDLES, engine, marked_session
from .test_llm import FakeGroq, Reply

_FORMAT = logging.Formatter()


def leaks(records: list[logging.LogRecord]) -> list[str]:
    """Every record that holds the marker anywhere a handler could write it."""
    out = []
    for r in records:
        parts = [str(r.msg), repr(r.args), r.getMessage(), r.exc_text or "", r.stack_info or ""]
        if r.exc_info:
            parts.append(_FORMAT.formatException(r.exc_info))
        blob = "\n".join(parts).lower().encode()
        if any(n in blob for n in NEEDLES):
            out.append(f"{r.name} {r.levelname}: {r.getMessage()[:120]}")
    return out


@pytest.fixture
def debug(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.DEBUG)
    yield caplog


def test_a_turn_a_search_and_a_forget_log_no_memory_text_at_debug(tmp_path: Path, debug: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "data"
    eng = engine(data)
    mem_seq, _turns = marked_session(eng)
    assert any(h.seq == mem_seq for h in eng.index.search("alice", MARKER, k=5).results)
    control.forget(data, "alice", [mem_seq], ledger=eng.ledger, index=eng.index, key=eng.key)
    eng.turn("alice", f"Is my code word {MARKER}?")
    assert leaks(debug.records) == []


@pytest.fixture
def fake() -> Iterator[FakeGroq]:
    server = FakeGroq()
    server.thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.server.shutdown()
        server.server.server_close()


def test_a_provider_error_that_echoes_the_prompt_is_logged_without_its_words(tmp_path: Path, fake: FakeGroq, debug: pytest.LogCaptureFixture) -> None:
    words = f"your message 'My locker code word is {MARKER}' was flagged"
    fake.reply = Reply(status=400, body=json.dumps({"error": {"message": words, "failed_generation": f"The code is {MARKER}"}}).encode())
    eng = Engine(tmp_path / "data", llm=LLM(api_key="gsk_test", base_url=fake.base_url, timeout=5))
    eng.remember("alice", f"My locker code word is {MARKER}")
    turn = eng.turn("alice", "What is my locker code word?")
    assert turn.completion.fallback_reason is not None, "the provider must have failed"
    assert any("400" in r.getMessage() for r in debug.records), "the failure is still logged"
    assert leaks(debug.records) == []


def test_a_receipt_that_cannot_be_read_is_named_in_the_log_without_its_words(tmp_path: Path, debug: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "data"
    eng = engine(data)
    mem_seq, _turns = marked_session(eng)
    path = files.list_receipts(data, "alice")[0]
    env = json.loads(path.read_bytes())
    body = json.loads(base64.b64decode(env["payload"]))
    body["query"]["event"]["id"] = f"my code word is {MARKER}"  # a damaged receipt: the parse error quotes the field
    path.write_text(json.dumps({**env, "payload": base64.b64encode(json.dumps(body).encode()).decode()}))
    control.forget(data, "alice", [mem_seq], ledger=eng.ledger, index=eng.index, key=eng.key)
    assert any(path.name in r.getMessage() for r in debug.records), "the unreadable receipt is still named"
    assert leaks(debug.records) == []


def test_a_turn_failing_with_an_error_that_quotes_the_query_logs_and_records_only_its_class(tmp_path: Path, debug: pytest.LogCaptureFixture) -> None:
    import sqlite3

    from chat.engine import TurnError

    from ..forget_support import files_with_marker

    data = tmp_path / "data"
    eng = engine(data)
    eng.remember("alice", "I like tea")

    def broken(*_a: object, **_k: object) -> None:
        raise sqlite3.OperationalError(f'fts5: syntax error near "{MARKER}"')

    eng.index.search = broken  # type: ignore[method-assign]
    with pytest.raises(TurnError):
        eng.turn("alice", f"Is {MARKER} my code word?")
    note = list(eng.ledger.events("alice"))[-1]
    assert note.meta["kind"] == "turn_failure" and "OperationalError" in note.text
    assert leaks(debug.records) == []
    control.forget(data, "alice", [note.seq - 1], ledger=eng.ledger, index=eng.index, key=eng.key)
    assert files_with_marker(data) == [], "the ledger's note of the failure must not keep the query's words"


def test_a_receipt_the_engine_cannot_restore_to_its_table_is_logged_without_its_words(tmp_path: Path, debug: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "data"
    eng = engine(data)
    marked_session(eng)
    path = files.list_receipts(data, "alice")[0]
    env = json.loads(path.read_bytes())
    body = json.loads(base64.b64decode(env["payload"]))
    body["receipt_id"] = f"my code word is {MARKER}"
    path.write_text(json.dumps({**env, "payload": base64.b64encode(json.dumps(body).encode()).decode()}))
    with eng.index.write() as db:
        db.execute("DELETE FROM receipts")
    eng.index.close()
    engine(data)  # refills the receipts table from the files
    assert any("not restored" in r.getMessage() for r in debug.records)
    assert leaks(debug.records) == []


def test_a_consent_turn_failing_with_an_error_that_quotes_the_query_logs_and_records_only_its_class(tmp_path: Path, debug: pytest.LogCaptureFixture) -> None:
    import sqlite3

    from chat.engine import TurnError

    eng = engine(tmp_path / "data")
    eng.remember("alice", "I like tea")
    proposal = eng.propose("alice", f"Is {MARKER} my code word, and do I like tea?")

    def broken(*_a: object, **_k: object) -> None:
        raise sqlite3.OperationalError(f'fts5: syntax error near "{MARKER}"')

    eng.index.index_session = broken  # type: ignore[method-assign]
    with pytest.raises(TurnError):
        eng.answer(proposal.token, [c.event_id for c in proposal.candidates], session="alice")
    note = list(eng.ledger.events("alice"))[-1]
    assert note.meta["kind"] == "turn_failure" and MARKER not in note.text
    assert leaks(debug.records) == []
