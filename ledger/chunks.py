"""Per-chunk sha256 of a ledger's walked prefix: how a cache proves the bytes it vouches for.

A walk (the writer's tail, the auditor's cache) parses every line; proving later
that the bytes it walked are still the same needs only a raw sha256 of them, at
disk speed. The walked prefix is cut into chunks of CHUNK_LINES lines (the last
one may be shorter and still growing); each chunk records where it lies, how
many lines it holds, the sha256 of its bytes and the chain head after its last
line. A changed byte then costs a re-walk from the start of its chunk (the head
before it is the previous chunk's), not from genesis: the erased lines of a
later issue are legitimate in-place changes.

This is the one implementation: ledger/recovery.py (the writer) and
receipts/audit.py (the auditor) both use it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.canonical import loads_strict
from ledger.event import GENESIS

CHUNK_LINES = 1 << 16
READ_SIZE = 1 << 20
# Break kind (beside those of ledger/verify.py): a line the writer had verified changed under it.
PREFIX_CHANGED = "prefix_changed"


@dataclass(frozen=True, slots=True)
class Chunk:
    start: int  # byte offset of its first line
    end: int  # byte offset just past its last line's newline
    first_line: int  # lines before it (= its first line's seq)
    lines: int  # lines in it
    sha256: bytes  # of the bytes [start, end)
    head: bytes  # chain hash after its last line

    def to_list(self) -> list[Any]:
        return [self.start, self.end, self.first_line, self.lines, self.sha256.hex(), self.head.hex()]

    @staticmethod
    def from_list(item: Any) -> Chunk:
        """From `to_list` output read back from outside; ValueError for anything else."""
        if type(item) is not list or len(item) != 6:
            raise ValueError("a chunk is a list of 6 items")
        start, end, first, lines, sha, head = item
        if not all(type(v) is int and v >= 0 for v in (start, end, first, lines)) or end <= start or lines <= 0:
            raise ValueError("chunk bounds")
        if type(sha) is not str or type(head) is not str or len(sha) != 64 or len(head) != 64:
            raise ValueError("chunk hashes")
        return Chunk(start, end, first, lines, bytes.fromhex(sha), bytes.fromhex(head))


def check_contiguous(chunks: Sequence[Chunk]) -> None:
    """ValueError unless the chunks tile [0, end) line after line, every one but the last full."""
    pos = line = 0
    for i, c in enumerate(chunks):
        if c.start != pos or c.first_line != line or (c.lines != CHUNK_LINES and i != len(chunks) - 1):
            raise ValueError(f"chunk {i} does not follow chunk {i - 1}")
        pos, line = c.end, c.first_line + c.lines
        if c.lines > CHUNK_LINES:
            raise ValueError(f"chunk {i} holds more than {CHUNK_LINES} lines")


@dataclass(frozen=True, slots=True)
class Rehash:
    """What re-hashing recorded chunks against a file found."""

    first_changed: int | None  # index of the first chunk whose bytes differ (or are missing); None: all match
    bytes_hashed: int
    last: Any  # when all match: the sha256 object of the last chunk (to keep growing it), else None


def _hash_range(fd: int, start: int, end: int, buf: bytearray) -> Any:
    h = hashlib.sha256()
    view = memoryview(buf)
    pos = start
    while pos < end:
        n = os.preadv(fd, [view[: min(len(buf), end - pos)]], pos)
        if n <= 0:
            return None  # the file ends before the chunk does
        h.update(view[:n])
        pos += n
    view.release()
    return h


def hash_range(fd: int, start: int, end: int) -> Any:
    """The sha256 object of the bytes [start, end) of `fd` (OSError if the file ends before `end`)."""
    h = _hash_range(fd, start, end, bytearray(READ_SIZE))
    if h is None:
        raise OSError(f"the file ends before byte {end}")
    return h


def rehash(fd: int, chunks: Sequence[Chunk]) -> Rehash:
    """Re-hash each chunk's bytes in `fd` (1 MiB reads) in order; stop at the first that differs."""
    buf = bytearray(READ_SIZE)
    done = 0
    last: Any = None
    for i, c in enumerate(chunks):
        h = _hash_range(fd, c.start, c.end, buf)
        done += c.end - c.start
        if h is None or h.digest() != c.sha256:
            return Rehash(i, done, None)
        last = h
    return Rehash(None, done, last)


