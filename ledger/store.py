"""The ledger's file I/O: the only module in `ledger/` that touches the disk.

Layout: DATA_DIR/sessions/<session_id>/events.jsonl (one event per line),
a `lock` file beside it for the cross-process writer lock, and
`events.jsonl.torn-<offset>-<utc>` files holding quarantined torn tails.
"""

from __future__ import annotations

import fcntl
import gc
import logging
import os
import threading
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import orjson

from . import importer, tailrecord
from .bulk import ID_BYTES, Block, chain, encode_messages, random_ids
from .chunks import PREFIX_CHANGED, ChunkLog, rehash
from .erasures import ErasureState, record_entries
from .event import (
    GENESIS,
    SALT_BYTES,
    Event,
    EventError,
    erased_form,
    erasure_record_meta,
    erasure_record_text,
    event_from_dict,
    is_erasure_record,
    make_event,
    now_ts,
    validate_session_id,
)
from .fsmode import open_private, private_dir
from .importer import Imported
from .messages import ImportError_ as ImportError_  # re-exported: callers import it from ledger.store
from .messages import Message as Message
from .messages import parse_import as parse_import
from .messages import validate_message as validate_message
from .parallel import counted, verify_file_parallel_erased
from .resync import resync
from .rewrite import rewrite, temp_path
from .verify import TORN_TAIL, Break, ChainWalker, SessionReport, finish, read_chunks, split_lines, verify_stream

log = logging.getLogger("ledger")
EVENTS_FILE = "events.jsonl"
MAX_OPEN_SESSIONS = 128
# A session of fewer lines is walked on open even when its tail record matches: the walk costs
# less than ~15 ms there, and a walked tail follows another process's erasure chunk by chunk.
RECORD_MIN_LINES = 1024
BISECT_MAX = 64  # seqs one read_events finds by bisection when the offsets are not known; more: one scan


class LedgerCorrupted(RuntimeError):
    """A session's ledger does not verify; appends are refused until a person repairs it."""

    def __init__(self, report: SessionReport) -> None:
        brk = report.brk
        where = f"line {brk.line}, seq {brk.seq}, {brk.kind}: {brk.message}" if brk else "unknown"
        super().__init__(f"session {report.session}: ledger is corrupted ({where}); appends are refused")
        self.report = report


class EraseError(ValueError):
    """An erasure was refused (unknown session, bad seq, already erased, ...); nothing was changed."""


class Appended(NamedTuple):
    """What Ledger.append_blocks wrote: the blocks, chained, and the chain head before them."""

    blocks: list[Block]
    head0: bytes


class Erasure(NamedTuple):
    """What Ledger.erase did: the events now in erased form (seq order) and the erasure records appended.

    `records`: one per MAX_RECORD_ENTRIES erased events, consecutive, in seq order; `record` is the last.
    """

    erased: list[Event]
    record: Event
    records: list[Event]


@dataclass(frozen=True, slots=True)
class Quarantine:
    session: str
    path: str
    offset: int
    length: int


@dataclass(slots=True)
class _Tail:
    """What this writer verified (or wrote) of a session's log.

    `stat` is the file's (inode, size, mtime_ns, ctime_ns) after this writer's
    last write or check: while it matches, the prefix is trusted as is (O(1)).
    On any mismatch, `chunks` (sha256 per CHUNK_LINES lines of the prefix)
    prove the prefix is unchanged before the lines after it are walked, and
    `marks` (the first 8 bytes of each line's chain hash) name the first line
    that changed when it is not.
    """

    size: int  # bytes of verified, complete lines
    next_seq: int  # also the number of lines: line n holds seq n-1
    head: bytes
    offsets: array[int]  # byte offset of each line (seq -> offset), for reads by seq
    chunks: ChunkLog = field(default_factory=ChunkLog)
    marks: array[int] = field(default_factory=lambda: array("Q"))
    stat: tuple[int, int, int, int] | None = None
    erasures: ErasureState = field(default_factory=ErasureState)  # erased lines and their records in the prefix
    # Opened from the tail record (ledger/tailrecord.py): only size, next_seq, head, stat and `last`
    # are known; offsets (once scanned), chunks, marks and erasures are not. Whatever needs them walks.
    light: bool = False
    last: int = 0  # byte offset of the last line, when light


