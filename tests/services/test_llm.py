"""chat.llm drives the real groq SDK against a fake OpenAI-compatible server on 127.0.0.1.

Nothing here touches the network: every base URL is a loopback port the test
bound itself (or bound and closed, for a refused connection).
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

import pytest

from chat.llm import DEFAULT_MODEL, LLM, NO_KEY_REASON, OFFLINE_MODEL, Completion
from chat.offline import NO_MEMORIES, SNIPPET_CHARS, offline_answer

KEY = "gsk_test_SECRET_key_never_to_be_shown_0123456789"
PATH = "/openai/v1/chat/completions"
MESSAGES = [
    {"role": "system", "content": "You are a careful assistant."},
    {"role": "user", "content": "Where did I say I moved?"},
]
QUERY = "Where did I say I moved?"
TIMEOUT = 2.0
SHORT_TIMEOUT = 0.3


@dataclass(frozen=True)
class Memory:
    seq: int
    role: str
    text: str
    id: str = "ev"


MEMORIES = [
    Memory(12, "user", "I moved to Lisbon last spring.", "ev12"),
    Memory(3, "assistant", "Noted: you live in Porto.", "ev3"),
    Memory(40, "user", "Lisbon rents are high.", "ev40"),
    Memory(41, "user", "A fourth memory that must not be quoted.", "ev41"),
]


# ---------------------------------------------------------------- the fake server


@dataclass
class Reply:
    """What the fake server sends for one request."""

    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    content_length: int | None = None  # a value larger than len(body) makes the connection break mid-body
    stall_before: bool = False  # hold the response until the test ends (a timeout)
    stall_after: bool = False  # send the body so far, then hold (a stream that stalls)
    headers: dict[str, str] = field(default_factory=dict)


class FakeGroq:
    def __init__(self) -> None:
        self.reply = Reply(body=completion_body("Hello from the fake."))
        self.requests: list[dict[str, Any]] = []
        self.release = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                fake.requests.append({"path": self.path, "headers": dict(self.headers), "json": json.loads(raw)})
                reply = fake.reply if self.path == PATH else Reply(status=404, body=b'{"error":{"message":"no route"}}')
                if reply.stall_before:
                    fake.release.wait(10)
                    return
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(reply.content_length or len(reply.body)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(reply.body)
                self.wfile.flush()
                if reply.stall_after:
                    fake.release.wait(10)
                self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def llm(self, **kwargs: Any) -> LLM:
        kwargs.setdefault("api_key", KEY)
        kwargs.setdefault("base_url", self.base_url)
        kwargs.setdefault("timeout", TIMEOUT)
        return LLM(**kwargs)


def completion_body(content: Any, *, model: Any = "served-model-id", drop: tuple[str, ...] = ()) -> bytes:
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
    }
    for key in drop:
        body.pop(key)
    return json.dumps(body).encode()


def chunk(content: str | None = None, *, finish: str | None = None, reasoning: str | None = None) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if reasoning is not None:
        delta["reasoning"] = reasoning
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "served-model-id",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def sse(*events: dict[str, Any] | bytes, done: bool = True) -> bytes:
    out = b"".join(e if isinstance(e, bytes) else b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    return out + (b"data: [DONE]\n\n" if done else b"")


def stream_reply(body: bytes, **kwargs: Any) -> Reply:
    return Reply(body=body, content_type="text/event-stream", **kwargs)


PIECES = ["Lis", "bon", ", last ", "spring."]
GOOD_STREAM = sse(chunk(reasoning="thinking..."), *(chunk(p) for p in PIECES), chunk(finish="stop"))


GROQ_ENV = ("GROQ_API_KEY", "GROQ_MODEL", "GROQ_BASE_URL")
PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


def clear_groq_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No key, model or base URL from the machine, and no proxy: loopback requests must not be routed anywhere."""
    for name in (*GROQ_ENV, *PROXY_ENV):
        monkeypatch.delenv(name, raising=False)


F = TypeVar("F", bound="FakeGroq")


@contextlib.contextmanager
def serving(server: F) -> Iterator[F]:
    """Run a fake server (FakeGroq or a subclass) for the block, then release any stalled reply and stop it."""
    server.thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.server.shutdown()
        server.server.server_close()
        server.thread.join(timeout=5)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_groq_env(monkeypatch)


@pytest.fixture
def fake() -> Iterator[FakeGroq]:
    with serving(FakeGroq()) as server:
        yield server


def refused_base_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # closed: nothing listens there now


def assert_fell_back(result: Completion, *needles: str) -> str:
    assert result.provider == "offline"
    assert result.model == OFFLINE_MODEL
    assert result.streamed is False
    reason = result.fallback_reason
    assert reason is not None
    assert reason.startswith("Groq failed: ")
    for needle in needles:
        assert needle.lower() in reason.lower(), f"{needle!r} not in {reason!r}"
    assert result.text.splitlines()[0] == f"[Offline stand-in — no language model wrote this reply: {reason}]"
    assert KEY not in reason and KEY not in result.text
    return reason


