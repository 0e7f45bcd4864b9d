"""What a writer knows of a session's log (its tail), and how it is kept true.

A process opens a session from its tail record in O(1) when the record matches the file's end, and
walks it from genesis otherwise (ledger/tailrecord.py); it follows other processes' appends and
erasures (ledger/chunks.py, ledger/resync.py), quarantines a torn last line, and refuses to write
on anything else (LedgerCorrupted). `open_session` and `head` are the public doors.
"""

from __future__ import annotations

import logging
import os
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from ledger.chunks import PREFIX_CHANGED, ChunkLog, rehash
from ledger.corrupted import LedgerCorrupted
from ledger.erasures import ErasureState
from ledger.event import EVENTS_FILE, GENESIS, now_ts
from ledger.verify import TORN_TAIL, Break, ChainWalker, SessionReport, finish, read_chunks, split_lines
from storage.common.fsmode import open_private
from storage.files.ledger import tailrecord
from storage.files.ledger.resync import resync
from storage.files.ledger.rewrite import temp_path
from storage.files.ledger.sessions import Sessions, _fsync_dir

log = logging.getLogger("ledger")
# A session of fewer lines is walked on open even when its tail record matches: the walk costs
# less than ~15 ms there, and a walked tail follows another process's erasure chunk by chunk.
RECORD_MIN_LINES = 1024


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

    def changed(self, ledger: Recovery, session: str) -> LedgerCorrupted:
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


class Recovery(Sessions):
    """The tail of each session this object writes or reads (Ledger's base)."""

    def __init__(self, data_dir: str | os.PathLike[str], *, record_tails: bool = True) -> None:
        super().__init__(data_dir, record_tails=record_tails)
        self._tails: dict[str, _Tail] = {}
        self.quarantined: list[Quarantine] = []

    def _forget_state(self, session: str) -> None:
        self._tails.pop(session, None)

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
