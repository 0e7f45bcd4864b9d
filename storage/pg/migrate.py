"""`DATABASE_URL=… python -m ledger migrate DATA_DIR`: a file-backed data directory's ledgers moved into PostgreSQL.

Per session: the file's chain is verified from genesis first (a broken one is refused with its
break named, and nothing of that session is written); then what the database already holds of it
must be, byte for byte, a prefix of the file (a session already complete is checked equal and
skipped); the rest is copied in batches of BATCH_LINES lines, each its own transaction, so a
migration stopped anywhere continues where it stood when run again. The file is only read.

Receipts, checkpoints and Merkle trees are other stores: each registers a step in EXTRA_STEPS
(name, function(data_dir, database) -> one line saying what it did), run after the ledgers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import orjson

from ledger import Ledger
from ledger.verify import Break, SessionReport, read_chunks, split_lines
from storage.pg.connect import Database
from storage.pg.ledger import PgLedger

BATCH_LINES = 50_000  # lines per transaction: what a rerun may have to copy again is at most this
EXTRA_STEPS: list[tuple[str, Callable[[Path, Database], str]]] = []  # receipts, checkpoints, Merkle: registered by their stores


class MigrationRefused(ValueError):
    """A session cannot be migrated (its chain breaks, or the database holds something else); nothing of it was written."""

    def __init__(self, message: str, brk: Break | None = None) -> None:
        super().__init__(message)
        self.brk = brk


@dataclass(frozen=True, slots=True)
class Migrated:
    """What migrate did with one session: `status` is copied, resumed, already (checked equal), empty or refused."""

    session: str
    status: str
    events: int  # events the database holds of it afterwards
    copied: int  # lines written by this run
    message: str = ""
    brk: Break | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "status": self.status,
            "events": self.events,
            "copied": self.copied,
            "message": self.message,
            "break": None if self.brk is None else self.brk.to_dict(),
        }


def _file_lines(path: Path, limit: int) -> Iterator[bytes]:
    """The first `limit` lines of a log (each with its newline)."""
    with open(path, "rb") as f:
        for raw, _torn in islice(split_lines(read_chunks(f)), limit):
            yield raw + b"\n"


def _parsed(lines: Iterator[bytes]) -> Iterator[tuple[bytes, dict[str, Any]]]:
    for line in lines:
        yield line, orjson.loads(line)


def migrate_session(files: Ledger, pg: PgLedger, session: str, progress: Any = None) -> Migrated:
    """Verify one session's file, compare what the database holds of it, copy the rest; MigrationRefused if it cannot."""
    report: SessionReport = files.verify(session, progress=progress)
    if not report.ok:
        b = report.brk
        assert b is not None
        raise MigrationRefused(f"session {session}: its chain breaks at line {b.line}, seq {b.seq}, {b.kind}: {b.message}; nothing of it was written", b)
    total = report.events
    if total == 0:
        return Migrated(session, "empty", 0, 0, "no events: nothing to copy")
    path = files.log_path(session)
    held, held_head = pg.head(session)
    if held > total:
        raise MigrationRefused(f"session {session}: the database holds {held} events, the file only {total}; nothing was written")
    file_lines = _file_lines(path, total)
    if held:
        with pg.snapshot_lines(session) as stored:
            try:
                for seq, (ours, theirs) in enumerate(zip(stored, islice(file_lines, held), strict=True)):
                    if ours != theirs:
                        raise MigrationRefused(
                            f"session {session}: the database's line at seq {seq} differs from the file's; nothing was written"
                        )
                    if progress is not None:
                        progress.update(len(theirs))
            except ValueError as exc:  # zip: the database has fewer rows than its size says
                if isinstance(exc, MigrationRefused):
                    raise
                raise MigrationRefused(f"session {session}: the database holds rows missing below its size {held}; nothing was written") from None
    if held == total:
        if held_head != report.head:  # cannot be when every line is equal; checked all the same
            raise MigrationRefused(f"session {session}: the database's head differs from the file's; nothing was written")
        return Migrated(session, "already", total, 0, "already in the database (checked equal)")
    copied = 0
    head = bytes.fromhex(held_head)
    rows = _parsed(file_lines)
    while held + copied < total:
        batch = list(islice(rows, BATCH_LINES))
        new_head = bytes.fromhex(batch[-1][1]["chain"])
        pg.copy_lines(session, batch, held + copied, head, new_head)
        head = new_head
        copied += len(batch)
        if progress is not None:
            progress.update(sum(len(line) for line, _ in batch))
    after = pg.head(session)
    if after != (total, report.head):
        raise MigrationRefused(f"session {session}: after the copy the database holds {after[0]} events, head {after[1][:16]}; expected {total}, {report.head[:16]}")
    return Migrated(session, "resumed" if held else "copied", total, copied)


def migrate(data_dir: Path, pg: PgLedger, progress: Any = None, sessions: list[str] | None = None) -> list[Migrated]:
    """Every session of `data_dir` (or those named): one Migrated each; a refused one does not stop the others."""
    files = Ledger(data_dir, record_tails=False)
    out = []
    for session in sessions if sessions is not None else files.sessions():
        try:
            out.append(migrate_session(files, pg, session, progress))
        except MigrationRefused as exc:
            out.append(Migrated(session, "refused", pg.head(session)[0], 0, str(exc), exc.brk))
    return out


def run_extra_steps(data_dir: Path, database: Database) -> list[tuple[bool, str]]:
    """The other stores' migrations (EXTRA_STEPS): (done, one line) each; a step that raises is (False, why), the next still runs."""
    out = []
    for name, step in EXTRA_STEPS:
        try:
            out.append((True, f"{name}: {step(data_dir, database)}"))
        except Exception as exc:  # one line for the operator; the ledgers' results stand
            out.append((False, f"{name}: {exc or type(exc).__name__}"))
    return out


__all__ = ["BATCH_LINES", "EXTRA_STEPS", "Migrated", "MigrationRefused", "migrate", "migrate_session", "run_extra_steps"]
