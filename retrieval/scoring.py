"""The collapse score and the final ranking (pure functions; docs/RETRIEVAL.md defines them).

collapse(event) = role_weight(role) * (NOVELTY_FLOOR + (1 - NOVELTY_FLOOR) * novelty)
novelty(event)  = share of the event's distinct content terms that the session
                  had not held before it (1.0 for a session's first statement,
                  0.0 for a verbatim repeat or an event with no content terms)
score(hit)      = relevance * (1 - COLLAPSE_WEIGHT + COLLAPSE_WEIGHT * collapse)
relevance       = -bm25 (FTS5's bm25() is negative, lower is better)
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

# What a speaker's words are worth to a long-term memory: the user states facts
# about themselves; an assistant mostly restates or elaborates; system prompts
# and tool output are boilerplate more often than not.
ROLE_WEIGHTS: dict[str, float] = {"user": 1.0, "assistant": 0.9, "system": 0.6, "tool": 0.6}
DEFAULT_ROLE_WEIGHT = 0.6
# The offline stand-in's answers only quote older memories back: keep them findable,
# but never let them crowd out the statements they quote.
STAND_IN_WEIGHT = 0.1
# A pure repeat still keeps part of its weight: repeating a fact is evidence too.
NOVELTY_FLOOR = 0.4
# How much the collapse score can move a BM25 relevance (0 = pure BM25).
COLLAPSE_WEIGHT = 0.5


def novelty(terms: Sequence[str], seen: Collection[str]) -> float:
    """Share of `terms` (distinct content terms of one event) absent from `seen`."""
    if not terms:
        return 0.0
    new = sum(1 for t in terms if t not in seen)
    return new / len(terms)


def role_weight(role: str, meta: Mapping[str, object] | None = None) -> float:
    if role == "assistant" and meta is not None and meta.get("provider") == "offline":
        return STAND_IN_WEIGHT
    return ROLE_WEIGHTS.get(role, DEFAULT_ROLE_WEIGHT)


def collapse_score(role: str, novelty_value: float, meta: Mapping[str, object] | None = None) -> float:
    """A per-event estimate of long-term value in [0, 1], computed once, at index time."""
    if not 0.0 <= novelty_value <= 1.0 or math.isnan(novelty_value):
        raise ValueError(f"novelty {novelty_value!r}: must be within [0, 1]")
    return role_weight(role, meta) * (NOVELTY_FLOOR + (1.0 - NOVELTY_FLOOR) * novelty_value)


def final_score(bm25: float, collapse: float, weight: float = COLLAPSE_WEIGHT) -> float:
    """Higher is better. With weight 0 this is plain BM25 relevance."""
    return -bm25 * (1.0 - weight + weight * collapse)


class Scored(Protocol):
    """A BM25 candidate before ranking."""

    @property
    def seq(self) -> int: ...
    @property
    def bm25(self) -> float: ...
    @property
    def collapse(self) -> float: ...


S = TypeVar("S", bound=Scored)


def rank(candidates: Iterable[S], k: int, weight: float = COLLAPSE_WEIGHT) -> list[tuple[S, float]]:
    """Top `k` candidates by final score; ties go to the better BM25, then the earlier seq."""
    scored = [(c, final_score(c.bm25, c.collapse, weight)) for c in candidates]
    scored.sort(key=lambda cs: (-cs[1], cs[0].bm25, cs[0].seq))
    return scored[:k]
