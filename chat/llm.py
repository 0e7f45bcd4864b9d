"""The language model behind a chat turn: Groq when it works, the offline stand-in when it does not.

`LLM.complete` never raises for a provider failure. Whatever goes wrong (no key,
a rejected key, a rate limit, a refused connection, a timeout, a 5xx, a body that
is not a chat completion, an empty answer, a stream that breaks half-way) the
offline stand-in answers instead, and the returned `Completion` says so:
`provider`, `model` and `fallback_reason` record who actually answered and why,
which is what a receipt must carry.

The groq client is built with `max_retries=0`: a failing provider costs one
attempt (bounded by `timeout`) before the stand-in answers, instead of the SDK's
default of retries with back-off while the user waits.

Why the broad `except Exception` in `complete`: groq 1.7 does not wrap every
failure in `GroqError`. A connection cut or a stall mid-stream surfaces as a raw
`httpx` error, a truncated JSON body as `json.JSONDecodeError`, and a 200 whose
body is not JSON comes back as a plain `str` where a `ChatCompletion` is typed.
Responses are also built without validation, so every field is checked here.

Prompts carry memories, so they stay out of the logs: `GROQ_LOG=debug` would make
the SDK log every request body to stderr; its loggers are pinned to WARNING unless
`MRE_LOG_PROMPTS=1` is set (see `pin_sdk_logging`).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import groq
import httpx
from groq.types.chat import ChatCompletionMessageParam

from chat.offline import PROVIDER as STAND_IN_PROVIDER
from chat.offline import MemoryLike, offline_answer, snippet

log = logging.getLogger(__name__)

PROMPT_LOG_ENV = "MRE_LOG_PROMPTS"
_SDK_LOGGERS = ("groq", "httpx", "httpcore")


def pin_sdk_logging() -> None:
    """Keep prompts out of the logs: `GROQ_LOG=debug` makes the groq SDK log every request body
    (the prompt, memories included) to stderr. Unless MRE_LOG_PROMPTS=1 asks for exactly that, the
    SDK's loggers and its HTTP stack's stay at WARNING, whatever GROQ_LOG or a root config says."""
    if os.environ.get(PROMPT_LOG_ENV) == "1":
        return
    for name in _SDK_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


pin_sdk_logging()  # `import groq` above has already applied GROQ_LOG

DEFAULT_MODEL = "openai/gpt-oss-20b"
OFFLINE_MODEL = "offline-stand-in"
PROVIDER_GROQ = "groq"
PROVIDER_OFFLINE = STAND_IN_PROVIDER
NO_KEY_REASON = "GROQ_API_KEY is not set"
DETAIL_CHARS = 200  # how much of a server's error message a reason quotes
MAX_MODEL_ID_CHARS = 256

_STATUS_HINTS = {
    400: "bad request",
    401: "authentication failed; check GROQ_API_KEY",
    403: "permission denied",
    404: "not found; check GROQ_MODEL and GROQ_BASE_URL",
    413: "request too large",
    422: "unprocessable request",
    429: "rate limit reached",
}


@dataclass(frozen=True)
class Completion:
    """Who answered a turn, and with what.

    The Completion is authoritative: when streaming fell back to the stand-in after
    some deltas had already reached `on_delta`, `streamed` is False and the caller
    must replace whatever partial text it showed with `text`.
    """

    text: str
    provider: str  # "groq" or "offline"
    model: str  # model id that answered; "offline-stand-in" for the stand-in
    fallback_reason: str | None  # why the stand-in answered; None when groq answered
    streamed: bool  # True only when all of `text` was delivered through on_delta


class NoKey(Exception):
    """`LLM.ask` was called without a key: no request was made."""


class BadAnswer(Exception):
    """Groq answered, but not with a usable chat completion (wrong shape, empty, cut short)."""


class _CallbackFailed(Exception):
    """Carries an exception raised by the caller's on_delta: the caller's bug, not a provider failure."""

    def __init__(self, original: Exception) -> None:
        super().__init__(str(original))
        self.original = original


class LLM:
    """A chat model client that always returns a Completion.

    Arguments default to the environment: GROQ_API_KEY, GROQ_MODEL (else
    DEFAULT_MODEL), GROQ_BASE_URL (else the SDK's https://api.groq.com). An empty
    key counts as no key. `timeout` (seconds) bounds each network wait -- connecting,
    and each read -- not the whole answer, so a stream that keeps producing is
    not cut off. Safe to share between threads.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        model: str | None = None,
        base_url: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        if not timeout > 0:  # also rejects NaN
            raise ValueError(f"LLM timeout {timeout!r}: must be a positive number of seconds")
        key = api_key if api_key is not None else os.environ.get("GROQ_API_KEY")
        self._api_key = (key or "").strip() or None
        self.model = (model or os.environ.get("GROQ_MODEL") or "").strip() or DEFAULT_MODEL
        self.base_url = (base_url or os.environ.get("GROQ_BASE_URL") or "").strip() or None
        self.timeout = float(timeout)
        self._client: groq.Groq | None = None
        self._lock = threading.Lock()

    @property
    def configured(self) -> bool:
        """Whether a key is set, i.e. whether `complete` will try Groq at all."""
        return self._api_key is not None

    def describe(self) -> dict[str, object]:
        """Who will be asked, for the UI. Never contains the key or the base URL (which may embed credentials)."""
        if self._api_key is None:
            return {"provider": PROVIDER_OFFLINE, "model": OFFLINE_MODEL, "configured": False}
        return {"provider": PROVIDER_GROQ, "model": self.model, "configured": True}

    def close(self) -> None:
        """Release the HTTP connection pool, if a client was built."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def complete(
        self,
        messages: list[dict[str, str]],
        *,
        query: str,
        memories: Sequence[MemoryLike],
        on_delta: Callable[[str], None] | None = None,
        marks: Mapping[int, str] | None = None,
    ) -> Completion:
        """Answer `messages`; stream content deltas to `on_delta` when given.

        `query`, `memories` and `marks` (memory seq -> its superseded mark, as in the prompt) are only used by
        the offline stand-in. Provider
        failures never escape (see the module docstring); an exception raised by
        `on_delta` itself does, since it is the caller's, not the provider's.
        """
        if self._api_key is None:
            return self._stand_in(query, memories, NO_KEY_REASON, marks)
        try:
            if on_delta is None:
                text, served = self._ask(messages)
            else:
                text, served = self._ask_streaming(messages, on_delta)
        except _CallbackFailed as failed:
            raise failed.original from None
        except Exception as exc:  # see the module docstring for why this is broad
            reason = self.redact(failure_reason(exc, timeout=self.timeout))
            # never the server's or the model's words, nor a traceback: they may echo the prompt or the answer
            log.warning("groq call failed, the offline stand-in answered: %s", self.redact(log_reason(exc, timeout=self.timeout)))
            return self._stand_in(query, memories, reason, marks)
        return Completion(
            text=text,
            provider=PROVIDER_GROQ,
            model=served or self.model,
            fallback_reason=None,
            streamed=on_delta is not None,
        )

    def _groq(self) -> groq.Groq:
        # Built lazily: Groq() raises GroqError without a key, and an app with no key must still start.
        with self._lock:
            if self._client is None:
                pin_sdk_logging()  # again: logging may have been configured since import
                self._client = groq.Groq(
                    api_key=self._api_key,
                    base_url=self.base_url,
                    timeout=self.timeout,
                    max_retries=0,
                )
            return self._client

    def ask(self, messages: list[dict[str, str]], *, timeout: float | None = None) -> tuple[str, str | None]:
        """One non-streamed request: (text, the model the response names, if it names one).

        For a caller with its own fallback (facts.model): unlike `complete` it raises every
        failure -- NoKey without a key (and makes no request), else whatever the SDK or read_completion
        raised; classify it with failure_reason / log_reason. `timeout` bounds this request only.
        """
        if self._api_key is None:
            raise NoKey(NO_KEY_REASON)
        if timeout is not None and not timeout > 0:  # also rejects NaN
            raise ValueError(f"LLM.ask timeout {timeout!r}: must be a positive number of seconds")
        response = self._groq().chat.completions.create(
            model=self.model,
            messages=cast("list[ChatCompletionMessageParam]", messages),
            stream=False,
            timeout=groq.NOT_GIVEN if timeout is None else timeout,
        )
        return read_completion(response)

    def _ask(self, messages: list[dict[str, str]]) -> tuple[str, str | None]:
        return self.ask(messages)

    def _ask_streaming(self, messages: list[dict[str, str]], on_delta: Callable[[str], None]) -> tuple[str, str | None]:
        stream = self._groq().chat.completions.create(
            model=self.model,
            messages=cast("list[ChatCompletionMessageParam]", messages),
            stream=True,
        )
        pieces: list[str] = []
        served: str | None = None
        finished = False
        with stream:
            for chunk in stream:
                piece, chunk_model, finish = read_chunk(chunk)
                served = served or chunk_model
                finished = finished or finish
                if piece:
                    pieces.append(piece)
                    try:
                        on_delta(piece)
                    except Exception as exc:
                        raise _CallbackFailed(exc) from exc
        # A clean close before any finish_reason (no [DONE] either) means the answer may be cut short.
        if not finished:
            raise BadAnswer("the stream ended before the model finished (no finish_reason)")
        text = "".join(pieces)
        if not text.strip():
            raise BadAnswer("empty answer")
        return text, served

    def _stand_in(self, query: str, memories: Sequence[MemoryLike], reason: str, marks: Mapping[int, str] | None = None) -> Completion:
        return Completion(
            text=offline_answer(query, memories, reason, marks),
            provider=PROVIDER_OFFLINE,
            model=OFFLINE_MODEL,
            fallback_reason=reason,
            streamed=False,
        )

    def redact(self, text: str) -> str:
        """`text` without the key: the SDK's messages quote the server's body, and a proxy could echo the key."""
        if self._api_key:
            text = text.replace(self._api_key, "[redacted]")
        return text


def served_model(value: object) -> str | None:
    """The response's `model` field: None when absent, the id when sane, BadAnswer when not an id."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > MAX_MODEL_ID_CHARS or not value.isprintable() or " " in value:
        raise BadAnswer(f"the response names an unusable model {snippet(repr(value), 80)}")
    return value


def read_completion(response: object) -> tuple[str, str | None]:
    """(text, model) from a non-streamed response, checking every level the SDK did not."""
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list):
        raise BadAnswer(f"not a chat completion: a {type(response).__name__} with no choices list")
    if not choices:
        raise BadAnswer("the response has no choices")
    content = getattr(getattr(choices[0], "message", None), "content", None)
    if content is not None and not isinstance(content, str):
        raise BadAnswer(f"the answer's content has type {type(content).__name__}, not text")
    if not content or not content.strip():
        raise BadAnswer("empty answer")
    return content, served_model(getattr(response, "model", None))


