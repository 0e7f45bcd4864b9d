"""The tail record: where a session's log ends, so that opening it costs O(1) (docs/FORMAT.md §6).

`sessions/<s>/tail.json` says what the last writer left: how many lines, the chain hash of
the last one, the byte offset where that line starts, and the log's (inode, size, mtime,
ctime) right after its fsync. An open trusts it only when the log's stat is exactly that and
the last line, read at that offset, is one whole line that verifies on its own (digest and
chain hash) and ends on the recorded chain hash. Anything else — no record, an unreadable
one, another inode, another size, a touched file, a line that does not end there — is a
full walk from genesis, as without a record.

The record is a hint, never fsynced: it is written (temp file, rename) only after the log's
own fsync, so it never describes bytes that are not durable; one lost in a crash is missing,
empty or stale, and each of those is a walk. Only `verify` proves the chain before the last
line.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from ledger.erasures import ErasureState
from ledger.verify import ChainWalker
from storage.common.fsmode import open_private

RECORD_FILE = "tail.json"
RECORD_VERSION = 1
MAX_RECORD_BYTES = 4096
MAX_LINE_BYTES = 64 << 20  # a last line longer than this is read by the walk, not here

StatKey = tuple[int, int, int, int]  # (inode, size, mtime_ns, ctime_ns)


class TailRecord(NamedTuple):
    next_seq: int  # lines in the log (line n holds seq n-1)
    head: bytes  # chain hash of the last line
    last: int  # byte offset of the last line
    stat: StatKey  # of the log, right after the write this record describes


def record_path(sdir: Path) -> Path:
    return sdir / RECORD_FILE


def encode(rec: TailRecord) -> bytes:
    ino, size, mtime, ctime = rec.stat
    return orjson.dumps(
        {"v": RECORD_VERSION, "next_seq": rec.next_seq, "head": rec.head.hex(), "last": rec.last,
         "size": size, "ino": ino, "mtime_ns": mtime, "ctime_ns": ctime}
    ) + b"\n"


def decode(data: bytes) -> TailRecord | None:
    """The record in `data`, or None for anything that is not exactly one (a hint is never repaired)."""
    try:
        obj: Any = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    keys = {"v", "next_seq", "head", "last", "size", "ino", "mtime_ns", "ctime_ns"}
    if type(obj) is not dict or obj.keys() != keys or obj["v"] != RECORD_VERSION:
        return None
    ints = [obj[k] for k in ("next_seq", "last", "size", "ino", "mtime_ns", "ctime_ns")]
    if not all(type(v) is int and v >= 0 for v in ints):
        return None
    head = obj["head"]
    if type(head) is not str or len(head) != 64:
        return None
    try:
        raw_head = bytes.fromhex(head)
    except ValueError:
        return None
    if obj["next_seq"] == 0 or obj["last"] >= obj["size"]:
        return None
    return TailRecord(obj["next_seq"], raw_head, obj["last"], (obj["ino"], obj["size"], obj["mtime_ns"], obj["ctime_ns"]))


def load(sdir: Path) -> TailRecord | None:
    try:
        with open(record_path(sdir), "rb") as f:
            data = f.read(MAX_RECORD_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_RECORD_BYTES:
        return None
    return decode(data)


def save(sdir: Path, rec: TailRecord) -> None:
    """Write the record atomically (temp file, rename); not fsynced (see the module docstring)."""
    path = record_path(sdir)
    tmp = path.with_name(RECORD_FILE + ".tmp")
    fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        data = encode(rec)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    os.replace(tmp, path)


def remove(sdir: Path) -> None:
    """Drop the record before a rewrite the record cannot follow (a repair): the next open walks."""
    try:
        os.unlink(record_path(sdir))
    except FileNotFoundError:
        pass


def line_at(fd: int, start: int, end: int) -> bytes | None:
    """The one whole line in [start, end) of `fd` (without its newline), or None.

    None unless the byte before `start` is a newline (or `start` is 0), the range ends with
    the line's newline and holds no other.
    """
    if not 0 <= start < end or end - start > MAX_LINE_BYTES:
        return None
    lead = 1 if start else 0
    data = os.pread(fd, end - start + lead, start - lead)
    if len(data) != end - start + lead or (lead and data[:1] != b"\n"):
        return None
    data = data[lead:]
    if not data.endswith(b"\n") or b"\n" in data[:-1]:
        return None
    return data[:-1]


def line_chain(session: str, seq: int, raw: bytes) -> bytes | None:
    """The chain hash of line `raw` claiming `seq`, when the line verifies on its own; else None.

    Its `prev` is taken from the line itself: what comes before it is what only a walk checks.
    """
    try:
        obj: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    prev = obj.get("prev") if type(obj) is dict else None
    if type(prev) is not str or len(prev) != 64:
        return None
    try:
        start = bytes.fromhex(prev)
    except ValueError:
        return None
    walker = ChainWalker(session, seq, start, seq, ErasureState(unknown_before=seq))
    if walker.step(raw) is not None:
        return None
    return walker.head


def trusted(session: str, path: Path, stat: StatKey, rec: TailRecord) -> bool:
    """Whether `rec` describes the log at `path`, whose stat is `stat`, as it is now (O(1): one line read)."""
    if rec.stat != stat:
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        if os.fstat(fd).st_ino != stat[0]:
            return False
        raw = line_at(fd, rec.last, stat[1])
    finally:
        os.close(fd)
    return raw is not None and line_chain(session, rec.next_seq - 1, raw) == rec.head


def line_offsets(path: Path, size: int) -> list[int]:
    """The byte offset of each line in [0, size) (a newline scan: no line is parsed)."""
    out: list[int] = [0] if size else []
    pos = 0
    with open(path, "rb") as f:
        while pos < size:
            block = f.read(min(1 << 22, size - pos))
            if not block:
                break
            find = block.find
            i = find(b"\n")
            while i >= 0:
                out.append(pos + i + 1)
                i = find(b"\n", i + 1)
            pos += len(block)
    if out and out[-1] == size:
        out.pop()  # the newline of the last line starts nothing
    return out


def _line_from(fd: int, start: int, size: int) -> bytes | None:
    """The line starting at byte `start` (with its newline), or None when none ends before `size`."""
    parts: list[bytes] = []
    pos = start
    while pos < size and pos - start <= MAX_LINE_BYTES:
        block = os.pread(fd, min(4096, size - pos), pos)
        if not block:
            return None
        i = block.find(b"\n")
        if i >= 0:
            parts.append(block[: i + 1])
            return b"".join(parts)
        parts.append(block)
        pos += len(block)
    return None


def _seq_of(raw: bytes) -> int | None:
    try:
        obj: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    seq = obj.get("seq") if type(obj) is dict else None
    return seq if type(seq) is int else None


def find_line(fd: int, seq: int, size: int, last: int, next_seq: int) -> tuple[int, int] | None:
    """(start, end) of the line claiming `seq` in a log of `next_seq` lines whose last starts at `last`.

    Lines are in seq order, so this bisects byte positions: O(log size) lines parsed, no offset
    table. None when the file does not behave like such a log (the caller then scans or walks).
    """
    if not 0 <= seq < next_seq:
        return None
    if seq == next_seq - 1:
        return last, size
    lo, hi = 0, last  # the line's start lies in [lo, hi); lo is always a line's start
    for _ in range(128):
        if hi - lo <= 1 << 14:  # a few dozen lines: read them in order
            pos = lo
            while pos < hi:
                raw = _line_from(fd, pos, size)
                found = None if raw is None else _seq_of(raw)
                if raw is None or found is None or found > seq:
                    return None
                if found == seq:
                    return pos, pos + len(raw)
                pos += len(raw)
            return None
        mid = (lo + hi) // 2
        before = os.pread(fd, 4096, mid - 1)  # most lines are far shorter: one page, then the long read
        i = before.find(b"\n")
        if i < 0:
            before = os.pread(fd, min(MAX_LINE_BYTES, 1 << 16), mid - 1)
            i = before.find(b"\n")
            if i < 0:
                return None
        p = mid + i  # the first line starting at or after mid
        if p >= hi:
            hi = mid
            continue
        raw = _line_from(fd, p, size)
        found = None if raw is None else _seq_of(raw)
        if raw is None or found is None:
            return None
        if found == seq:
            return p, p + len(raw)
        if found < seq:
            lo = p + len(raw)
        else:
            hi = mid
    return None
