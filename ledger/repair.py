"""`python -m ledger repair`: what a person does about a ledger that breaks in the middle.

A broken line that is not the last is corruption, and appends are refused (LedgerCorrupted). The
repair keeps the verified prefix and moves everything from a chosen line on aside — never deleting it:

1. under the session's writer lock (the same `flock` every append takes), the ledger's first break is
   found again, and the cut seq must be at most the broken line's position; the prefix before it must
   verify on its own (as a whole ledger: an erased line there must have its erasure record there too);
2. the bytes from that line to the end are copied, byte for byte, to
   `events.jsonl.cut-<seq>-<utc>` beside the ledger (0600, created exclusively, fsynced, folder fsynced);
3. the ledger is truncated at that line and fsynced;
4. a `system` event is appended at that seq whose meta says what was cut —
   `{"repair": {"v": 1, "cut_from_seq", "lines", "sha256" (of the cut bytes), "file"}}` — so the chain
   verifies again and the ledger itself records the repair.

A crash between 2 and 3 leaves the ledger as it was (and a copy of its tail); between 3 and 4, a ledger
that verifies without the note (the cut file says what happened). Derived data — the index rows, the
producer's Merkle tree, the auditor's cache, the signed checkpoint — is the caller's to refresh
(`python -m ledger repair` does). storage/pg/repair.py does the same on PostgreSQL with the pure pieces here
(check_seq, check_cut, check_prefix, cut_name, repair_note, write_cut).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.appending import _random_ids
from ledger.event import EVENTS_FILE, Event, make_event, now_ts
from ledger.verify import Break, SessionReport

CUT_PREFIX = f"{EVENTS_FILE}.cut-"
COPY_BYTES = 1 << 20


class RepairRefused(ValueError):
    """The repair was not done (nothing changed); the message says why, in one line."""


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """A session's first break, and what cutting at the suggested seq would move aside."""

    session: str
    report: SessionReport
    lines: int  # complete lines, plus a last line without its newline
    size: int  # bytes
    suggest_seq: int | None  # the largest seq --truncate-at accepts (the broken line's position)
    cut_lines: int  # lines that cutting there moves aside
    cut_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "verified": self.report.ok,
            "events": self.report.events,
            "lines": self.lines,
            "bytes": self.size,
            "break": None if self.report.brk is None else self.report.brk.to_dict(),
            "truncate_at": self.suggest_seq,
            "would_cut": None if self.suggest_seq is None else {"lines": self.cut_lines, "bytes": self.cut_bytes},
        }


@dataclass(frozen=True, slots=True)
class Cut:
    """What a repair did."""

    session: str
    cut_from_seq: int
    lines: int
    nbytes: int
    sha256: str
    path: Path
    broke: Break  # the first break the ledger had
    note_seq: int  # the seq of the system event that records the cut
    head: str  # the chain head after it

    def to_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "cut_from_seq": self.cut_from_seq,
            "lines": self.lines,
            "bytes": self.nbytes,
            "sha256": self.sha256,
            "file": str(self.path),
            "break": self.broke.to_dict(),
            "repair_event_seq": self.note_seq,
            "events": self.note_seq + 1,
            "head": self.head,
        }


def check_seq(seq: object) -> int:
    """--truncate-at's value, refused (RepairRefused) unless it is a seq (pure)."""
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        raise RepairRefused(f"--truncate-at {seq!r}: expected a seq, an integer ≥ 0")
    return seq


def check_cut(session: str, seq: int, report: SessionReport) -> Break:
    """The ledger's first break, refused (RepairRefused) when it has none or `seq` is past it (pure)."""
    brk = report.brk
    if brk is None:
        raise RepairRefused(
            f"session {session}: the ledger verifies ({report.events} events); repair only moves aside the tail of a broken one"
        )
    if seq > brk.line - 1:
        raise RepairRefused(
            f"--truncate-at {seq}: past the first break (line {brk.line}, {brk.kind}); "
            f"the largest seq to cut from is {brk.line - 1}"
        )
    return brk


def check_prefix(seq: int, prefix: SessionReport) -> None:
    """Refused (RepairRefused) unless the lines before `seq`, walked as a whole ledger, verify (pure)."""
    if not prefix.ok or prefix.events != seq:
        why = prefix.brk.message if prefix.brk is not None else f"{prefix.events} events"
        raise RepairRefused(f"--truncate-at {seq}: the ledger before seq {seq} does not verify on its own ({why}); cut from an earlier seq")


def cut_name(seq: int, ts: str) -> str:
    """The name of the copy of a cut from `seq` made at `ts`: `events.jsonl.cut-<seq>-<utc>` (pure)."""
    return f"{CUT_PREFIX}{seq}-{ts.replace(':', '')}"


def repair_text(cut_from_seq: int, lines: int, nbytes: int, sha256: str, name: str, broke: Break) -> str:
    seq = "?" if broke.seq is None else str(broke.seq)
    return (
        f"ledger repair: {lines} line{'' if lines == 1 else 's'} from line {cut_from_seq + 1} (seq {cut_from_seq}) on, "
        f"{nbytes} bytes with sha256 {sha256}, were moved to {name}; the ledger broke at line {broke.line} "
        f"(seq {seq}, {broke.kind})"
    )


def repair_note(session: str, seq: int, prev: str, lines: int, nbytes: int, sha256: str, name: str, broke: Break) -> Event:
    """The `system` event recording a cut from `seq` (chained from `prev`, the prefix's head, hex); fresh id and salt."""
    meta = {"repair": {"v": 1, "cut_from_seq": seq, "lines": lines, "sha256": sha256, "file": name}}
    salts, ids = _random_ids(1)
    return make_event(
        session=session,
        seq=seq,
        prev=bytes.fromhex(prev),
        role="system",
        text=repair_text(seq, lines, nbytes, sha256, name, broke),
        meta=meta,
        ts=now_ts(),
        event_id=ids[0],
        salt=salts[0],
    )