def read_chunk(chunk: object) -> tuple[str, str | None, bool]:
    """(content delta, model, finished) from one stream chunk; reasoning-only deltas give ""."""
    choices = getattr(chunk, "choices", None)
    if not isinstance(choices, list):
        raise BadAnswer(f"not a chat completion chunk: a {type(chunk).__name__} with no choices list")
    model = served_model(getattr(chunk, "model", None))
    if not choices:  # e.g. a usage-only chunk
        return "", model, False
    choice = choices[0]
    content = getattr(getattr(choice, "delta", None), "content", None)
    if content is not None and not isinstance(content, str):
        raise BadAnswer(f"a stream delta's content has type {type(content).__name__}, not text")
    return content or "", model, getattr(choice, "finish_reason", None) is not None


def _server_message(body: object) -> str:
    if isinstance(body, Mapping):
        error = body.get("error", body)
        message = error.get("message") if isinstance(error, Mapping) else error
        return snippet(message, DETAIL_CHARS) if isinstance(message, str) else ""
    return snippet(body, DETAIL_CHARS) if isinstance(body, str) else ""


def log_reason(exc: BaseException, *, timeout: float) -> str:
    """failure_reason without the words of the server or the model, which may quote the prompt (memories
    included) or the answer: what the log gets. A timeout or a refused connection says the same as there."""
    if isinstance(exc, groq.APIConnectionError | httpx.TimeoutException):  # APITimeoutError is one too
        return failure_reason(exc, timeout=timeout)
    if isinstance(exc, groq.APIStatusError):
        return f"Groq failed: {exc.status_code} {type(exc).__name__}"
    return f"Groq failed: {type(exc).__name__}"


