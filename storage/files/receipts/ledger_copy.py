"""The auditor's view of a ledger kept outside a data directory (PostgreSQL), through a private copy (I/O).

storage.files.receipts.audit reads a ledger as a file: it re-walks the JSONL bytes itself and trusts nothing the producer stored.
A ledger kept in a database stores each event's exact JSONL line, so its lines, read from one snapshot, are written
into a private temporary file and audited there: the same checks over the same bytes as on files. Each check reads
the whole session again, so a row changed in the database since the last check is always seen.

What a check leaves behind, even killed (SIGKILL, OOM, a container stopped past its grace period): the copy has no
name on disk from before its first byte is written (tempfile.TemporaryFile: O_TMPFILE, else created and unlinked at
once) and the auditor reads it through its open descriptor, so the kernel frees every memory's words when the
process ends, however it ends. Its audit cache (digests and offsets, no words) is kept in the check's own private
folder in the system's temporary folder (never in DATA_DIR nor the verifier's cache), removed after; the folder of
a check that died is removed by the next check (`sweep_stale_copies`: its owner's lock is free).
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ledger.event import validate_session_id
from storage.common.fsmode import open_private
from storage.files.receipts.audit import LedgerAt

COPIED = "a private copy of the database's rows, walked whole"  # the audit note's reason (Auditor(fresh=...))
PREFIX = "mre-audit-copy-"
OWNER = "owner"  # flocked by the check for as long as its folder is in use
CACHE = "audit"
UNOWNED_GRACE_S = 3600  # a folder with no owner file yet may be one being made right now


class LineSource(Protocol):
    """A ledger that can hand over a session's stored lines (storage.pg.ledger.PgLedger)."""

    def exists(self, session: str) -> bool: ...

    def snapshot_lines(self, session: str) -> AbstractContextManager[Iterator[bytes]]: ...


@dataclass(frozen=True, slots=True)
class Copy:
    """A check's private folder (0700: its audit cache goes there) and the copied ledger, open and nameless
    (None: the source has no such session, so the auditor says "no such session")."""

    folder: Path
    ledger: int | None


@contextmanager
def copied(source: LineSource, session: str) -> Iterator[Copy]:
    """`session`'s ledger as `source` stores it now, in a file with no name on disk; the folder removed after."""
    validate_session_id(session)
    with owned_folder() as tmp:
        if not source.exists(session):
            yield Copy(tmp, None)
            return
        with tempfile.TemporaryFile(dir=tmp, buffering=1 << 20) as out:
            with source.snapshot_lines(session) as lines:
                for line in lines:
                    out.write(line)
            out.flush()
            yield Copy(tmp, out.fileno())


@contextmanager
def owned_folder(prefix: str = PREFIX, under: str | os.PathLike[str] | None = None) -> Iterator[Path]:
    """A new private folder (mkdtemp: 0700) named `prefix…` in `under` (the system's temporary folder by default),
    its OWNER file flocked while in use and the folder removed after; the folders of `prefix` there whose owner died
    are removed first (`sweep_stale_copies`). Also bundle.verify's staging folders."""
    sweep_stale_copies(under, prefix)
    tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=under))
    try:
        # never visible unlocked: made and flocked under another name, then renamed to OWNER (a sweep between the
        # two sees no OWNER yet, which it leaves alone for UNOWNED_GRACE_S)
        owner = open_private(tmp / (OWNER + ".new"), os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW)
        try:
            fcntl.flock(owner, fcntl.LOCK_EX)
            os.rename(tmp / (OWNER + ".new"), tmp / OWNER)
            yield tmp
        finally:
            os.close(owner)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def ledger_dir(data_dir: str | os.PathLike[str], session: str, source: LineSource | None) -> Iterator[LedgerAt]:
    """Where the auditor reads `session`'s ledger (`Auditor.of(where)`): `data_dir` itself, or (with a `source`) a
    private copy of its lines, walked whole (`data_dir` then holds no ledger)."""
    if source is None:
        yield LedgerAt(data_dir)
        return
    with copied(source, session) as copy:
        yield LedgerAt(copy.folder, ledger=copy.ledger, cache=copy.folder / CACHE, fresh=COPIED)


def sweep_stale_copies(root: str | os.PathLike[str] | None = None, prefix: str = PREFIX) -> list[Path]:
    """Remove the folders of checks that died (`prefix*` folders of this user in `root`, the system's temporary folder
    by default, whose owner lock no process holds); returns what it removed. A live check's folder is never touched."""
    base = Path(tempfile.gettempdir() if root is None else root)
    removed: list[Path] = []
    try:
        names = [n for n in os.listdir(base) if n.startswith(prefix)]
    except OSError:
        return removed
    for name in names:
        folder = base / name
        try:
            st = os.lstat(folder)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
                continue
            if _abandoned(folder, st.st_mtime):
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
        except OSError:
            continue
    return removed


def _abandoned(folder: Path, mtime: float) -> bool:
    try:
        fd = os.open(folder / OWNER, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return time.time() - mtime > UNOWNED_GRACE_S  # killed between mkdtemp and its owner file, or being made now
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False  # its check is running
        raise
    finally:
        os.close(fd)
    return True


__all__ = ["COPIED", "Copy", "LineSource", "copied", "ledger_dir", "owned_folder", "sweep_stale_copies"]