# ---------------------------------------------------------------- offline stand-in


class TestOfflineAnswer:
    def test_exact_output_for_a_known_input(self) -> None:
        assert offline_answer(QUERY, MEMORIES, "GROQ_API_KEY is not set") == (
            "[Offline stand-in — no language model wrote this reply: GROQ_API_KEY is not set]\n"
            "\n"
            "From what we talked about before (most relevant first):\n"
            "- (seq 12, user) I moved to Lisbon last spring.\n"
            "- (seq 3, assistant) Noted: you live in Porto.\n"
            "- (seq 40, user) Lisbon rents are high."
        )

    def test_same_input_gives_the_same_bytes(self) -> None:
        runs = {offline_answer(QUERY, list(MEMORIES), "why").encode() for _ in range(5)}
        assert len(runs) == 1

    def test_first_line_labels_it_and_names_the_reason(self) -> None:
        first = offline_answer(QUERY, MEMORIES, "Groq failed: 429").splitlines()[0]
        assert first == "[Offline stand-in — no language model wrote this reply: Groq failed: 429]"

    def test_no_memories_says_so(self) -> None:
        assert offline_answer(QUERY, [], "why").splitlines()[-1] == NO_MEMORIES

    def test_at_most_three_memories_in_the_given_order(self) -> None:
        bullets = [line for line in offline_answer(QUERY, MEMORIES, "why").splitlines() if line.startswith("- ")]
        assert [b.split(")")[0] for b in bullets] == ["- (seq 12, user", "- (seq 3, assistant", "- (seq 40, user"]

    def test_long_snippets_are_cut_to_the_limit_with_an_ellipsis(self) -> None:
        text = "word " * 100
        bullet = offline_answer(QUERY, [Memory(1, "user", text)], "why").splitlines()[-1]
        quoted = bullet.removeprefix("- (seq 1, user) ")
        assert len(quoted) <= SNIPPET_CHARS
        assert quoted.endswith("…")
        assert text.startswith(quoted[:-1])

    def test_a_snippet_at_the_limit_is_not_cut(self) -> None:
        text = "x" * SNIPPET_CHARS
        assert offline_answer(QUERY, [Memory(1, "user", text)], "why").endswith(") " + text)

    def test_a_marked_memory_is_quoted_after_its_mark_and_the_others_are_not_marked(self) -> None:
        mark = "[superseded at 2026-12-03T20:00:00.000000Z by seq 40]"
        out = offline_answer(QUERY, MEMORIES, "why", {12: mark})
        assert [line for line in out.splitlines() if line.startswith("- ")] == [
            f"- (seq 12, user) {mark} I moved to Lisbon last spring.",
            "- (seq 3, assistant) Noted: you live in Porto.",
            "- (seq 40, user) Lisbon rents are high.",
        ]

    def test_newlines_in_a_memory_or_reason_cannot_add_lines(self) -> None:
        out = offline_answer(QUERY, [Memory(1, "user", "a\nb\r\nc")], "bad\nreason")
        assert out.splitlines() == [
            "[Offline stand-in — no language model wrote this reply: bad reason]",
            "",
            "From what we talked about before (most relevant first):",
            "- (seq 1, user) a b c",
        ]


# ---------------------------------------------------------------- configuration