@dataclass(slots=True)
class _Restart:
    """The verified prefix changed from chunk `index` on; `log` holds the chunks before it."""

    path: Path
    tail: _Tail
    index: int
    log: ChunkLog

    def changed(self, ledger: Ledger, session: str) -> LedgerCorrupted:
        return ledger._prefix_break(session, self.path, self.tail, self.index)


def _remove_leftover(path: Path) -> None:
    """A temp file of an erasure that crashed before its rename: garbage (the caller holds the lock)."""
    try:
        temp_path(path).unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:  # e.g. a read-only data directory: it stays, read by nothing
        log.warning("%s: could not remove the leftover of a crashed erasure (%s)", temp_path(path), exc.strerror)


def _stat_key(st: os.stat_result) -> tuple[int, int, int, int]:
    # ctime cannot be set back by an unprivileged user: an edit with the mtime restored still shows
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _mark(chain: bytes) -> int:
    return int.from_bytes(chain[:8], "big")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _random_ids(n: int) -> tuple[list[bytes], list[str]]:
    blob = random_ids(n)
    salts, ids = [], []
    step = SALT_BYTES + 16
    for i in range(n):
        chunk = blob[i * step : (i + 1) * step]
        salts.append(chunk[:SALT_BYTES])
        ids.append("evt_" + chunk[SALT_BYTES:].hex())
    return salts, ids


