"""The ledger: `Ledger`, all sessions under one data directory, and the names callers import from here.

`Ledger` is assembled from one room per concern, each its own module:

- ledger/sessions.py — where each session's files are, its writer lock, the descriptors kept open;
- ledger/recovery.py — the writer's tail: open (tail record or walk), follow other writers, quarantine a
  torn tail, refuse a corrupted ledger (`open_session`, `head`);
- ledger/appending.py — the durable append path (`append`, `append_many`; `import_jsonl`, below, appends
  what ledger/importer.py staged);
- ledger/erasing.py — erasure (`erase`);
- ledger/reading.py — reads and verification (`events`, `read_events`, `verify`).

Every name other code imports from `storage.files.ledger.store` is still here.
"""

from __future__ import annotations

import gc
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger import importer
from ledger.appending import Appended as Appended
from ledger.appending import _random_ids as _random_ids
from ledger.corrupted import LedgerCorrupted as LedgerCorrupted
from ledger.erasing import MAX_ERASE as MAX_ERASE
from ledger.erasing import MAX_REASON as MAX_REASON
from ledger.erasing import MAX_RECORD_ENTRIES as MAX_RECORD_ENTRIES
from ledger.erasing import EraseError as EraseError
from ledger.erasing import Erasure as Erasure
from ledger.erasing import journal_path as journal_path
from ledger.event import EVENTS_FILE as EVENTS_FILE
from ledger.event import GENESIS, Event, EventError, validate_session_id
from ledger.importer import Imported
from ledger.messages import ImportError_ as ImportError_
from ledger.messages import Message as Message
from ledger.messages import parse_import as parse_import
from ledger.messages import validate_message as validate_message
from ledger.verify import StoredLinesChanged
from storage.contract import LineMark, SystemLines
from storage.files.ledger import control_scan, tailrecord
from storage.files.ledger.appending_files import Appending
from storage.files.ledger.erasing_files import Erasing
from storage.files.ledger.reading import BISECT_MAX as BISECT_MAX
from storage.files.ledger.reading import Reading
from storage.files.ledger.recovery import RECORD_MIN_LINES as RECORD_MIN_LINES
from storage.files.ledger.recovery import Quarantine as Quarantine
from storage.files.ledger.sessions import MAX_OPEN_SESSIONS as MAX_OPEN_SESSIONS
from storage.files.ledger.sessions import _fsync_dir as _fsync_dir

if TYPE_CHECKING:
    from storage.files.receipts.file_backend import FileImports

STORED_CHUNK = 1024 * 1024  # bytes per piece of stored_lines


