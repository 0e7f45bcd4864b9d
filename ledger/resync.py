"""After an erasure, walk only the chunks that changed; take the others from what was walked before (I/O).

An erasure rewrites lines in place (docs/FORMAT.md §4.4): they get shorter, so
every later chunk moves, but its bytes, digests and chain heads are unchanged.
A walk that vouched for a prefix (the writer's tail in ledger/recovery.py, the
auditor's cache in receipts/audit.py) starts again at the first chunk whose
bytes changed; this module lets it stop walking once it is back in step: a
later chunk whose bytes re-hash equal at their new offset, right after a walk
that ended on the chain head recorded before that chunk, holds the same lines —
its digests, erased lines and erasure records are the ones known, only its
offsets move. Every line walked must be `same` as before (the same chain hash
or digest); on any other difference (a rewritten line, a break, a file that
ends early) it returns None and the caller decides (the writer refuses, the
auditor walks on to the end).
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ledger.chunks import Chunk, ChunkLog, hash_range
from ledger.erasures import ErasureState
from ledger.event import GENESIS
from ledger.verify import ChainWalker, read_chunks, split_lines


@dataclass(frozen=True, slots=True)
class Resynced:
    log: ChunkLog  # the chunks of the whole cached extent, at their new offsets
    erasures: ErasureState  # of the whole cached extent
    offsets_from: int  # first line whose offset is in `offsets`
    offsets: array[int]  # new offsets of the lines from `offsets_from` to the cached end
    walked: list[tuple[int, int]]  # (first line, last line), 1-based, of each chunk walked again
    skipped_lines: int  # lines taken from the cache after the first changed chunk
    hashed_bytes: int  # bytes re-hashed to find them


def resync(
    fd: int,
    size: int,
    session: str,
    chunks: Sequence[Chunk],
    first_changed: int,
    cached: ErasureState,
    same: Callable[[int, bytes, bytes], bool],
    cached_offsets: Callable[[int, int], array[int]],
) -> Resynced | None:
    """Walk from chunk `first_changed` on, taking unchanged chunks as known; None when a line is not `same`.

    `same(seq, recomputed digest, chain hash after it)` says whether a walked line is the one known;
    `cached_offsets(first line, lines)` gives the known offsets of a chunk's lines.
    """
    start = chunks[first_changed]
    done: list[Chunk] = list(chunks[:first_changed])
    erasures = cached.cut(start.first_line)
    offsets = array("Q")
    walked: list[tuple[int, int]] = []
    skipped = hashed = 0
    pos = done[-1].end if done else 0
    head = done[-1].head if done else GENESIS
    log: ChunkLog | None = None
    for j in range(first_changed, len(chunks)):
        c = chunks[j]
        last = j == len(chunks) - 1
        if j > first_changed and pos + (c.end - c.start) <= size:
            try:
                h = hash_range(fd, pos, pos + (c.end - c.start))
            except OSError:
                return None
            hashed += c.end - c.start
            if h.digest() == c.sha256 and head == chunks[j - 1].head and _carry(cached, erasures, c):
                shift = pos - c.start
                offsets.extend(o + shift for o in cached_offsets(c.first_line, c.lines))
                moved = Chunk(pos, pos + (c.end - c.start), c.first_line, c.lines, c.sha256, c.head)
                done.append(moved)
                pos, head = moved.end, c.head
                skipped += c.lines
                if last:
                    log = ChunkLog.resume(done, h)
                continue
        walk = _walk_chunk(fd, session, ChunkLog(done), c, pos, head, erasures, same, offsets)
        if walk is None:
            return None
        walked.append((c.first_line + 1, c.first_line + c.lines))
        log = walk
        pos, head = walk.end, walk.head
        done = walk.chunks() if not last else done
    if log is None:
        log = ChunkLog(done)
    return Resynced(log, erasures, start.first_line, offsets, walked, skipped, hashed)


def _carry(cached: ErasureState, now: ErasureState, c: Chunk) -> bool:
    """Take chunk `c`'s erased lines and erasure records from the cache; False (nothing taken) if one no longer matches."""
    stop = c.first_line + c.lines
    lines = {s: line for s, line in cached.erased.items() if c.first_line <= s < stop}
    records = {s: r for s, r in cached.recorded.items() if c.first_line <= r < stop}
    for s in records:
        if (lines.get(s) or now.erased.get(s)) != cached.erased.get(s) or s in now.recorded:
            return False  # a line it lists changed (e.g. restored): the full walk names it
    now.erased.update(lines)
    now.recorded.update(records)
    return True


def _walk_chunk(
    fd: int,
    session: str,
    log: ChunkLog,
    c: Chunk,
    pos: int,
    head: bytes,
    erasures: ErasureState,
    same: Callable[[int, bytes, bytes], bool],
    offsets: array[int],
) -> ChunkLog | None:
    """Walk the c.lines lines of chunk `c` from byte `pos`; None unless each verifies and is `same` as before."""
    walker = ChainWalker(session, c.first_line, head, c.first_line, erasures)
    n = 0
    at = pos
    with os.fdopen(os.dup(fd), "rb") as f:
        f.seek(pos)
        for raw, torn in split_lines(log.tee(read_chunks(f))):
            seq = walker.next_seq
            if torn or walker.step(raw) is not None or not same(seq, walker.last_digest, walker.head):
                return None
            offsets.append(at)
            at += len(raw) + 1
            log.line(len(raw) + 1, walker.head)
            n += 1
            if n == c.lines:
                break
    log.finish()
    if n != c.lines or walker.head != c.head:
        return None
    return log


__all__ = ["Resynced", "resync"]