class Ledger:
    """All sessions under one data directory.

    Safe for many threads; one writer per session at a time across threads and
    processes (flock on the session's `lock` file).

    `record_tails=False` is a reader's ledger: it never writes a session's tail record
    (ledger/tailrecord.py), so a command that only reads leaves the data directory as it found
    it; opening a session without a current record then walks it, as it would anyway.
    """

    def __init__(self, data_dir: str | os.PathLike[str], *, record_tails: bool = True) -> None:
        self.data_dir = Path(data_dir)
        self.record_tails = record_tails
        self.sessions_dir = self.data_dir / "sessions"
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._tails: dict[str, _Tail] = {}
        self.quarantined: list[Quarantine] = []
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
            self._tails.pop(session, None)
            self._locks.pop(session, None)
            self._path_cache.pop(session, None)

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
        if sdir.is_dir():
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

    # -- recovery ----------------------------------------------------------
    def _tail_state(self, session: str, sdir: Path, st: os.stat_result | None = None, *, full: bool = False) -> _Tail:
        """Bring the cached tail up to date with the file (caller holds the lock).

        A process that holds no tail yet opens it from the tail record in O(1) when the record
        matches the file's end (ledger/tailrecord.py), and walks from genesis otherwise; `full`
        asks for a walked tail (offsets, chunks, marks, erasures: an erasure needs them). A
        tail opened from the record that finds the file changed opens it again from the (new)
        record, and accepts it only if the line it ended on still ends there with the same
        chain hash; when that cannot be shown in O(1), it walks, and the walked file must hold
        that chain hash at that seq (else prefix_changed).

        O(1) while the file's (inode, size, mtime, ctime) are what this writer
        last saw. Otherwise the prefix it verified is re-hashed chunk by chunk
        (ledger/chunks.py) and must be unchanged, byte for byte — or, where
        another process erased lines (Ledger.erase: the file replaced by one
        rename), keep every chain hash this writer verified: the changed chunks
        are walked again and each line must link to the same chain hash as
        before (only its form changed); moved, unchanged chunks are re-hashed
        (ledger/resync.py). Any other change raises
        LedgerCorrupted naming the line, and appends stay refused. Lines
        written by other processes after it are then verified incrementally; a
        torn tail is quarantined; corruption raises.
        """
        path = sdir / EVENTS_FILE
        if st is None:
            try:
                st = os.stat(path)
            except FileNotFoundError:
                st = None
        key = _stat_key(st) if st is not None else None
        tail = self._tails.get(session)
        if tail is not None and key is not None and tail.stat == key and not (full and tail.light):
            return tail
        size = st.st_size if st is not None else 0
        if tail is not None and tail.light:
            return self._reopen_light(session, sdir, path, tail, key, full)
        if tail is None:
            _remove_leftover(path)
            if not full and key is not None:
                light = self._from_record(session, sdir, path, key)
                if light is not None:
                    return light
            tail = _Tail(0, 0, GENESIS, array("Q"))
        elif tail.next_seq:
            restart = self._check_prefix(session, path, tail)
            if restart is not None:
                return self._rewalk_changed(session, path, tail, size, restart)
        if size == tail.size:
            tail.stat = key
            self._tails[session] = tail
            self._save_record(sdir, tail)
            return tail
        return self._walk_after(session, path, tail, size)

    def _from_record(self, session: str, sdir: Path, path: Path, key: tuple[int, int, int, int]) -> _Tail | None:
        """The tail the record describes, when it matches the file's end (O(1)); else None (walk)."""
        rec = tailrecord.load(sdir)
        if rec is None or rec.next_seq < RECORD_MIN_LINES or not tailrecord.trusted(session, path, key, rec):
            return None
        tail = _Tail(key[1], rec.next_seq, rec.head, array("Q"), stat=key, light=True, last=rec.last)
        self._tails[session] = tail
        return tail

    def _reopen_light(
        self, session: str, sdir: Path, path: Path, old: _Tail, key: tuple[int, int, int, int] | None, full: bool
    ) -> _Tail:
        """The file changed (or a walked tail is wanted) under a tail opened from the record.

        Nothing was verified here beyond the record, so the file is opened again as by a new
        process; the line this tail ended on must still be there, with the same chain hash.
        """
        if not full and key is not None and key[0] == (old.stat or (0,))[0]:
            new = self._from_record(session, sdir, path, key)  # same inode: appended to by another process
            if new is not None and new.next_seq >= old.next_seq and self._chain_at(session, path, old.last, new.size, old.next_seq - 1) == old.head:
                return new
        del self._tails[session]
        if key is None:
            brk = Break(1, 0, PREFIX_CHANGED, f"{old.next_seq} lines", "no file", f"{path}: the ledger this writer held ({old.next_seq} lines) is gone")
            raise LedgerCorrupted(SessionReport(session, False, 0, GENESIS.hex(), brk))
        size = key[1]
        new = self._walk_after(session, path, _Tail(0, 0, GENESIS, array("Q")), size)
        if old.next_seq:
            found = self._chain_at(session, path, new.offsets[old.next_seq - 1], new.size, old.next_seq - 1) if new.next_seq >= old.next_seq else None
            if found != old.head:
                del self._tails[session]
                seq = old.next_seq - 1
                brk = Break(seq + 1, seq, PREFIX_CHANGED, old.head.hex(), found.hex() if found else "no such line",
                            f"line {seq + 1} (seq {seq}) changed after this writer read it: its chain hash differs")
                raise LedgerCorrupted(SessionReport(session, False, seq, "", brk))
        return new

    @staticmethod
    def _chain_at(session: str, path: Path, start: int, size: int, seq: int) -> bytes | None:
        """The chain hash of the line starting at byte `start`, when it is one whole line claiming `seq`."""
        with open(path, "rb") as f:
            if start:
                f.seek(start - 1)
                if f.read(1) != b"\n":
                    return None
            raw = f.readline(tailrecord.MAX_LINE_BYTES)
        if not raw.endswith(b"\n") or start + len(raw) > size:
            return None
        return tailrecord.line_chain(session, seq, raw[:-1])

    def _save_record(self, sdir: Path, tail: _Tail) -> None:
        """Record where the verified log ends (after its fsync); a failure only costs the next open a walk."""
        if not self.record_tails or tail.stat is None or not tail.next_seq:
            return
        last = tail.last if tail.light else tail.offsets[tail.next_seq - 1]
        rec = tailrecord.TailRecord(tail.next_seq, tail.head, last, tail.stat)
        if tailrecord.load(sdir) == rec:
            return  # a reading command that walked a current record writes nothing
        try:
            tailrecord.save(sdir, rec)
        except OSError as exc:  # e.g. a read-only data directory
            log.debug("%s: tail record not written (%s)", sdir, exc.strerror)

    def _walk_after(self, session: str, path: Path, tail: _Tail, size: int) -> _Tail:
        """Verify the lines after `tail` (written by another process) and extend it with them."""
        walker = ChainWalker(session, tail.next_seq, tail.head, tail.next_seq, tail.erasures.copy())
        n0 = len(tail.offsets)
        chunks = tail.chunks.copy()
        good_end = tail.size
        try:
            with open(path, "rb") as f:
                f.seek(good_end)
                for raw, torn in split_lines(chunks.tee(read_chunks(f))):
                    end = good_end + len(raw) + (0 if torn else 1)
                    brk = walker.step(raw, last=torn)
                    if brk is not None:
                        if self._is_torn_tail(brk, end, size):
                            self._quarantine(session, path, good_end, size)
                            break
                        raise LedgerCorrupted(SessionReport(session, False, walker.next_seq, walker.head.hex(), brk))
                    tail.offsets.append(good_end)
                    tail.marks.append(_mark(walker.head))
                    chunks.line(end - good_end, walker.head)
                    good_end = end
            chunks.finish()
            ended = finish(walker)
            if ended.brk is not None:  # an erased line no erasure record lists
                raise LedgerCorrupted(ended)
        except BaseException:
            del tail.offsets[n0:]  # the cached tail stays what was verified before this walk
            del tail.marks[n0:]
            raise
        after = os.stat(path)
        stat = _stat_key(after) if after.st_size == good_end else None
        new = _Tail(good_end, walker.next_seq, walker.head, tail.offsets, chunks, tail.marks, stat, walker.erasures)
        self._tails[session] = new
        self._save_record(path.parent, new)
        return new

    def _rewalk_changed(self, session: str, path: Path, tail: _Tail, size: int, restart: _Restart) -> _Tail:
        """The prefix changed from chunk `restart.index` on: accept it only as another process's erasure.

        Only the changed chunks are walked again (every line must keep the chain hash this writer
        verified); a later chunk whose bytes re-hash equal at their new offset is taken as it was
        (ledger/resync.py). Then the lines after the prefix are walked as usual. Anything else is
        the prefix_changed break naming the first changed line.
        """
        fd = os.open(path, os.O_RDONLY)
        try:
            found = resync(
                fd,
                size,
                session,
                tail.chunks.chunks(),
                restart.index,
                tail.erasures,
                lambda seq, _digest, head: _mark(head) == tail.marks[seq],
                lambda first, n: tail.offsets[first : first + n],
            )
        finally:
            os.close(fd)
        if found is None:
            raise restart.changed(self, session)
        offsets = array("Q", tail.offsets[: found.offsets_from])
        offsets.extend(found.offsets)
        moved = _Tail(found.log.end, tail.next_seq, found.log.head, offsets, found.log, tail.marks, None, found.erasures)
        return self._walk_after(session, path, moved, size)

    def _check_prefix(self, session: str, path: Path, tail: _Tail) -> _Restart | None:
        """None when the bytes this writer verified are all still there, unchanged; else where to walk again.

        LedgerCorrupted when the file is gone.
        """
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            brk = Break(1, 0, PREFIX_CHANGED, f"{tail.next_seq} lines", "no file", f"{path}: the ledger this writer held ({tail.next_seq} lines) is gone")
            raise LedgerCorrupted(SessionReport(session, False, 0, GENESIS.hex(), brk)) from None
        try:
            found = rehash(fd, tail.chunks.chunks())
        finally:
            os.close(fd)
        if found.first_changed is None:
            return None
        return _Restart(path, tail, found.first_changed, ChunkLog(tail.chunks.chunks()[: found.first_changed]))

    def _prefix_break(self, session: str, path: Path, tail: _Tail, index: int) -> LedgerCorrupted:
        """The prefix changed other than by an erasure: the error naming the first changed line."""
        fd = os.open(path, os.O_RDONLY)
        try:
            brk = self._first_changed_line(session, fd, tail, index)
        finally:
            os.close(fd)
        return LedgerCorrupted(SessionReport(session, False, brk.line - 1, "", brk))

    @staticmethod
    def _first_changed_line(session: str, fd: int, tail: _Tail, index: int) -> Break:
        """The first line of chunk `index` on that differs from what this writer verified (error path only)."""
        recorded = tail.chunks.chunks()
        chunk = recorded[index]
        before = recorded[index - 1].head if index else GENESIS
        walker = ChainWalker(session, chunk.first_line, before, chunk.first_line)
        pos = chunk.start
        seq = chunk.first_line

        def changed(detail: str, expected: str | None = None, found: str | None = None) -> Break:
            return Break(seq + 1, seq, PREFIX_CHANGED, expected, found,
                         f"line {seq + 1} (seq {seq}) changed after this writer verified it: {detail}")

        with os.fdopen(os.dup(fd), "rb") as f:
            f.seek(chunk.start)
            for raw, torn in split_lines(read_chunks(f)):
                if seq >= tail.next_seq:
                    break
                if pos != tail.offsets[seq]:
                    return changed("it moved", f"offset {tail.offsets[seq]}", f"offset {pos}")
                brk = walker.step(raw, last=torn)
                if brk is not None:
                    return changed(f"it no longer verifies ({brk.kind}: {brk.message})", brk.expected, brk.found)
                if _mark(walker.head) != tail.marks[seq]:
                    return changed("its bytes differ (it verifies, with a different chain hash: rewritten)")
                pos += len(raw) + 1
                seq += 1
        if seq < tail.next_seq:
            return changed(f"the file now ends before it (this writer verified {tail.next_seq} lines)")
        seq = chunk.first_line
        return changed(f"bytes differ in lines {chunk.first_line + 1}–{chunk.first_line + chunk.lines}")

    @staticmethod
    def _is_torn_tail(brk: Break, end: int, size: int) -> bool:
        # A torn tail is the *last* line, either without newline or unparsable.
        return end >= size and (brk.kind == TORN_TAIL or brk.kind == "parse_error")

    def _quarantine(self, session: str, path: Path, offset: int, size: int) -> None:
        with open(path, "rb") as f:
            f.seek(offset)
            torn = f.read(size - offset)
        qpath = path.with_name(f"{EVENTS_FILE}.torn-{offset}-{now_ts().replace(':', '')}")
        fd = open_private(qpath, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            os.write(fd, torn)
            os.fsync(fd)
        finally:
            os.close(fd)
        _fsync_dir(path.parent)
        with open(path, "r+b") as f:
            f.truncate(offset)
            f.flush()
            os.fsync(f.fileno())
        q = Quarantine(session, str(qpath), offset, len(torn))
        self.quarantined.append(q)
        log.warning("session %s: torn last line (%d bytes at offset %d) moved to %s", session, len(torn), offset, qpath)

    def open_session(self, session: str) -> _Tail:
        """Recover a session (quarantine a torn tail) and return its head. Raises LedgerCorrupted."""
        with self._locked(session, create=False) as sdir:
            return self._tail_state(session, sdir)

    def head(self, session: str) -> tuple[int, str]:
        """(number of events, chain hash of the last one) — GENESIS for an empty session."""
        if not self.exists(session):
            return 0, GENESIS.hex()
        tail = self.open_session(session)
        return tail.next_seq, tail.head.hex()

    # -- writing -----------------------------------------------------------
    def append(
        self,
        session: str,
        role: str,
        text: str,
        meta: dict[str, Any] | None = None,
        ts: str | None = None,
    ) -> Event:
        """Append one event; durable (fsync) before it returns."""
        return self.append_many(session, [validate_message(role, text, meta, ts)], _validated=True)[0]

    def append_many(self, session: str, messages: Sequence[Message], *, _validated: bool = False) -> list[Event]:
        """Append a batch with one write and one fsync.

        Every message is validated before anything is written: one bad message
        refuses the whole batch.
        """
        validate_session_id(session)
        if not _validated:
            messages = [validate_message(m.role, m.text, m.meta, m.ts) for m in messages]
        if not messages:
            return []
        ids = random_ids(len(messages))
        now = ""

        def encode(seq: int) -> list[Block]:
            nonlocal now
            now = now_ts()
            return [encode_messages(session, seq, messages, now, ids)]

        written = self.append_blocks(session, encode, 0, GENESIS)
        (block,) = written.blocks
        events = []
        prev = written.head0
        for i, m in enumerate(messages):
            at = i * ID_BYTES
            chain_hash = block.head(i)
            events.append(
                Event(
                    session=session,
                    seq=block.seq + i,
                    id="evt_" + ids[at + SALT_BYTES : at + ID_BYTES].hex(),
                    role=m.role,
                    ts=m.ts or now,
                    meta=m.meta,
                    text=m.text,
                    salt=ids[at : at + SALT_BYTES].hex(),
                    digest=block.digests[32 * i : 32 * i + 32].hex(),
                    prev=prev.hex(),
                    chain=chain_hash.hex(),
                )
            )
            prev = chain_hash
        return events

    def append_blocks(self, session: str, encode: Callable[[int], list[Block]], seq: int, head: bytes) -> Appended:
        """Append blocks of encoded events (ledger/bulk.py) with one fsync; the blocks as written.

        `encode(seq)` gives the blocks, their first event at `seq`: it is called under the lock
        unless the blocks it gave for `seq` are already there, chained from `head` (both as the
        caller guessed them: ledger/importer.py encodes in other processes before the lock).
        Under the lock, the blocks are encoded again when the session's next seq is not `seq`,
        and chained again when its head is not `head`.
        """
        with self._locked(session, create=True) as sdir:
            log_file = self._paths(session)[1]
            st = os.stat(log_file)
            tail = self._tail_state(session, sdir, st)
            blocks = encode(tail.next_seq)
            if tail.next_seq != seq or tail.head != head or any(len(b.heads) != 32 * b.count for b in blocks):
                prev = tail.head
                for b in blocks:
                    prev = chain(b, prev)
            chunks = tail.chunks.copy()  # moves on only after the fsync, like the rest of the tail
            light = tail.light  # a tail from the record keeps no chunks or marks: a walk rebuilds them
            scanned = not light or len(tail.offsets) == tail.next_seq
            new_offsets = array("Q")
            new_marks = array("Q")
            pos = tail.size
            fd = self._log_fd(session, log_file, st.st_ino)
            for b in blocks:
                _write_all(fd, b.data)
                if not light:
                    chunks.append_block(b.data, b.starts, b.heads)
                    new_marks.extend(b.marks())
                new_offsets.extend(map(pos.__add__, b.starts))
                pos += len(b.data)
            os.fsync(fd)
            stat = _stat_key(os.fstat(fd))
            # only now does the cache move on: after a failed write the next call re-reads the tail
            if scanned:
                tail.offsets.extend(new_offsets)
            if not light:
                tail.marks.extend(new_marks)
            head0 = tail.head
            next_seq = tail.next_seq + len(new_offsets)
            new = _Tail(
                pos, next_seq, blocks[-1].head(blocks[-1].count - 1), tail.offsets, chunks, tail.marks, stat if stat[1] == pos else None,
                tail.erasures, light, new_offsets[-1],
            )
            self._tails[session] = new
            self._save_record(sdir, new)
            return Appended(blocks, head0)

    def erase(self, session: str, seqs: Iterable[int], *, reason: str | None = None) -> Erasure:
        """Erase events: their lines rewritten in erased form, erasure records appended, in one transaction.

        Under the session's lock: validate (EraseError, one line, nothing changed), write the
        whole new file to a temp file beside it, fsync, rename over events.jsonl, fsync the
        folder (ledger/rewrite.py). Every digest and chain hash stays the same; one erasure
        record per MAX_RECORD_ENTRIES erased events (consecutive, in seq order, the same ts and
        reason) grows the chain, all in that one rename. Writers in other processes see the replaced file under the
        lock and walk its changed chunks again (Ledger._tail_state).
        """
        try:
            validate_session_id(session)
        except EventError as exc:
            raise EraseError(str(exc)) from None
        wanted = _erase_seqs(session, seqs)
        if reason is not None and not isinstance(reason, str):
            raise EraseError(f"session {session}: reason must be a string or None")
        if reason is not None and len(reason) > MAX_REASON:
            raise EraseError(f"session {session}: reason is {len(reason)} characters, over the limit of {MAX_REASON}")
        if not self.exists(session):
            raise EraseError(f"session {session}: no such session")
        with self._locked(session, create=False) as sdir:
            path = self._paths(session)[1]
            tail = self._tail_state(session, sdir, full=True)  # rewrite needs every offset and chunk
            for seq in wanted:
                if not seq < tail.next_seq:
                    raise EraseError(f"session {session}: no event at seq {seq} (it holds {tail.next_seq})")
            old = self._read_lines(path, tail, wanted)
            for ev in old:
                if ev.erased:
                    raise EraseError(f"session {session}: seq {ev.seq} is already erased")
                if is_erasure_record(ev):
                    raise EraseError(f"session {session}: seq {ev.seq} is an erasure record, which cannot be erased")
            gone = [erased_form(ev) for ev in old]
            groups = [gone[i : i + MAX_RECORD_ENTRIES] for i in range(0, len(gone), MAX_RECORD_ENTRIES)]
            salts, ids = _random_ids(len(groups))
            erasures = tail.erasures.copy()  # what the tail will know once the new file is in place
            for e in gone:
                erasures.saw_erased(e.seq, e.to_dict())
            records: list[Event] = []
            appended: list[tuple[bytes, bytes]] = []
            prev, at, when = tail.head, tail.next_seq, now_ts()
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
            done = rewrite(
                path,
                tail.size,
                tail.offsets,
                tail.chunks.chunks(),
                {e.seq: e.to_line() for e in gone},
                appended,
                tail.chunks.open_hash(),
            )
            self._drop_log_fd(session)  # it writes to the old file: the next append opens the new one
            marks = array("Q", tail.marks)
            marks.extend(_mark(head) for _line, head in appended)
            new = _Tail(done.size, at + len(records), prev, done.offsets, done.chunks, marks, _stat_key(done.stat), erasures)
            self._tails[session] = new
            self._save_record(sdir, new)
            log.info(
                "session %s: erased %d event(s) (seqs %s), erasure record(s) at seq %d-%d",
                session, len(gone), wanted, records[0].seq, records[-1].seq,
            )
            return Erasure(gone, records[-1], records)

    @staticmethod
    def _read_lines(path: Path, tail: _Tail, seqs: Sequence[int]) -> list[Event]:
        out = []
        with open(path, "rb") as f:
            for seq in seqs:
                start = tail.offsets[seq]
                end = tail.offsets[seq + 1] if seq + 1 < tail.next_seq else tail.size
                f.seek(start)
                out.append(event_from_dict(orjson.loads(f.read(end - start)), seq + 1))
        return out

    def _drop_log_fd(self, session: str) -> None:
        with self._guard:
            cached = self._log_fds.pop(session, None)
        if cached is not None:
            os.close(cached[0])

    def import_jsonl(
        self, session: str, lines: Iterable[bytes], progress: Any = None, *, allow_system: bool = False, workers: int | None = None
    ) -> Imported:
        """Validate every line of an import file, then append them all in one batch (ledger/importer.py).

        Role "system" is refused unless `allow_system`: an imported line would
        reach the model labelled as the app's own instruction. Files of 100,000
        lines or more are encoded in worker processes (`workers`: how many; 0: none).
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

    # -- reading -----------------------------------------------------------
    @contextmanager
    def _snapshot(self, session: str, *, offsets: bool = False) -> Iterator[tuple[_Tail, BinaryIO]]:
        """The session's tail and its log opened under the lock: the same file, whatever happens next.

        An erasure in another process replaces the file by a rename (its lines shorter, every
        later offset moved): a descriptor opened under the lock still reads the file this tail
        describes, never the new one with this tail's offsets.
        """
        with self._locked(session, create=False) as sdir:
            tail = self._tail_state(session, sdir)
            if offsets and len(tail.offsets) != tail.next_seq:
                tail = self._scan_offsets(session, sdir, tail)
            f = open(sdir / EVENTS_FILE, "rb")  # noqa: SIM115 - closed below, after the lock is released
        try:
            yield tail, f
        finally:
            f.close()

    def _scan_offsets(self, session: str, sdir: Path, tail: _Tail) -> _Tail:
        """A tail opened from the record learns each line's offset by a newline scan (no parse).

        The scan must find exactly the record's lines, the last where the record says; else walk.
        """
        found = tailrecord.line_offsets(sdir / EVENTS_FILE, tail.size)
        if len(found) == tail.next_seq and found[-1] == tail.last:
            tail.offsets = array("Q", found)
            return tail
        log.info("session %s: the tail record does not match the file's lines; walking it", session)
        return self._tail_state(session, sdir, full=True)

    def events(self, session: str, start_seq: int = 0) -> Iterator[Event]:
        """Iterate a session's events in order (after recovering a torn tail).

        Reads the stored lines as they are; use verify() to check them.
        """
        with self._snapshot(session) as (tail, f):
            line_no = 0
            for raw, _torn in split_lines(read_chunks(f, tail.size)):
                line_no += 1
                obj = orjson.loads(raw)
                if obj["seq"] >= start_seq:
                    yield event_from_dict(obj, line_no)

    def read_events(self, session: str, seqs: Iterable[int]) -> list[Event]:
        """The events at the given seqs, read directly by byte offset (O(1) each).

        Raises IndexError for a seq the session does not hold. The lines are
        read as stored; their digests are what a caller checks against.
        """
        wanted = list(seqs)
        # A tail opened from the record finds a few lines by bisection (O(log n) lines each); many, by a scan.
        out = self._read_at(session, wanted, offsets=len(wanted) > BISECT_MAX)
        if out is None:  # when in doubt, scan
            out = self._read_at(session, wanted, offsets=True)
        assert out is not None  # every offset known: nothing was bisected
        return out

    def _read_at(self, session: str, wanted: list[int], *, offsets: bool) -> list[Event] | None:
        """read_events; None when a line could not be found by bisection (the caller scans instead)."""
        out = []
        with self._snapshot(session, offsets=offsets) as (tail, f):
            for seq in wanted:
                if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq < tail.next_seq:
                    raise IndexError(f"session {session}: no event at seq {seq!r} (it holds {tail.next_seq})")
                if len(tail.offsets) == tail.next_seq:
                    start = tail.offsets[seq]
                    end = tail.offsets[seq + 1] if seq + 1 < len(tail.offsets) else tail.size
                else:
                    span = tailrecord.find_line(f.fileno(), seq, tail.size, tail.last, tail.next_seq)
                    if span is None:
                        return None
                    start, end = span
                f.seek(start)
                out.append(event_from_dict(orjson.loads(f.read(end - start)), seq + 1))
        return out

    def verify(self, session: str, *, parallel: bool = True, progress: Any = None) -> SessionReport:
        """Verify one session from genesis, streaming, in constant memory.

        Ledgers over 64 MB are first checked in one process per core
        (ledger/parallel.py); any doubt falls back to the serial walk.
        `progress` (tqdm-like) is updated with the bytes read; a fallback walk starts it again.
        """
        path = self.log_path(session)
        if not path.is_file():
            raise FileNotFoundError(f"session {session}: no such session")
        tell = None if progress is None else progress.update
        start = None if progress is None else progress.n
        fast = verify_file_parallel_erased(path, session, progress=tell) if parallel else None
        if fast is not None:
            report = SessionReport(session, True, fast[0], fast[1], erased=fast[2])
        else:  # the serial walk is the judge: it names the first break
            if progress is not None and progress.n != start:
                progress.update(start - progress.n)  # what the parallel check read is read again
            with open(path, "rb") as f:
                report = verify_stream(session, counted(read_chunks(f), tell))
        torn = tuple(sorted(str(p) for p in path.parent.glob(f"{EVENTS_FILE}.torn-*")))
        if torn:
            report = report.with_quarantined(torn)
        return report


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
