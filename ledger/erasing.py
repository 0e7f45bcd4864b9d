"""Erasure glue: lines rewritten in erased form and erasure records appended, in one rename (docs/FORMAT.md §4.4).

The rules of an erased line and of its record are in ledger/event.py and ledger/erasures.py; the
rewrite itself in ledger/rewrite.py. This is Ledger.erase: validate, then rewrite under the lock.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from ledger.appending import _random_ids
from ledger.erasures import ErasureState, record_entries
from ledger.event import (
    Event,
    EventError,
    erased_form,
    erasure_record_meta,
    erasure_record_text,
    is_erasure_record,
    make_event,
    now_ts,
    validate_session_id,
)

log = logging.getLogger("ledger")


ERASURES_DIR = "erasures"  # DATA_DIR/erasures/: erasure certificates, and on files the journal of one in progress


def journal_path(data_dir: str | os.PathLike[str], session: str) -> Path:
    """Where the file backend keeps the journal of an erasure of `session` in progress (control.forget)."""
    return Path(data_dir) / ERASURES_DIR / f".pending-{session}.json"


class EraseError(ValueError):
    """An erasure was refused (unknown session, bad seq, already erased, ...); nothing was changed."""


class Erasure(NamedTuple):
    """What Ledger.erase did: the events now in erased form (seq order) and the erasure records appended.

    `records`: one per MAX_RECORD_ENTRIES erased events, consecutive, in seq order; `record` is the last.
    """

    erased: list[Event]
    record: Event
    records: list[Event]


MAX_REASON = 1000  # characters of an erasure's reason
MAX_RECORD_ENTRIES = 64  # seqs one erasure record lists, each (seq, id, digest, commit) in its meta (≤ 16 KiB)
MAX_ERASE = 10_000  # seqs per erasure: ceil(n / 64) records, all in the same rewrite


def _erase_seqs(session: str, seqs: Iterable[int]) -> list[int]:
    """The seqs to erase, sorted and without repeats; EraseError for anything else."""
    try:
        items = list(seqs)
    except TypeError:
        raise EraseError(f"session {session}: seqs must be a list of integers") from None
    for seq in items:
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
            raise EraseError(f"session {session}: seq {seq!r} is not a non-negative integer")
    if not items:
        raise EraseError(f"session {session}: no seq to erase")
    wanted = sorted(set(items))
    if len(wanted) > MAX_ERASE:
        raise EraseError(f"session {session}: {len(wanted)} events in one erasure; at most {MAX_ERASE:,} (erase them in several)")
    return wanted


def plan_erasure(
    session: str, old: Sequence[Event], head: bytes, next_seq: int, reason: str | None, erasures: ErasureState
) -> tuple[list[Event], list[Event], list[tuple[bytes, bytes]]]:
    """The erased forms of `old` and the erasure records after the chain head (pure but for fresh ids); EraseError if refused.

    Returns (erased events, records, [(record line, chain head after it)]): what a backend writes in
    one transaction. `erasures` (the session's erasure state, a copy: it is changed) checks each
    record as a walk would.
    """
    for ev in old:
        if ev.erased:
            raise EraseError(f"session {session}: seq {ev.seq} is already erased")
        if is_erasure_record(ev):
            raise EraseError(f"session {session}: seq {ev.seq} is an erasure record, which cannot be erased")
    gone = [erased_form(ev) for ev in old]
    groups = [gone[i : i + MAX_RECORD_ENTRIES] for i in range(0, len(gone), MAX_RECORD_ENTRIES)]
    salts, ids = _random_ids(len(groups))
    for e in gone:
        erasures.saw_erased(e.seq, e.to_dict())
    records: list[Event] = []
    appended: list[tuple[bytes, bytes]] = []
    prev, at, when = head, next_seq, now_ts()
    for i, group in enumerate(groups):
        try:
            record = make_event(
                session=session,
                seq=at + i,
                prev=prev,
                role="system",
                text=erasure_record_text(len(group)),
                meta=erasure_record_meta(group, reason),
                ts=when,
                event_id=ids[i],
                salt=salts[i],
            )
        except EventError as exc:
            raise EraseError(f"session {session}: the erasure record cannot be written ({exc}); nothing was changed") from None
        entries = record_entries(record.seq, record.to_dict())
        problem = entries if isinstance(entries, str) else erasures.saw_record(record.seq, entries)
        if problem is not None:  # cannot happen: the record is built from these very lines
            raise RuntimeError(f"session {session}: the erasure record does not verify ({problem}); nothing was changed")
        prev = bytes.fromhex(record.chain)
        records.append(record)
        appended.append((record.to_line(), prev))
    return gone, records, appended


def check_erase_args(session: str, seqs: Iterable[int], reason: str | None) -> list[int]:
    """The seqs to erase (sorted, unique) once the session id, seqs and reason are acceptable; EraseError otherwise."""
    try:
        validate_session_id(session)
    except EventError as exc:
        raise EraseError(str(exc)) from None
    wanted = _erase_seqs(session, seqs)
    if reason is not None and not isinstance(reason, str):
        raise EraseError(f"session {session}: reason must be a string or None")
    if reason is not None and len(reason) > MAX_REASON:
        raise EraseError(f"session {session}: reason is {len(reason)} characters, over the limit of {MAX_REASON}")
    return wanted


