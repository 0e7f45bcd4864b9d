"""The auditor's view of a ledger kept outside a data directory (PostgreSQL), through a private copy (I/O).

receipts.audit reads a ledger as a file: it re-walks the JSONL bytes itself and trusts nothing the producer stored.
A ledger kept in a database stores each event's exact JSONL line, so its lines, read from one snapshot, are written
into a private temporary data directory (0700, in the system's temporary folder, never in DATA_DIR) and audited
there: the same checks over the same bytes as on files. The copy and its audit cache are removed after; each check
reads the whole session again, so a row changed in the database since the last check is always seen.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Protocol

from ledger.event import validate_session_id
from ledger.fsmode import open_private

from .audit import forget_cache

COPIED = "a private copy of the database's rows, walked whole"  # the audit note's reason (Auditor(fresh=...))


class LineSource(Protocol):
    """A ledger that can hand over a session's stored lines (storage.pg.ledger.PgLedger)."""

    def exists(self, session: str) -> bool: ...

    def snapshot_lines(self, session: str) -> AbstractContextManager[Iterator[bytes]]: ...


def fresh(source: LineSource | None) -> str | None:
    """What an Auditor over `ledger_dir(..., source)` says of its walk from genesis (None: the data directory's own)."""
    return None if source is None else COPIED


@contextmanager
def copied(source: LineSource, session: str) -> Iterator[Path]:
    """A private data directory holding `session`'s ledger as `source` stores it now (no session folder when the
    source has none: the auditor then says "no such session"); removed, with its audit cache, after."""
    validate_session_id(session)
    tmp = Path(tempfile.mkdtemp(prefix="mre-audit-copy-"))
    try:
        if source.exists(session):
            folder = tmp / "sessions" / session
            folder.mkdir(mode=0o700, parents=True)
            fd = open_private(folder / "events.jsonl", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            with os.fdopen(fd, "wb", buffering=1 << 20) as out, source.snapshot_lines(session) as lines:
                for line in lines:
                    out.write(line)
        try:
            yield tmp
        finally:
            forget_cache(tmp, session)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def ledger_dir(data_dir: str | os.PathLike[str], session: str, source: LineSource | None) -> Iterator[str | os.PathLike[str]]:
    """Where the auditor reads `session`'s ledger: `data_dir` itself, or (with a `source`) a private copy of it."""
    if source is None:
        yield data_dir
        return
    with copied(source, session) as tmp:
        yield tmp


__all__ = ["COPIED", "LineSource", "copied", "fresh", "ledger_dir"]