class TestConfiguration:
    def test_no_key_answers_offline_and_sends_nothing(self, fake: FakeGroq, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("GROQ_BASE_URL", fake.base_url)
        deltas: list[str] = []
        result = LLM().complete(MESSAGES, query=QUERY, memories=MEMORIES, on_delta=deltas.append)
        assert result == Completion(
            text=offline_answer(QUERY, MEMORIES, NO_KEY_REASON),
            provider="offline",
            model=OFFLINE_MODEL,
            fallback_reason="GROQ_API_KEY is not set",
            streamed=False,
        )
        assert fake.requests == [] and deltas == []

    def test_an_empty_key_counts_as_no_key(self, fake: FakeGroq) -> None:
        result = fake.llm(api_key="  ").complete(MESSAGES, query=QUERY, memories=[])
        assert result.fallback_reason == NO_KEY_REASON
        assert fake.requests == []

    def test_environment_supplies_key_model_and_base_url(self, fake: FakeGroq, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("GROQ_API_KEY", KEY)
        monkeypatch.setenv("GROQ_MODEL", "env-model")
        monkeypatch.setenv("GROQ_BASE_URL", fake.base_url)
        assert LLM(timeout=TIMEOUT).complete(MESSAGES, query=QUERY, memories=[]).provider == "groq"
        (request,) = fake.requests
        assert request["json"]["model"] == "env-model"
        assert request["headers"]["Authorization"] == f"Bearer {KEY}"

    def test_model_defaults_to_gpt_oss_20b(self) -> None:
        assert LLM().model == DEFAULT_MODEL == "openai/gpt-oss-20b"

    def test_describe_names_provider_and_model_but_no_secret(self) -> None:
        assert LLM().describe() == {"provider": "offline", "model": OFFLINE_MODEL, "configured": False}
        described = LLM(api_key=KEY, model="m", base_url="https://user:pw@example.invalid").describe()
        assert described == {"provider": "groq", "model": "m", "configured": True}
        assert KEY not in repr(described) and "pw" not in repr(described)

    @pytest.mark.parametrize("timeout", [0, -1.0, float("nan")])
    def test_a_non_positive_timeout_is_rejected(self, timeout: float) -> None:
        with pytest.raises(ValueError, match="timeout"):
            LLM(timeout=timeout)


# ---------------------------------------------------------------- groq answers


class TestGroqAnswers:
    def test_a_plain_answer_comes_from_the_server(self, fake: FakeGroq) -> None:
        result = fake.llm(model="asked-model").complete(MESSAGES, query=QUERY, memories=MEMORIES)
        assert result == Completion(
            text="Hello from the fake.", provider="groq", model="served-model-id", fallback_reason=None, streamed=False
        )
        (request,) = fake.requests
        assert request["path"] == PATH
        assert request["json"]["messages"] == MESSAGES
        assert request["json"]["model"] == "asked-model"
        assert not request["json"].get("stream")

    def test_without_a_model_field_the_requested_model_is_recorded(self, fake: FakeGroq) -> None:
        fake.reply = Reply(body=completion_body("hi", drop=("model",)))
        assert fake.llm(model="asked-model").complete(MESSAGES, query=QUERY, memories=[]).model == "asked-model"

    def test_streamed_deltas_arrive_in_order_and_join_to_the_text(self, fake: FakeGroq) -> None:
        fake.reply = stream_reply(GOOD_STREAM)
        deltas: list[str] = []
        result = fake.llm().complete(MESSAGES, query=QUERY, memories=[], on_delta=deltas.append)
        assert deltas == PIECES  # the reasoning-only delta is not content
        assert result == Completion(
            text="".join(PIECES), provider="groq", model="served-model-id", fallback_reason=None, streamed=True
        )
        (request,) = fake.requests
        assert request["json"]["stream"] is True
        assert request["json"]["messages"] == MESSAGES

    def test_an_exception_from_on_delta_is_the_callers_and_escapes(self, fake: FakeGroq) -> None:
        fake.reply = stream_reply(GOOD_STREAM)

        def broken(piece: str) -> None:
            raise RuntimeError("ui went away")

        with pytest.raises(RuntimeError, match="ui went away"):
            fake.llm().complete(MESSAGES, query=QUERY, memories=[], on_delta=broken)


# ---------------------------------------------------------------- fallbacks

FAILED_REPLIES = {
    "401": (
        Reply(status=401, body=b'{"error":{"message":"Invalid API Key","code":"invalid_api_key"}}'),
        ("401", "authentication"),
    ),
    "429": (
        Reply(status=429, body=b'{"error":{"message":"slow down"}}', headers={"retry-after": "30"}),
        ("429", "rate limit"),
    ),
    "500": (Reply(status=500, body=b'{"error":{"message":"boom"}}'), ("500", "server error", "boom")),
    "503-html": (Reply(status=503, body=b"<html>down</html>", content_type="text/html"), ("503", "server error")),
    "200-html": (Reply(body=b"<html>hi</html>", content_type="text/html"), ("malformed", "not a chat completion")),
    "no-choices": (Reply(body=b'{"id":"x","model":"m"}'), ("malformed", "not a chat completion")),
    "empty-choices": (Reply(body=b'{"id":"x","model":"m","choices":[]}'), ("no choices",)),
    "empty-content": (Reply(body=completion_body("  ")), ("empty answer",)),
    "null-content": (Reply(body=completion_body(None)), ("empty answer",)),
    "int-content": (Reply(body=completion_body(5)), ("not text",)),
    "bad-model": (Reply(body=completion_body("hi", model={"x": 1})), ("unusable model",)),
    "truncated-json": (Reply(body=b'{"id":'), ("malformed",)),
    "cut-body": (Reply(body=b'{"id":', content_length=1000), ("APIConnectionError",)),
    "timeout": (Reply(stall_before=True), ("APITimeoutError", "no response within")),
}


class TestFallback:
    @pytest.mark.parametrize("case", FAILED_REPLIES, ids=list(FAILED_REPLIES))
    def test_a_failed_plain_request_falls_back_after_one_attempt(self, fake: FakeGroq, case: str) -> None:
        fake.reply, needles = FAILED_REPLIES[case]
        result = fake.llm(timeout=SHORT_TIMEOUT).complete(MESSAGES, query=QUERY, memories=MEMORIES)
        assert_fell_back(result, *needles)
        assert result.text == offline_answer(QUERY, MEMORIES, result.fallback_reason or "")
        assert len(fake.requests) == 1  # max_retries=0

    def test_a_refused_connection_falls_back(self) -> None:
        result = LLM(api_key=KEY, base_url=refused_base_url(), timeout=TIMEOUT).complete(
            MESSAGES, query=QUERY, memories=[]
        )
        assert_fell_back(result, "APIConnectionError", "connection", "refused")

    def test_a_refused_streaming_connection_falls_back_without_deltas(self) -> None:
        deltas: list[str] = []
        result = LLM(api_key=KEY, base_url=refused_base_url(), timeout=TIMEOUT).complete(
            MESSAGES, query=QUERY, memories=[], on_delta=deltas.append
        )
        assert_fell_back(result, "connection")
        assert deltas == []

    def test_a_401_on_a_stream_falls_back(self, fake: FakeGroq) -> None:
        fake.reply = Reply(status=401, body=b'{"error":{"message":"Invalid API Key"}}')
        result = fake.llm().complete(MESSAGES, query=QUERY, memories=[], on_delta=lambda piece: None)
        assert_fell_back(result, "401", "authentication")


STREAM_FAILURES = {
    "connection-cut": (
        stream_reply(sse(chunk("Lis"), chunk("bon"), done=False), content_length=10_000),
        ("connection broke",),
    ),
    "error-event": (
        stream_reply(sse(chunk("Lis"), chunk("bon"), b'data: {"error":{"message":"overloaded"}}\n\n')),
        ("overloaded",),
    ),
    "garbage-chunk": (stream_reply(sse(chunk("Lis"), chunk("bon"), b"data: {not json\n\n")), ("malformed",)),
    "no-finish": (stream_reply(sse(chunk("Lis"), chunk("bon"), done=False)), ("no finish_reason",)),
    "stalled": (
        stream_reply(sse(chunk("Lis"), chunk("bon"), done=False), content_length=10_000, stall_after=True),
        ("stalled",),
    ),
}


class TestMidStreamFailure:
    @pytest.mark.parametrize("case", STREAM_FAILURES, ids=list(STREAM_FAILURES))
    def test_a_stream_failing_after_deltas_falls_back_and_the_completion_is_authoritative(
        self, fake: FakeGroq, case: str
    ) -> None:
        fake.reply, needles = STREAM_FAILURES[case]
        deltas: list[str] = []
        result = fake.llm(timeout=SHORT_TIMEOUT).complete(
            MESSAGES, query=QUERY, memories=MEMORIES, on_delta=deltas.append
        )
        assert deltas == ["Lis", "bon"]  # partial text reached the caller ...
        assert_fell_back(result, *needles)  # ... and the Completion says to replace it
        assert "Lisbon" not in result.text.splitlines()[0]
        assert len(fake.requests) == 1

    def test_an_empty_stream_falls_back(self, fake: FakeGroq) -> None:
        fake.reply = stream_reply(sse(chunk(reasoning="hmm"), chunk(finish="stop")))
        deltas: list[str] = []
        result = fake.llm().complete(MESSAGES, query=QUERY, memories=[], on_delta=deltas.append)
        assert_fell_back(result, "empty answer")
        assert deltas == []


class TestSecrets:
    def test_a_key_echoed_by_the_server_is_redacted_from_reason_text_and_log(
        self, fake: FakeGroq, caplog: pytest.LogCaptureFixture
    ) -> None:
        fake.reply = Reply(status=401, body=json.dumps({"error": {"message": f"bad key {KEY}"}}).encode())
        with caplog.at_level(logging.DEBUG, logger="chat.llm"):
            result = fake.llm().complete(MESSAGES, query=QUERY, memories=[])
        reason = assert_fell_back(result, "401")
        assert "[redacted]" in reason
        assert caplog.records, "a failure must be logged"
        assert all(KEY not in record.getMessage() for record in caplog.records)

    def test_a_failure_is_logged_as_a_warning(self, caplog: pytest.LogCaptureFixture) -> None:
        with caplog.at_level(logging.WARNING, logger="chat.llm"):
            result = LLM(api_key=KEY, base_url=refused_base_url(), timeout=TIMEOUT).complete(
                MESSAGES, query=QUERY, memories=[]
            )
        (record,) = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert result.fallback_reason is not None and result.fallback_reason in record.getMessage()
