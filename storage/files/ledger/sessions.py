"""The session registry: where each session's files are, its writer lock, and the descriptors kept open.

Layout: DATA_DIR/sessions/<session_id>/events.jsonl (one event per line), a `lock` file beside it
for the cross-process writer lock (flock), `tail.json` (ledger/tailrecord.py) and
`events.jsonl.torn-<offset>-<utc>` files holding quarantined torn tails. At most
MAX_OPEN_SESSIONS sessions keep their lock and log descriptors open between appends.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ledger.event import EVENTS_FILE as EVENTS_FILE
from ledger.event import EventError, validate_session_id
from storage.common.fsmode import open_private, private_dir

log = logging.getLogger("ledger")
MAX_OPEN_SESSIONS = 128  # sessions whose lock and log descriptors stay open between appends


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)



class Sessions:
    """Paths, locks and cached descriptors of the sessions under one data directory (Ledger's base)."""

    def __init__(self, data_dir: str | os.PathLike[str], *, record_tails: bool = True) -> None:
        self.data_dir = Path(data_dir)
        self.record_tails = record_tails
        self.sessions_dir = self.data_dir / "sessions"
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._lock_fds: dict[str, int] = {}
        self._path_cache: dict[str, tuple[Path, Path]] = {}
        self._log_fds: dict[str, tuple[int, int]] = {}

    # -- paths -------------------------------------------------------------
    def session_dir(self, session: str) -> Path:
        return self._paths(session)[0]

    def log_path(self, session: str) -> Path:
        return self._paths(session)[1]

    def _paths(self, session: str) -> tuple[Path, Path]:
        cached = self._path_cache.get(session)
        if cached is None:
            sdir = self.sessions_dir / validate_session_id(session)
            cached = (sdir, sdir / EVENTS_FILE)
            if len(self._path_cache) < 4 * MAX_OPEN_SESSIONS:
                self._path_cache[session] = cached
        return cached

    def exists(self, session: str) -> bool:
        return self.log_path(session).is_file()

    def sessions(self) -> list[str]:
        if not self.sessions_dir.is_dir():
            return []
        out = []
        for p in sorted(self.sessions_dir.iterdir()):
            if (p / EVENTS_FILE).is_file():
                try:
                    out.append(validate_session_id(p.name))
                except EventError:
                    continue
        return out

    # -- locking -----------------------------------------------------------
    @contextmanager
    def _locked(self, session: str, create: bool) -> Iterator[Path]:
        sdir = self.session_dir(session)
        with self._guard:
            tlock = self._locks.setdefault(session, threading.Lock())
        with tlock:
            fd = self._lock_fds.get(session)
            if fd is not None:
                pass  # an open lock descriptor: the session's folder exists
            elif create:
                self._ensure_session_dir(sdir)
            elif not sdir.is_dir():
                raise FileNotFoundError(f"session {session}: no such session")
            if fd is None:
                fd = open_private(sdir / "lock", os.O_RDWR | os.O_CREAT)
                with self._guard:
                    self._lock_fds[session] = fd
                self._evict(keep=session)
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield sdir
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _evict(self, keep: str) -> None:
        """Keep at most MAX_OPEN_SESSIONS sessions' descriptors open (oldest first, idle ones only)."""
        with self._guard:
            excess = len(self._lock_fds) - MAX_OPEN_SESSIONS
            if excess <= 0:
                return
            for other in list(self._lock_fds):
                if excess <= 0:
                    break
                lock = self._locks.get(other)
                if other == keep or lock is None or not lock.acquire(blocking=False):
                    continue  # in use right now: never close a descriptor under a writer
                try:
                    self._drop_fds(other)
                finally:
                    lock.release()
                excess -= 1

    def _drop_fds(self, session: str) -> None:
        fd = self._lock_fds.pop(session, None)
        if fd is not None:
            os.close(fd)
        log_fd = self._log_fds.pop(session, None)
        if log_fd is not None:
            os.close(log_fd[0])

    def _log_fd(self, session: str, path: Path, ino: int) -> int:
        """A cached O_APPEND descriptor of the session's log, reopened if the file was replaced."""
        cached = self._log_fds.get(session)
        if cached is not None:
            if cached[1] == ino:
                return cached[0]
            os.close(cached[0])
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        with self._guard:
            self._log_fds[session] = (fd, ino)
        return fd

    def forget(self, session: str) -> None:
        """Drop everything this object caches about a session (before its files are deleted)."""
        validate_session_id(session)
        with self._guard:
            lock = self._locks.get(session)
        if lock is None:
            return
        with lock, self._guard:
            self._drop_fds(session)
            self._forget_state(session)
            self._locks.pop(session, None)
            self._path_cache.pop(session, None)

    def _forget_state(self, session: str) -> None:
        """What a subclass caches about a session, dropped by `forget` (under the session's lock and the guard)."""

    def open_descriptors(self) -> int:
        """How many file descriptors this object holds open (bounded by 2 × MAX_OPEN_SESSIONS)."""
        with self._guard:
            return len(self._lock_fds) + len(self._log_fds)

    def close(self) -> None:
        """Close cached file descriptors (the Ledger stays usable; they reopen on demand)."""
        with self._guard:
            sessions = list(self._lock_fds) + [s for s in self._log_fds if s not in self._lock_fds]
        for session in sessions:
            with self._guard:
                lock = self._locks.get(session)
            if lock is None:
                continue
            with lock, self._guard:
                self._drop_fds(session)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def _ensure_session_dir(self, sdir: Path) -> None:
        # the log too: another process (or Ledger) may have made the folder and not yet its log, or crashed between
        if (sdir / EVENTS_FILE).is_file():
            return
        new_parents = [p for p in (self.data_dir, self.sessions_dir) if not p.is_dir()]
        private_dir(sdir)
        log_file = sdir / EVENTS_FILE
        fd = open_private(log_file, os.O_WRONLY | os.O_CREAT)
        os.fsync(fd)
        os.close(fd)
        _fsync_dir(sdir)
        _fsync_dir(self.sessions_dir)
        for p in new_parents:
            _fsync_dir(p.parent if p.parent != p else p)

    def _drop_log_fd(self, session: str) -> None:
        with self._guard:
            cached = self._log_fds.pop(session, None)
        if cached is not None:
            os.close(cached[0])