class ChunkLog:
    """The chunks of a prefix being walked or appended to: closed chunks plus the open (last) one.

    Feed it either walked bytes (`tee` the blocks a walk reads, then `line` for
    each line the walk accepted: only accepted lines are hashed) or written lines
    (`append_lines`). `chunks()` is the record covering exactly [0, end).
    """

    def __init__(self, closed: Sequence[Chunk] = (), open_chunk: Chunk | None = None, open_hash: Any = None) -> None:
        self.closed: list[Chunk] = list(closed)
        if open_chunk is not None and open_chunk.lines >= CHUNK_LINES:  # full: it is closed
            self.closed.append(open_chunk)
            open_chunk = None
        base = self.closed[-1] if self.closed else None
        self._start = open_chunk.start if open_chunk else (base.end if base else 0)
        self._first = open_chunk.first_line if open_chunk else (base.first_line + base.lines if base else 0)
        self._lines = open_chunk.lines if open_chunk else 0
        self.end = open_chunk.end if open_chunk else self._start
        self.head = open_chunk.head if open_chunk else (base.head if base else GENESIS)
        self._h = open_hash.copy() if open_chunk is not None else hashlib.sha256()
        self._pending = bytearray()
        self._pending_pos = self.end

    @staticmethod
    def resume(chunks: Sequence[Chunk], last_hash: Any) -> ChunkLog:
        """Continue after `chunks`, whose last one hashed to `last_hash` (Rehash.last)."""
        if not chunks:
            return ChunkLog()
        return ChunkLog(chunks[:-1], chunks[-1], last_hash)

    def copy(self) -> ChunkLog:
        out = ChunkLog.__new__(ChunkLog)
        out.closed = list(self.closed)
        out._start, out._first, out._lines = self._start, self._first, self._lines
        out.end, out.head = self.end, self.head
        out._h = self._h.copy()
        out._pending, out._pending_pos = bytearray(self._pending), self._pending_pos
        return out

    @property
    def lines(self) -> int:
        return self._first + self._lines

    def open_hash(self) -> Any:
        """A copy of the sha256 state of the open (last, not full) chunk's bytes; None when there is none."""
        return self._h.copy() if self._lines else None

    def chunks(self) -> list[Chunk]:
        if self._lines == 0:
            return list(self.closed)
        return [*self.closed, Chunk(self._start, self.end, self._first, self._lines, self._h.digest(), self.head)]

    def _close(self) -> None:
        self.closed.append(Chunk(self._start, self.end, self._first, self._lines, self._h.digest(), self.head))
        self._start, self._first, self._lines = self.end, self._first + self._lines, 0
        self._h = hashlib.sha256()

    # -- a walk: blocks read from `end` on, and the lines it accepted ---------------------
    def tee(self, blocks: Iterable[bytes]) -> Iterator[bytes]:
        """Pass through the blocks a walk reads (from `end` on), keeping each until its lines are accounted for."""
        self._pending.clear()
        self._pending_pos = self.end
        for block in blocks:
            self._absorb()
            self._pending += block
            yield block
        self._absorb()

    def line(self, length: int, head: bytes | None = None) -> None:
        """The walk accepted the next line (`length` bytes with its newline); `head` is the chain after it.

        Without `head` (a walk that only reports digests), the chain head a
        chunk records is read from its last line's own `chain` field: the walk
        accepted that line, so the stored value is the recomputed one.
        """
        self.end += length
        self._lines += 1
        if head is not None:
            self.head = head
        if self._lines >= CHUNK_LINES:
            if head is None:
                at = self.end - length - self._pending_pos
                obj = loads_strict(bytes(self._pending[at : at + length - 1]), f"chunk log: line {self.lines}")
                self.head = bytes.fromhex(obj["chain"])
            self._absorb()
            self._close()

    def _absorb(self) -> None:
        k = self.end - self._pending_pos
        if k > len(self._pending):
            raise ValueError(f"chunk log: {k} bytes accounted for, only {len(self._pending)} read")
        if k:
            self._h.update(self._pending[:k])
            del self._pending[:k]
            self._pending_pos = self.end

    def finish(self) -> None:
        """End of a walk: bytes read past the last accepted line (a torn or broken line) are forgotten."""
        self._absorb()
        self._pending.clear()

    # -- appends: whole lines written by the caller ------------------------------------------
    def append_lines(self, lines: Sequence[bytes], heads: Sequence[bytes]) -> None:
        """Lines just written at `end` (each with its newline) and the chain head after each."""
        i = 0
        while i < len(lines):
            take = min(len(lines) - i, CHUNK_LINES - self._lines)
            seg = lines[i : i + take]
            self._h.update(b"".join(seg))
            self.end += sum(map(len, seg))
            self._lines += take
            self.head = heads[i + take - 1]
            i += take
            if self._lines >= CHUNK_LINES:
                self._close()
        self._pending_pos = self.end

    def append_block(self, data: bytes | bytearray, starts: Sequence[int], heads: bytes | bytearray) -> None:
        """Lines just written at `end` as one buffer: line i starts at starts[i] in `data` (the first at 0,
        the last running to its end); heads[32i:32i+32] is the chain head after line i. As append_lines."""
        n = len(starts)
        view = memoryview(data)
        i = 0
        while i < n:
            take = min(n - i, CHUNK_LINES - self._lines)
            a = starts[i]
            b = starts[i + take] if i + take < n else len(data)
            self._h.update(view[a:b])
            self.end += b - a
            self._lines += take
            self.head = bytes(heads[32 * (i + take - 1) : 32 * (i + take)])
            i += take
            if self._lines >= CHUNK_LINES:
                self._close()
        view.release()
        self._pending_pos = self.end


__all__ = ["CHUNK_LINES", "PREFIX_CHANGED", "Chunk", "ChunkLog", "Rehash", "check_contiguous", "hash_range", "rehash"]
