"""The offline stand-in: a deterministic reply built only from the retrieved memories.

It answers when no language model can (no API key, or the provider failed), so a
chat turn still completes and still gets a receipt. Pure: no I/O, no clock, no
randomness; the same arguments give the same text, byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from retrieval.scoring import is_model_reply

PROVIDER = "offline"  # what a turn's answer event records as its provider when the stand-in wrote it (meta.provider)
MAX_MEMORIES = 3
SNIPPET_CHARS = 200
NO_MEMORIES = "I have no stored memories that match this message."
MEMORIES_HEADER = "From what we talked about before (most relevant first):"


class MemoryLike(Protocol):
    """What the stand-in reads from a retrieved memory.

    Read-only properties, so frozen dataclasses (e.g. `retrieval.Hit`) satisfy it.
    An id is not required: the stand-in never shows one, and `retrieval.Hit` calls
    its id `event_id`, so demanding `id` would shut out the real retrieval result.
    """

    @property
    def seq(self) -> int: ...

    @property
    def role(self) -> str: ...

    @property
    def text(self) -> str: ...


def one_line(text: str) -> str:
    """Collapse every run of whitespace (newlines included) to one space, so a value cannot break a line."""
    return " ".join(text.split())


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """`text` on one line, at most `limit` characters; a cut is marked with a trailing ellipsis."""
    flat = one_line(text)
    if len(flat) <= limit:
        return flat
    return flat[: limit - 1].rstrip() + "…"


def label(reason: str) -> str:
    """The first line of every stand-in reply: says plainly that no model wrote it, and why."""
    return f"[Offline stand-in — no language model wrote this reply: {one_line(reason) or 'no reason given'}]"


def offline_answer(query: str, memories: Sequence[MemoryLike], reason: str, marks: Mapping[int, str] | None = None) -> str:
    """A labelled reply quoting up to MAX_MEMORIES memories, in the order given (most relevant first).

    `query` is accepted so call sites need not change if the stand-in grows smarter;
    today the ranking of `memories` is all it uses of the query. `marks`: memory seq -> the state the
    prompt gave it when it is not live (`[superseded at … by seq N]`, receipts.prompt.superseded_mark),
    put before its words as the prompt does, so the reply never quotes a dead fact as if it held.
    """
    marks = marks or {}
    lines = [label(reason), ""]
    if not memories:
        lines.append(NO_MEMORIES)
    else:
        lines.append(MEMORIES_HEADER)
        for memory in memories[:MAX_MEMORIES]:
            mark = f"{one_line(marks[memory.seq])} " if memory.seq in marks else ""
            lines.append(f"- (seq {memory.seq}, {one_line(memory.role)}) {mark}{snippet(memory.text)}")
    return "\n".join(lines)


def is_stand_in_reply(role: str, meta: Mapping[str, object] | None) -> bool:
    """An answer a chat turn wrote (retrieval.scoring.is_model_reply) whose provider was this stand-in.

    Its words are this module's boilerplate and quotes of memories the session already holds: it stays in the ledger
    (the record of what was said), but it is never a memory — retrieval leaves it out of what a model is handed
    (chat.stand_ins), as it leaves out an answer that may quote a revoked memory."""
    return is_model_reply(role, meta) and meta is not None and meta.get("provider") == PROVIDER