def failure_reason(exc: BaseException, *, timeout: float) -> str:
    """One line naming what went wrong, for `Completion.fallback_reason`, the label and the log.

    Order matters: APITimeoutError is an APIConnectionError, and both are APIErrors.
    """
    name = type(exc).__name__
    if isinstance(exc, BadAnswer):
        return f"Groq failed: malformed response ({exc})"
    if isinstance(exc, groq.APIStatusError):
        hint = _STATUS_HINTS.get(exc.status_code, "server error" if exc.status_code >= 500 else "request failed")
        said = _server_message(exc.body)
        return f"Groq failed: {exc.status_code} {name} ({hint}" + (f"; server said: {said})" if said else ")")
    if isinstance(exc, groq.APITimeoutError):
        return f"Groq failed: {name} (no response within {timeout:g} s)"
    if isinstance(exc, groq.APIConnectionError):
        url = exc.request.url  # host and port only: userinfo in a base URL would be a credential
        where = f"{url.host}:{url.port}" if url.port else url.host
        cause = snippet(str(exc.__cause__), DETAIL_CHARS) if exc.__cause__ else "no detail"
        return f"Groq failed: {name} (connection to {where} failed: {cause})"
    if isinstance(exc, groq.GroqError):  # e.g. an error event inside a stream
        return f"Groq failed: {name} ({snippet(str(exc), DETAIL_CHARS) or 'no detail'})"
    if isinstance(exc, httpx.TimeoutException):  # raised raw by the SDK once a stream is under way
        return f"Groq failed: the response stalled, no data within {timeout:g} s ({name})"
    if isinstance(exc, httpx.HTTPError):
        return f"Groq failed: the connection broke mid-response ({name}: {snippet(str(exc), DETAIL_CHARS)})"
    if isinstance(exc, ValueError):  # json.JSONDecodeError from a truncated or garbled body
        return f"Groq failed: malformed response ({name}: {snippet(str(exc), DETAIL_CHARS)})"
    return f"Groq failed: unexpected {name} ({snippet(str(exc), DETAIL_CHARS) or 'no detail'})"
