"""The collapse score and the final ranking (pure functions; docs/RETRIEVAL.md defines them).

collapse(event) = role_weight(role) * (NOVELTY_FLOOR + (1 - NOVELTY_FLOOR) * novelty)
novelty(event)  = share of the event's distinct content terms that the session
                  had not held before it (1.0 for a session's first statement,
                  0.0 for a verbatim repeat or an event with no content terms)
score(hit)      = relevance * (1 - COLLAPSE_WEIGHT + COLLAPSE_WEIGHT * collapse)
relevance       = -bm25 (FTS5's bm25() is negative, lower is better)

The ranking sorts by tier first, then score: events that match the query in
their own text (tier 0), events that match only through their neighbours'
context (tier 1), assistant echoes (tier 2: the offline stand-in's replies and
assistant replies that only repeat what the session already held). An echo
never takes a slot from a statement that matches.
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
# An assistant reply whose content terms are at most this new to the session
# only repeats memories: it is an echo (docs/RETRIEVAL.md, "Echoes").
ECHO_NOVELTY = 0.2
OWN, CONTEXT, ECHO = 0, 1, 2  # tiers, best first
# Query rules (dev-tuned, docs/RETRIEVAL.md "Query rules"): the score of an event whose time
# falls on a date the query names is multiplied by 1 + DATE_BOOST[level]; that of an event
# whose speaker (meta "speaker") the query names by 1 + SPEAKER_BOOST.
DATE_BOOST = {"day": 2.0, "month": 1.0, "year": 0.3}
SPEAKER_BOOST = 0.1
TIER_NAMES = {OWN: "own text", CONTEXT: "context only", ECHO: "echo"}


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


def is_model_reply(role: str, meta: Mapping[str, object] | None) -> bool:
    """An assistant event a chat turn wrote (the engine records the provider and the receipt id)."""
    return role == "assistant" and meta is not None and "provider" in meta and "receipt_id" in meta


def is_echo(role: str, novelty_value: float, meta: Mapping[str, object] | None = None, text: str = "") -> bool:
    """A model reply that says nothing the session did not hold: the offline stand-in's (it only
    quotes memories, or says it has none), or one whose content terms are (almost) all repeats.

    Only replies a chat turn wrote: an imported or human "assistant" turn (LoCoMo's second
    speaker) is a statement like any other. Novelty alone would not do: in a long
    conversation most turns repeat known words (on the LoCoMo dev split, treating every
    assistant turn of novelty <= ECHO_NOVELTY as an echo cost 14 points of R@5).
    """
    if is_repeated_question(role, novelty_value, meta, text):
        return True
    if not is_model_reply(role, meta):
        return False
    assert meta is not None
    return meta.get("provider") == "offline" or novelty_value <= ECHO_NOVELTY


def is_repeated_question(role: str, novelty_value: float, meta: Mapping[str, object] | None, text: str) -> bool:
    """A question typed into the chat that holds no new words ("what is my cat called?" after the
    cat was named): it asks for a memory, it is not one. Only chat messages (meta.kind "chat")."""
    return (
        role == "user"
        and meta is not None
        and meta.get("kind") == "chat"
        and text.rstrip().endswith("?")
        and novelty_value <= ECHO_NOVELTY
    )


def tier(*, echo: bool, own_match: bool) -> int:
    """OWN before CONTEXT before ECHO (see the module docstring)."""
    if echo:
        return ECHO
    return OWN if own_match else CONTEXT


def relative(scores: Sequence[float]) -> list[float]:
    """Scores as shares of the best one in the list (1.0 for the best; all 1.0 when none is positive)."""
    top = max(scores, default=0.0)
    if top <= 0 or not math.isfinite(top):
        return [1.0 for _ in scores]
    return [max(0.0, s / top) for s in scores]


def query_boost(
    *, date_level: str | None, speaker_named: bool, dates: bool = True, speakers: bool = True
) -> float:
    """The factor the query rules give one event (1.0 when none applies)."""
    factor = 1.0
    if dates and date_level is not None:
        factor *= 1.0 + DATE_BOOST[date_level]
    if speakers and speaker_named:
        factor *= 1.0 + SPEAKER_BOOST
    return factor


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


def rank(
    candidates: Iterable[S], k: int, weight: float = COLLAPSE_WEIGHT, *, tiers: Collection[int] = (CONTEXT, ECHO)
) -> list[tuple[S, float]]:
    """Top `k` candidates by tier, then final score; ties go to the better BM25, then the earlier seq.

    `tiers`: which of CONTEXT and ECHO rank below the tiers above them (the others rank as OWN;
    for measuring each rule's effect). A candidate's tier is its `tier` attribute (OWN if absent);
    its `boost` attribute (query_boost; 1.0 if absent) multiplies its final score.
    """
    keyed = []
    for c in candidates:
        t = int(getattr(c, "tier", OWN))  # a candidate without a tier ranks as OWN
        score = final_score(c.bm25, c.collapse, weight) * float(getattr(c, "boost", 1.0))
        keyed.append(((t if t in tiers else OWN, -score, c.bm25, c.seq), c, score))
    keyed.sort(key=lambda x: x[0])
    scored = [(c, score) for _, c, score in keyed]
    return scored[:k]