class Ledger(Appending, Erasing, Reading):
    """All sessions under one data directory.

    Safe for many threads; one writer per session at a time across threads and
    processes (flock on the session's `lock` file).

    `record_tails=False` is a reader's ledger: it never writes a session's tail record
    (ledger/tailrecord.py), so a command that only reads leaves the data directory as it found
    it; opening a session without a current record then walks it, as it would anyway.
    """

    def guess_tail(self, session: str) -> tuple[int, bytes]:
        """The session's (next seq, head) as its tail record says, read without a walk or a write (importer.stage)."""
        if not self.exists(session):
            return 0, GENESIS
        rec = tailrecord.load(self.session_dir(session))
        return (rec.next_seq, rec.head) if rec is not None else (0, GENESIS)


    def import_jsonl(
        self, session: str, lines: Iterable[bytes], progress: Any = None, *, allow_system: bool = False, workers: int | None = None
    ) -> Imported:
        """Validate every line of an import file, then append them all in one batch (ledger/importer.py).

        Role "system" is refused unless `allow_system`: an imported line would
        reach the model labelled as the app's own instruction. Files of 100,000
        lines or more are encoded in worker processes when the machine has a core to spare
        (`workers`: how many; 0: none; default: importer.workers_for).
        """
        # Millions of small acyclic objects: the cyclic GC would only re-scan them.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            staged = importer.stage(self, session, lines, progress, allow_system=allow_system, workers=workers)
            return importer.commit(self, staged)
        finally:
            if was_enabled:
                gc.enable()

    # -- the storage contract's (storage/api_faces.py: LedgerFaces), as storage.pg.ledger.PgLedger answers them --
    def last_written(self, session: str) -> float | None:
        """When the session's ledger was last written (its events file's mtime; the folder's if there is none), or
        None when there is no such session."""
        validate_session_id(session)  # a path-like id is refused before any file or row is touched
        sdir = self.sessions_dir / session
        try:
            log_file = sdir / EVENTS_FILE
            return (log_file if log_file.exists() else sdir).stat().st_mtime
        except FileNotFoundError:
            return None

    def idle_sessions(self, before: float) -> list[str]:
        """The sessions last written before `before` (Unix time): every folder under DATA_DIR/sessions, also one
        with no events file yet (dated by the folder)."""
        if not self.sessions_dir.is_dir():
            return []
        out = []
        for p in sorted(self.sessions_dir.iterdir()):
            try:
                session = validate_session_id(p.name)
                if p.is_dir() and _last_write(p) < before:
                    out.append(session)
            except (EventError, FileNotFoundError):
                continue
        return out

    @contextmanager
    def stored_lines(self, session: str, count: int) -> Iterator[tuple[int, Iterator[bytes]]]:
        """(bytes, the session's first `count` lines exactly as stored, in pieces of about STORED_CHUNK bytes), for a
        bundle (bundle.export): the events file itself, a torn tail a writer has not yet quarantined left out.
        StoredLinesChanged when it holds fewer whole lines, or shrinks while read."""
        log = self.log_path(session)
        size = _whole_lines_size(log, count)
        yield size, _file_chunks(log, size)

    def imports(self) -> FileImports:
        """The sessions imported from bundles into this data directory (storage.files.receipts.file_backend.FileImports)."""
        from storage.files.receipts.file_backend import FileImports

        return FileImports(self.data_dir)

    def kept_elsewhere(self) -> str | None:
        """Where the record is kept when DATA_DIR's files are not it: never, for the file ledger."""
        return None


    # -- the file backend's half of the O(1) control state (control.revocation folds what these find) -----------
    def system_lines(self, session: str, count: int, head: str, after: LineMark | None) -> SystemLines | None:
        """The lines of the session's log after `after` that may be system records, by a byte search
        (storage.files.ledger.control_scan.system_lines); None when the log is not the one the marks describe."""
        return control_scan.system_lines(self.log_path(session), count, head, after)

    def control_state_cache(self, session: str) -> bytes | None:
        """The bytes of the session's control-state.json (control.state_file decodes them), or None."""
        return control_scan.load_state(self.session_dir(session))

    def keep_control_state_cache(self, session: str, data: bytes) -> None:
        """Replace the session's control-state.json (atomic, not fsynced: a hint). OSError when it cannot."""
        control_scan.save_state(self.session_dir(session), data)

    # -- the storage contract (storage.api.LedgerStore): what control asks of either backend --------------------
    @property
    def location(self) -> str:
        """What tells this ledger's sessions from another deployment's (a process-wide cache's key)."""
        return os.path.realpath(self.data_dir)

    def delete_session(self, session: str, expect: tuple[int, str] | None = None, written_before: float | None = None) -> bool:
        """Delete a session whole: what this object caches of it, then its folder (log, tail record, import records,
        quarantined tails, receipts, settings). `expect` and `written_before` are not checked: on files every writer
        takes the session's turn lock, which the caller holds. Whether the folder was there."""
        self.forget(session)
        folder = self.session_dir(session)
        existed = folder.is_dir()
        shutil.rmtree(folder, ignore_errors=True)
        return existed

    def vacuum(self) -> list[str]:
        """Nothing to do: a log is rewritten by rename (PostgreSQL VACUUMs its tables here)."""
        return []

    def system_events(self, session: str, start: int, stop: int) -> list[Event]:
        """The session's role 'system' events with start <= seq < stop, in seq order."""
        return [ev for ev in self.read_events(session, range(start, stop)) if ev.role == "system"]

    def quarantined_with(self, session: str, wanted: Sequence[bytes]) -> list[str]:
        """The session's quarantined tails (events.jsonl.torn-*, cut-*) holding one of `wanted` (ledger.scrub)."""
        from storage.common.scrub import quarantined_with

        return quarantined_with(self.session_dir(session), wanted)

    def drop_erased_leftovers(self, session: str, seqs: Sequence[int], quarantine: Sequence[str]) -> tuple[int, tuple[str, ...]]:
        """After an erasure of `seqs`: the import records that hashed an erased event dropped (their unsalted content
        hashes could confirm a guess), the quarantine files named (found holding an erased text before the erase)
        overwritten and removed. (import records dropped, quarantine files removed)."""
        from storage.common.scrub import scrub
        from storage.files.ledger.import_records import forget_erased

        dropped = forget_erased(self, session, list(seqs))
        return dropped, scrub(self.session_dir(session), quarantine)

    # The erasure journal. On files it is DATA_DIR/erasures/.pending-<session>.json, which control reads on either
    # backend (an older version left such files on PostgreSQL too): the rows-kept journals below are none here.
    def keep_journal(self, session: str, journal: bytes, certificate: bytes | None = None) -> Callable[[], None]:
        """Keep an erasure's journal durably before its steps run; returns what marks it done (the file unlinked).
        `certificate`: kept in DATA_DIR/erasures/ by the caller on files, so not here."""
        path = journal_path(self.data_dir, session)
        _write_durable(path, journal)
        return partial(_unlink_durable, path)

    def erase_journaled(
        self, session: str, seqs: Sequence[int], *, reason: str | None, journal: bytes, landed: Callable[[], bool]
    ) -> tuple[Erasure, Callable[[], None]]:
        """`erase` with its journal kept first (keep_journal); returns the erasure and what marks the journal done.
        EraseError: nothing erased, no journal left. Any other exception leaves the journal only when `landed()`
        says the erasure records reached the log (recover finishes it), else removes it (nothing changed)."""
        done = self.keep_journal(session, journal)
        try:
            erasure = self.erase(session, list(seqs), reason=reason)
        except EraseError:
            done()
            raise
        except BaseException:
            if not landed():
                done()
            raise
        return erasure, done

    def pending_erasures(self, session: str | None = None) -> list[tuple[str, str]]:
        """(token, session) of the journals kept as rows: none on files (they are files, see above)."""
        return []

    def pending_journal(self, token: str) -> tuple[bytes, bytes | None]:
        raise FileNotFoundError(f"erasure {token[:12]}: no journal kept as a row on files")

    def erasure_done(self, token: str) -> None:
        """Nothing: no journal is kept as a row on files."""

    def erasure_pending(self, session: str) -> bool:
        """Whether a journal kept as a row names the session: never on files (control checks the file)."""
        return False



