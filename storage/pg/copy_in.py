"""One session's ledger copied into PostgreSQL from any other ledger, verified on the way (`ledger migrate`, a bundle
imported on PostgreSQL: storage.pg.imports). The source is read through the storage contract only (its verify and
stored_lines), so this backend never opens another backend's files.

The source's chain is verified from genesis first (a broken one is refused with its break named, and nothing of that
session is written); then what the database already holds of it must be, byte for byte, a prefix of the source's
lines (a session already complete is checked equal and skipped); the rest is copied in batches of BATCH_LINES lines,
each its own transaction, so a copy stopped anywhere continues where it stood when run again. The source is only read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any

import orjson

from ledger.verify import Break, SessionReport, split_lines

if TYPE_CHECKING:
    from storage.contract import LedgerStore
    from storage.pg.ledger import PgLedger

BATCH_LINES = 50_000  # lines per transaction: what a rerun may have to copy again is at most this


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


def _lines(chunks: Iterator[bytes], limit: int) -> Iterator[bytes]:
    """The first `limit` lines of stored bytes (each with its newline)."""
    for raw, _torn in islice(split_lines(chunks), limit):
        yield raw + b"\n"


def _parsed(lines: Iterator[bytes]) -> Iterator[tuple[bytes, dict[str, Any]]]:
    for line in lines:
        yield line, orjson.loads(line)


def copy_session(source: LedgerStore, pg: PgLedger, session: str, progress: Any = None) -> Migrated:
    """Verify one session's ledger in `source`, compare what the database holds of it, copy the rest;
    MigrationRefused if it cannot."""
    report: SessionReport = source.verify(session, progress=progress)
    if not report.ok:
        b = report.brk
        assert b is not None
        raise MigrationRefused(f"session {session}: its chain breaks at line {b.line}, seq {b.seq}, {b.kind}: {b.message}; nothing of it was written", b)
    total = report.events
    if total == 0:
        return Migrated(session, "empty", 0, 0, "no events: nothing to copy")
    held, held_head = pg.head(session)
    if held > total:
        raise MigrationRefused(f"session {session}: the database holds {held} events, the file only {total}; nothing was written")
    with source.stored_lines(session, total) as (_size, chunks):
        return _copy(pg, session, report, _lines(chunks, total), held, held_head, progress)


def _copy(
    pg: PgLedger, session: str, report: SessionReport, file_lines: Iterator[bytes], held: int, held_head: str, progress: Any
) -> Migrated:
    total = report.events
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
