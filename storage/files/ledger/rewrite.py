"""One durable rewrite of a session's log: the file I/O of an erasure (Ledger.erase holds the lock).

The whole new file — the old lines with some replaced, then the lines appended
— is written to a temp file in the same folder, fsynced, and renamed over
events.jsonl; then the folder is fsynced. One rename is one transaction: a
crash at any step leaves either the old file or the new one (a leftover temp
file is removed by the next rewrite and ignored by everything else). Unchanged
bytes are copied by the kernel (copy_file_range); only the chunks holding a
replaced line are hashed again (ledger/chunks.py), the others keep their sha256
at their new offsets.
"""

from __future__ import annotations

import errno
import os
from array import array
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ledger.chunks import Chunk, ChunkLog, hash_range
from storage.common.fsmode import open_private
from storage.common.fsmode import write_all as _write_all

TEMP_SUFFIX = ".erasing"
# Crash tests set this to a function that is called at each named step of a rewrite
# ("written", "synced", "renamed", "dir_synced") and may kill the process there.
step_hook: Callable[[str], None] | None = None


def _step(name: str) -> None:
    if step_hook is not None:
        step_hook(name)


class Rewritten(NamedTuple):
    offsets: array[int]  # byte offset of every line of the new file
    size: int
    chunks: ChunkLog
    stat: os.stat_result


def temp_path(path: Path) -> Path:
    return path.with_name(path.name + TEMP_SUFFIX)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)



def _copy(src: int, dst: int, start: int, end: int) -> None:
    """Bytes [start, end) of `src` to the current position of `dst`."""
    pos = start
    try:
        while pos < end:
            n = os.copy_file_range(src, dst, end - pos, pos)
            if n <= 0:
                raise OSError(errno.EIO, f"the ledger ends before byte {end}")
            pos += n
        return
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM):
            raise
    while pos < end:  # a filesystem without copy_file_range
        block = os.pread(src, min(1 << 20, end - pos), pos)
        if not block:
            raise OSError(errno.EIO, f"the ledger ends before byte {end}")
        _write_all(dst, block)
        pos += len(block)


def _shifted(offsets: array[int], size: int, lengths: Mapping[int, int], replace: Mapping[int, bytes]) -> tuple[array[int], int]:
    """New offsets once each line `seq` in `replace` changes from lengths[seq] bytes to len(replace[seq])."""
    n = len(offsets)
    new = array("Q", offsets)
    shift = 0
    ordered = sorted(replace)
    for k, seq in enumerate(ordered):
        shift += len(replace[seq]) - lengths[seq]
        stop = ordered[k + 1] + 1 if k + 1 < len(ordered) else n
        if seq + 1 < stop:
            new[seq + 1 : stop] = array("Q", (o + shift for o in offsets[seq + 1 : stop]))
    return new, size + shift


def rewrite(
    path: Path,
    size: int,
    offsets: array[int],
    chunks: Sequence[Chunk],
    replace: Mapping[int, bytes],
    append: Sequence[tuple[bytes, bytes]],
    open_hash: Any = None,
) -> Rewritten:
    """Replace lines (by seq) of the verified log [0, size) and append (line, chain head after it) pairs, durably.

    `open_hash`: the sha256 state of the last chunk's bytes when it is not full (ChunkLog.open_hash);
    unchanged bytes have the same state, so that chunk is hashed again only if a line in it is replaced.
    """
    n = len(offsets)
    ends = {seq: offsets[seq + 1] if seq + 1 < n else size for seq in replace}
    lengths = {seq: ends[seq] - offsets[seq] for seq in replace}
    tmp = temp_path(path)
    try:
        os.unlink(tmp)  # a leftover of a rewrite that crashed before its rename
    except FileNotFoundError:
        pass
    src = os.open(path, os.O_RDONLY)
    try:
        dst = open_private(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL)
        try:
            pos = 0
            for seq in sorted(replace):
                _copy(src, dst, pos, offsets[seq])
                _write_all(dst, replace[seq])
                pos = ends[seq]
            _copy(src, dst, pos, size)
            _write_all(dst, b"".join(line for line, _ in append))
            _step("written")
            os.fsync(dst)
            _step("synced")
            new_offsets, new_size = _shifted(offsets, size, lengths, replace)
            log = _rehashed(dst, chunks, new_offsets, new_size, replace, open_hash)
            at = new_size
            for line, _head in append:
                new_offsets.append(at)
                at += len(line)
            log.append_lines([line for line, _ in append], [head for _, head in append])
            if os.fstat(dst).st_size != at:
                raise OSError(errno.EIO, f"{tmp}: holds {os.fstat(dst).st_size} bytes, expected {at}")
        except BaseException:
            os.close(dst)
            tmp.unlink(missing_ok=True)
            raise
        os.close(dst)
    finally:
        os.close(src)
    os.replace(tmp, path)
    _step("renamed")
    _fsync_dir(path.parent)
    _step("dir_synced")
    return Rewritten(new_offsets, at, log, os.stat(path))


def _rehashed(
    fd: int, chunks: Sequence[Chunk], offsets: array[int], size: int, replace: Mapping[int, bytes], open_hash: Any
) -> ChunkLog:
    """The chunk log of the rewritten prefix: same lines per chunk, new offsets; changed chunks hashed again."""
    n = len(offsets)
    out: list[Chunk] = []
    last_hash: Any = None
    for i, c in enumerate(chunks):
        stop = c.first_line + c.lines
        start, end = offsets[c.first_line], offsets[stop] if stop < n else size
        changed = any(c.first_line <= seq < stop for seq in replace)
        if i == len(chunks) - 1 and not changed and open_hash is not None and open_hash.digest() == c.sha256:
            out.append(Chunk(start, end, c.first_line, c.lines, c.sha256, c.head))
            last_hash = open_hash
        elif changed or i == len(chunks) - 1:
            h = hash_range(fd, start, end)
            out.append(Chunk(start, end, c.first_line, c.lines, h.digest(), c.head))
            last_hash = h
        else:
            out.append(Chunk(start, end, c.first_line, c.lines, c.sha256, c.head))
    return ChunkLog.resume(out, last_hash)


__all__ = ["TEMP_SUFFIX", "Rewritten", "rewrite", "step_hook", "temp_path"]