def _whole_lines_size(log: Path, count: int) -> int:
    """The bytes of the first `count` lines (the file may hold a torn tail a writer has not yet quarantined)."""
    n = 0
    size = 0
    with open(log, "rb") as f:
        for line in f:
            if not line.endswith(b"\n"):
                break
            size += len(line)
            n += 1
            if n == count:
                return size
    raise StoredLinesChanged(f"{log.name}: holds {n} whole lines, the ledger reports {count}")


def _file_chunks(path: Path, limit: int) -> Iterator[bytes]:
    with open(path, "rb") as f:
        left = limit
        while left > 0:
            b = f.read(min(STORED_CHUNK, left))
            if not b:
                raise StoredLinesChanged(f"{path.name}: shorter than the {limit:,} bytes it held a moment ago")
            left -= len(b)
            yield b


def _last_write(sdir: Path) -> float:
    try:
        return float((sdir / EVENTS_FILE).stat().st_mtime)
    except FileNotFoundError:
        return float(sdir.stat().st_mtime)
def _write_durable(path: Path, data: bytes) -> None:
    from storage.common.fsmode import private_dir, replace_durable

    private_dir(path.parent)
    replace_durable(path, data)


def _unlink_durable(path: Path) -> None:
    from storage.common.fsmode import fsync_dir

    path.unlink(missing_ok=True)
    if path.parent.is_dir():
        fsync_dir(path.parent)
