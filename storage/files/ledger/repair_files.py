"""Repairing a file ledger: diagnose a session's events.jsonl, copy the cut tail aside and truncate it.
The checks and messages of a repair (check_cut, repair_note, ...) are pure, in ledger/repair.py."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ledger.event import EVENTS_FILE, now_ts
from ledger.repair import (
    COPY_BYTES,
    Cut,
    Diagnosis,
    RepairRefused,
    check_cut,
    check_prefix,
    check_seq,
    cut_name,
    repair_note,
)
from ledger.verify import read_chunks, split_lines, verify_stream
from storage.common.cut_file import write_cut
from storage.common.fsmode import write_all as _write_all
from storage.files.ledger import tailrecord
from storage.files.ledger.store import Ledger


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


def _copy_tail(src: Path, offset: int, dest: Path) -> tuple[int, int, str]:
    """Copy src[offset:] to a new file `dest` (write_cut); (lines, bytes, sha256 hex)."""
    with open(src, "rb") as f:
        f.seek(offset)
        return write_cut(dest, iter(lambda: f.read(COPY_BYTES), b""))

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
