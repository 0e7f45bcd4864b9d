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

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger import tailrecord
from ledger.event import Event, make_event, now_ts
from ledger.fsmode import open_private
from ledger.store import EVENTS_FILE, Ledger, _fsync_dir, _random_ids, _write_all
from ledger.verify import Break, SessionReport, read_chunks, split_lines, verify_stream

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


def _line_offsets(path: Path, upto: int) -> tuple[int, int]:
    """(byte offset of line `upto + 1`, lines in the file): where seq `upto` starts, if every line before it is whole."""
    offset, lines = 0, 0
    with open(path, "rb") as f:
        for raw, _torn in split_lines(read_chunks(f)):
            if lines < upto:
                offset += len(raw) + 1
            lines += 1
    return offset, lines


def diagnose(ledger: Ledger, session: str, progress: Any = None) -> Diagnosis:
    """The first break and what `truncate_at(suggest_seq)` would cut (reads only); `progress` as Ledger.verify's."""
    report = ledger.verify(session, progress=progress)
    path = ledger.log_path(session)
    size = path.stat().st_size
    if report.brk is None:
        _, lines = _line_offsets(path, 0)
        return Diagnosis(session, report, lines, size, None, 0, 0)
    seq = report.brk.line - 1
    offset, lines = _line_offsets(path, seq)
    return Diagnosis(session, report, lines, size, seq, lines - seq, size - offset)


def write_cut(dest: Path, chunks: Iterable[bytes]) -> tuple[int, int, str]:
    """Write `chunks` to a new file `dest` (exclusive, 0600, fsynced, folder fsynced); (lines, bytes, sha256 hex).

    The cut's copy on either backend: the file backend's tail of events.jsonl, PostgreSQL's cut rows as JSONL."""
    h = hashlib.sha256()
    nbytes = newlines = 0
    last = b""
    fd = open_private(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        for chunk in chunks:
            _write_all(fd, chunk)
            h.update(chunk)
            nbytes += len(chunk)
            newlines += chunk.count(b"\n")
            last = chunk[-1:] if chunk else last
        os.fsync(fd)
    finally:
        os.close(fd)
    _fsync_dir(dest.parent)
    lines = newlines + (1 if nbytes and last != b"\n" else 0)
    return lines, nbytes, h.hexdigest()


def _copy_tail(src: Path, offset: int, dest: Path) -> tuple[int, int, str]:
    """Copy src[offset:] to a new file `dest` (write_cut); (lines, bytes, sha256 hex)."""
    with open(src, "rb") as f:
        f.seek(offset)
        return write_cut(dest, iter(lambda: f.read(COPY_BYTES), b""))


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


def truncate_at(ledger: Ledger, session: str, seq: int) -> Cut:
    """Move the ledger's lines from seq `seq` on aside and record the cut (see the module docstring).

    Raises RepairRefused (nothing changed) when the ledger verifies, when `seq` is past the first
    break, or when the prefix before `seq` does not verify on its own.
    """
    check_seq(seq)
    if not ledger.exists(session):
        raise RepairRefused(f"session {session}: no such session")
    # The writers' lock: no append (from the app, an import, another repair) runs while the file changes.
    with ledger._locked(session, create=False) as sdir:  # the store's own lock, reused on purpose
        path = sdir / EVENTS_FILE
        brk = check_cut(session, seq, ledger.verify(session))
        offset, _lines = _line_offsets(path, seq)
        with open(path, "rb") as f:
            prefix = verify_stream(session, read_chunks(f, offset))
        check_prefix(seq, prefix)
        name = cut_name(seq, now_ts())
        lines, nbytes, digest = _copy_tail(path, offset, sdir / name)
        tailrecord.remove(sdir)  # it describes the file before the cut: the next open walks and records anew
        with open(path, "r+b") as f:
            f.truncate(offset)
            f.flush()
            os.fsync(f.fileno())
        note = repair_note(session, seq, prefix.head, lines, nbytes, digest, name, brk)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        try:
            _write_all(fd, note.to_line())
            os.fsync(fd)
        finally:
            os.close(fd)
        ledger._tails.pop(session, None)  # the file changed under the lock: re-read it next time
    return Cut(session, seq, lines, nbytes, digest, sdir / name, brk, note.seq, note.chain)
