"""From ledger events to index rows (pure: no SQL, no files).

indexer.py feeds a session's new events here in seq order, together with what the
index already holds about the session (the terms it has seen, the texts of the
last few turns), and writes out what comes back.

What has no words is never indexed: an erased event (its text, meta and salt
are gone from the ledger, FORMAT.md "Erasure"), an erasure record (it names
seqs, not words) and a control event (a revoke or restore, FORMAT.md §17, or a
supersession record, §19: a fixed text naming seqs; it is never a memory, so a
session's searches need not exclude every one ever made). They get no row, are nobody's neighbour in
`context`, and add nothing to the terms a later event's novelty is judged
against, so an index built from a ledger with erased lines equals one that
forgot them afterwards, and a rebuilt index equals one kept up to date.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import orjson

from ledger import Event
from ledger.event import is_erasure_record
from ledger.supersessions import is_control_record
from retrieval.scoring import collapse_score, novelty
from retrieval.sql import row_id
from retrieval.text import content_terms

CONTEXT_SEP = " \u2026 "  # between neighbouring turns in the context column


class Row(NamedTuple):
    """One `events` row, in the table's column order: the tuple itself is what INSERT_EVENT takes (a bulk build
    makes a million of them; a named tuple is built in half the time of a frozen dataclass)."""

    id: int
    session: str
    seq: int
    event_id: str
    role: str
    ts: str
    text: str
    context: str
    meta: str
    digest: str
    chain: str
    novelty: float
    collapse: float

    def values(self) -> tuple[object, ...]:
        return tuple(self)


def skipped(ev: Event) -> bool:
    """True for an event the index holds nothing of."""
    return ev.erased or is_erasure_record(ev) or is_control_record(ev.role, ev.text, ev.meta, ev.seq)


def erased_by(ev: Event) -> list[int]:
    """The seqs an erasure record lists (empty for any other event)."""
    if not is_erasure_record(ev):
        return []
    listed = ev.meta["erasure"].get("erased")
    out = []
    for item in listed if isinstance(listed, list) else ():
        seq = item.get("seq") if isinstance(item, dict) else None
        if isinstance(seq, int) and not isinstance(seq, bool) and 0 <= seq < ev.seq:
            out.append(seq)
    return out


def context_of(texts: Sequence[str], i: int, before: int, after: int) -> str:
    """The neighbours of texts[i]: up to `before` turns before it and `after` turns after it."""
    return CONTEXT_SEP.join([*texts[max(0, i - before) : i], *texts[i + 1 : i + 1 + after]])


@dataclass(slots=True)
class Plan:
    rows: list[Row]
    df: Counter[str]  # per-term number of new events holding it
    # (seq, new context) of already-indexed events whose after-context grew.
    context_updates: list[tuple[int, str]]
    # seqs that erasure records among `events` list (their rows, if any, must be forgotten)
    erased: list[int]


class Planner(Protocol):
    """What plans a chunk's rows: plan_rows, or whatever a test patched in its place (storage.files.retrieval.db.Index._plan)."""

    def __call__(
        self,
        *,
        num: int,
        events: Sequence[Event],
        seen: set[str],
        prior: Sequence[tuple[int, str]],
        before: int = 0,
        after: int = 0,
    ) -> Plan: ...


def plan_rows(
    *,
    num: int,
    events: Sequence[Event],
    seen: set[str],
    prior: Sequence[tuple[int, str]],
    before: int = 0,
    after: int = 0,
) -> Plan:
    """Rows for `events` (consecutive, in seq order) given what the session held before them.

    `seen` holds the session's content terms so far (at least every term of
    `events` that it held); it is updated in place, event by event, so each
    event's novelty is judged against exactly what came before it.
    `prior` are (seq, text) of the indexed rows just before events[0] (the
    last before + after of them, oldest first). Neighbours are the nearest
    indexed rows: skipped events (see skipped()) are not counted.
    """
    erased: list[int] = []
    kept = []
    for ev in events:
        # only a "system" event or an erased line can be skipped() or list erased seqs: the others skip both checks
        if ev.role != "system" and not ev.erased:
            kept.append(ev)
            continue
        erased.extend(erased_by(ev))
        if not skipped(ev):
            kept.append(ev)
    events = kept
    texts = [t for _, t in prior] + [e.text for e in events]
    p = len(prior)
    df: Counter[str] = Counter()
    rows = []
    seen_update, df_update, ctx = seen.update, df.update, before or after
    for j, ev in enumerate(events):
        terms = content_terms(ev.text)
        nov = novelty(terms, seen)
        seen_update(terms)
        df_update(terms)
        rows.append(
            Row(
                row_id(num, ev.seq),
                ev.session,
                ev.seq,
                ev.id,
                ev.role,
                ev.ts,
                ev.text,
                context_of(texts, p + j, before, after) if ctx else "",
                orjson.dumps(ev.meta).decode(),
                ev.digest,
                ev.chain,
                nov,
                collapse_score(ev.role, nov, ev.meta),
            )
        )
    updates = []
    if after and events:
        for i in range(max(0, p - after), p):
            updates.append((prior[i][0], context_of(texts, i, before, after)))
    return Plan(rows, df, updates, erased)


def novelty_gains(first_gone: dict[str, int], held: set[str], rows: Iterable[tuple[int, str]]) -> dict[int, int]:
    """After a forget: seq -> how many of its terms are new now that were "seen" before (pure).

    `first_gone` maps each content term of the forgotten rows to the first
    forgotten seq holding it; `held` are those terms some remaining row still
    holds; `rows` are the remaining rows (seq, text) in seq order. A forgotten
    term t changes exactly one row: the first remaining row holding t, when a
    forgotten row held t before it. `rows` is read only until every held term
    has been met.
    """
    pending = set(held)
    gains: dict[int, int] = {}
    # stem() only cuts a suffix (and turns -ies into -y): a token with stem t contains t without a final y
    keys = [_key(t) for t in pending]
    if not pending:
        return gains
    for seq, text in rows:
        if text.isascii():  # folding ASCII is lower(): a row without any key holds no pending term
            low = text.lower()
            if not any(k in low for k in keys):
                continue
        found = pending.intersection(content_terms(text))
        if not found:
            continue
        for t in found:
            if first_gone[t] < seq:
                gains[seq] = gains.get(seq, 0) + 1
        pending -= found
        if not pending:
            break
        keys = [_key(t) for t in pending]
    return gains


def _key(term: str) -> str:
    return term[:-1] if term.endswith("y") else term


def regained_novelty(novelty_value: float, n_terms: int, gain: int) -> float:
    """A row's novelty with `gain` more of its `n_terms` terms new: the same division novelty() makes."""
    return (round(novelty_value * n_terms) + gain) / n_terms
