"""The auditor's cold walk on both cores: an accelerator, never the judge (I/O).

A walk from genesis (no cache, `--full`, a cache that could not be used) is the
slow path of verifying with the ledger. As in ledger/parallel.py, the file is cut
at line boundaries into one range per core, and each range is walked from the
seq and stored chain hash of the line before it, with the same per-line checks
(ledger.verify: the fast path, else the careful step). Besides verifying, each
range computes what the auditor keeps (receipts/audit.py): the byte offset of
every line, its Merkle leaf and every tree node whose leaves lie inside the
range, the sha256 of each chunk of CHUNK_LINES lines (or of the piece of a chunk
the range holds) with the chain head after it, the erased lines and erasure
record entries it saw, and where a supersession record may be. The parent walks
the first range itself while one child process per other range walks the rest,
then stitches:

- the chain: each range's recomputed head after its last line must be the head
  the next range started from, and its next seq that range's first seq;
- erasure: erased lines and record entries are replayed in seq order through one
  ErasureState, exactly as the serial walk accounts for them;
- the tree: the few nodes that straddle two ranges (at most one per level per
  boundary) are hashed from the level below;
- a chunk that straddles two ranges: its bytes are read again and hashed whole,
  and each range's piece of it hashed on its own must be the hash that range
  computed of the bytes it walked (so the cache never vouches for bytes that were
  not the ones walked, even if the file changed meanwhile).

Anything else — a break in any range, an erased line no record lists, a torn
last line, a child that fails — returns None, and the caller runs the serial
walk, which alone names breaks and keeps a broken ledger's verified prefix.
Children read the auditor's own open descriptor (passed to them, never the path
again), so they walk the very file the auditor opened with O_NOFOLLOW.
"""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
import sys
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Any

import orjson

from ledger import chunks as chunk_rules
from ledger.chunks import READ_SIZE, Chunk
from ledger.erasures import Entry, ErasureState
from ledger.event import GENESIS
from ledger.verify import ChainWalker, _fast_ok
from receipts.merkle import LEAF_PREFIX, NODE_PREFIX, node_hash
from receipts.supersession_walk import RecordScan

# Below this, a child's start-up (interpreter and imports: 0.2-0.6 s of a busy machine) and the stitching cost
# more than half a walk saves: the same bound as ledger/parallel.py. Measured on 2 shared, busy cores (load 4-5),
# alternating runs: 56 MB (100k events) 1.29x the serial walk's time in parallel; 565 MB (1M) 0.80x.
MIN_PARALLEL_BYTES = 64 << 20

Piece = tuple[int, int, int, int, bytes, bytes]  # start, end, first line, lines, sha256 of [start, end), head after it


@dataclass(slots=True)
class RangeWalk:
    """What one range's walk found; every field is of the lines [start, end) of seqs [first_seq, next_seq)."""

    start: int
    end: int
    first_seq: int
    next_seq: int
    head: bytes  # recomputed chain hash after its last line
    starts: array[int]  # byte offset of each line
    levels: list[tuple[int, bytes]]  # per tree level from 0: (index of its first node, the nodes inside the range)
    pieces: list[Piece]
    hits: list[int]  # RecordScan hits: where a supersession record's text may begin
    erased: list[list[Any]] = field(default_factory=list)  # [seq, id, digest, commit, prev]
    entries: list[list[Any]] = field(default_factory=list)  # [record seq, seq, id, digest, commit]


@dataclass(slots=True)
class WholeWalk:
    """A whole ledger walked from genesis in ranges, stitched: what the auditor's state keeps."""

    events: int
    end: int  # byte offset just past the last line
    head: bytes
    starts: array[int]
    levels: list[bytes]  # the complete tree: level L holds nodes 0 .. (events >> L) - 1
    chunks: list[Chunk]
    hits: list[int]
    erasures: ErasureState


def _blocks(fd: int, start: int, end: int) -> Iterator[bytes]:
    pos = start
    while pos < end:
        block = os.pread(fd, min(READ_SIZE, end - pos), pos)
        if not block:
            return
        pos += len(block)
        yield block


def walk_range(
    fd: int, session: str, start: int, end: int, first_seq: int, head: bytes, chunk_lines: int | None = None
) -> RangeWalk | None:
    """Walk the lines in [start, end) of `fd` from (first_seq, head); None at any break or a torn last line.

    Chunks are of `chunk_lines` lines (ledger.chunks.CHUNK_LINES; a child is told the parent's)."""
    per_chunk = chunk_lines or chunk_rules.CHUNK_LINES
    walker = ChainWalker(session, first_seq, head, first_seq, ErasureState(unknown_before=first_seq))
    sha = hashlib.sha256
    leaves: list[bytes] = []
    starts = array("Q")
    pieces: list[Piece] = []
    scan = RecordScan(start)
    pos = start  # where the next line begins
    h = sha()  # the bytes of the open piece, as walked
    piece_start, piece_first = start, first_seq
    rest = b""
    nxt, chain = first_seq, head  # the walker's next seq and head, kept in locals on the fast path
    for block in scan.tee(_blocks(fd, start, end)):
        buf = rest + block if rest else block
        base = pos  # the offset of buf[0]
        parts = buf.split(b"\n")
        rest = parts.pop()
        view = memoryview(buf)
        done = 0
        for raw in parts:
            fast = _fast_ok(raw, session, nxt, chain)
            if fast is not None:
                chain, digest = fast
                nxt += 1
            else:  # an erased line, an erasure record or a break: the careful step decides (its line is the seq)
                walker.next_seq, walker.head, walker.line_no = nxt, chain, nxt
                if walker.careful_step(raw) is not None:
                    return None
                nxt, chain, digest = walker.next_seq, walker.head, walker.last_digest
            leaves.append(sha(LEAF_PREFIX + digest).digest())
            starts.append(pos)
            pos += len(raw) + 1
            if nxt % per_chunk == 0:  # that line closed a chunk
                h.update(view[done : pos - base])
                done = pos - base
                pieces.append((piece_start, pos, piece_first, nxt - piece_first, h.digest(), chain))
                h, piece_start, piece_first = sha(), pos, nxt
        h.update(view[done : pos - base])
        view.release()
    if rest or pos != end:  # a torn last line (or the file shrank): the serial walk decides
        return None
    if pos > piece_start:
        pieces.append((piece_start, pos, piece_first, nxt - piece_first, h.digest(), chain))
    state = walker.erasures
    erased = [list(e) for e in sorted(state.erased.values())]
    lines = state.erased
    entries = [[r, s, lines[s].id, lines[s].digest, lines[s].commit] for s, r in state.recorded.items() if s in lines]
    entries += [[r, *e] for r, e in state.unchecked]
    return RangeWalk(
        start, end, first_seq, nxt, chain, starts, _subtrees(first_seq, leaves), pieces, scan.hits, erased, sorted(entries)
    )


def _subtrees(first: int, leaves: list[bytes]) -> list[tuple[int, bytes]]:
    """Level by level, the tree nodes whose leaves all lie in [first, first + len(leaves))."""
    sha = hashlib.sha256
    out = [(first, b"".join(leaves))]
    prev, prev_first, stop = leaves, first, first + len(leaves)
    level = 1
    while True:
        lo, hi = (first + (1 << level) - 1) >> level, stop >> level
        if hi <= lo:
            return out
        at = 2 * lo - prev_first
        cur = [sha(NODE_PREFIX + prev[i] + prev[i + 1]).digest() for i in range(at, at + 2 * (hi - lo), 2)]
        out.append((lo, b"".join(cur)))
        prev, prev_first = cur, lo
        level += 1


# -- a child's result on a pipe: a length-prefixed JSON header, then the raw arrays ----------------
def encode(r: RangeWalk) -> bytes:
    header = {
        "range": [r.start, r.end, r.first_seq, r.next_seq, r.head.hex()],
        "levels": [[lo, len(nodes)] for lo, nodes in r.levels],
        "starts": len(r.starts),
        "pieces": [[a, b, f, n, s.hex(), hd.hex()] for a, b, f, n, s, hd in r.pieces],
        "hits": r.hits,
        "erased": r.erased,
        "entries": r.entries,
    }
    head = orjson.dumps(header)
    return b"".join([struct.pack("<Q", len(head)), head, r.starts.tobytes(), *(nodes for _, nodes in r.levels)])


def decode(data: bytes) -> RangeWalk:
    """The inverse of `encode` (ValueError, KeyError or TypeError for anything else)."""
    (n,) = struct.unpack_from("<Q", data)
    header = orjson.loads(data[8 : 8 + n])
    at = 8 + n
    starts = array("Q")
    starts.frombytes(data[at : at + 8 * int(header["starts"])])
    at += 8 * len(starts)
    levels = []
    for lo, size in header["levels"]:
        levels.append((int(lo), data[at : at + int(size)]))
        at += int(size)
    if at != len(data) or len(starts) != int(header["starts"]):
        raise ValueError("audit range: the result's length does not match its header")
    start, end, first, nxt, head = header["range"]
    pieces: list[Piece] = [(int(a), int(b), int(f), int(k), bytes.fromhex(s), bytes.fromhex(hd)) for a, b, f, k, s, hd in header["pieces"]]
    return RangeWalk(int(start), int(end), int(first), int(nxt), bytes.fromhex(head), starts, levels, pieces, list(header["hits"]), header["erased"], header["entries"])


# -- the parent ----------------------------------------------------------------------------------
def _boundaries(fd: int, size: int, parts: int) -> list[tuple[int, int, bytes]] | None:
    """(start offset, next seq, stored chain of the line before) for each range after the first."""
    out = []
    for k in range(1, parts):
        guess = max(0, size * k // parts - 1)
        window = os.pread(fd, 64 << 10, guess)
        nl = window.find(b"\n")
        if nl < 0:
            return None
        start = guess + nl + 1
        back = min(start - 1, 256 << 10)
        before = os.pread(fd, back, start - 1 - back)
        try:
            prev = orjson.loads(before[before.rfind(b"\n") + 1 :])
            out.append((start, int(prev["seq"]) + 1, bytes.fromhex(prev["chain"])))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None
    return out


def _replay(erased: list[list[Any]], entries: list[list[Any]]) -> ErasureState | None:
    """The erasure state of the whole walk, replayed in seq order as the serial walk meets lines and records;
    None when a record does not fit or an erased line is listed by no later record."""
    state = ErasureState()
    records: dict[int, list[Entry]] = {}
    for r, *e in entries:
        records.setdefault(int(r), []).append(Entry(int(e[0]), str(e[1]), str(e[2]), str(e[3])))
    items = sorted([(int(e[0]), 0, e) for e in erased] + [(r, 1, es) for r, es in records.items()], key=lambda t: t[:2])
    for seq, kind, item in items:
        if kind == 0:
            state.saw_erased(seq, {"id": item[1], "digest": item[2], "commit": item[3], "prev": item[4]})
        elif state.saw_record(seq, item) is not None:
            return None
    if state.first_unrecorded() is not None:
        return None
    return state


def _levels(ranges: Sequence[RangeWalk], n: int) -> list[bytes]:
    """The whole tree of `n` leaves from the ranges' inside nodes, hashing the ones that straddle two ranges."""
    out: list[bytes] = []
    for level in range(n.bit_length()):
        parts: list[bytes] = []
        have = 0
        for r in ranges:
            if level >= len(r.levels):
                continue  # no node of this level lies wholly inside that range
            lo, nodes = r.levels[level]
            if lo < have or (level == 0 and lo != have):
                raise ValueError("audit range: tree nodes overlap or leaves are missing")
            parts.append(_across(out, level, have, lo))
            parts.append(nodes)
            have = lo + len(nodes) // 32
        parts.append(_across(out, level, have, n >> level))
        joined = b"".join(parts)
        if len(joined) != 32 * (n >> level):
            raise ValueError("audit range: tree level of the wrong size")
        out.append(joined)
    return out


def _across(done: list[bytes], level: int, lo: int, hi: int) -> bytes:
    """Nodes [lo, hi) of `level` (those across a boundary), each from its two children one level down."""
    below = done[level - 1] if level else b""
    return b"".join(node_hash(below[64 * i : 64 * i + 32], below[64 * i + 32 : 64 * i + 64]) for i in range(lo, hi))


def _chunks(fd: int, pieces: list[Piece]) -> list[Chunk] | None:
    """Chunks from the ranges' pieces; a chunk in several pieces is hashed again whole from `fd`, and each
    piece's bytes must hash to what its range computed while walking them (else None: the file changed)."""
    per_chunk = chunk_rules.CHUNK_LINES
    out = []
    for _, group in groupby(pieces, key=lambda p: p[2] // per_chunk):
        ps = list(group)
        for left, right in zip(ps, ps[1:], strict=False):
            if left[1] != right[0] or left[2] + left[3] != right[2]:
                return None
        start, first, lines, head = ps[0][0], ps[0][2], sum(p[3] for p in ps), ps[-1][5]
        if first % per_chunk:
            return None
        if len(ps) == 1:
            digest = ps[0][4]
        else:
            whole = hashlib.sha256()
            for a, b, _f, _n, sha, _h in ps:
                part = hashlib.sha256()
                for block in _blocks(fd, a, b):
                    part.update(block)
                    whole.update(block)
                if part.digest() != sha:
                    return None
            digest = whole.digest()
        out.append(Chunk(start, ps[-1][1], first, lines, digest, head))
    if any(c.lines != per_chunk for c in out[:-1]):
        return None
    return out


def _spawn(fd: int, session: str, start: int, end: int, seq: int, head: bytes) -> subprocess.Popen[bytes]:
    # A plain child process (not multiprocessing): safe from a threaded server, independent of the caller's __main__.
    root = str(Path(__file__).resolve().parents[3])  # the checkout: storage/files/receipts/ is three floors down
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen(
        [sys.executable, "-m", "storage.files.receipts.audit_parallel", str(fd), session, str(start), str(end), str(seq), head.hex(), str(chunk_rules.CHUNK_LINES)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        pass_fds=(fd,),
        env=env,
    )


def walk(fd: int, session: str, size: int, *, workers: int | None = None, min_bytes: int | None = None) -> WholeWalk | None:
    """The ledger open at `fd` (its first `size` bytes) walked from genesis in parallel; None: walk it serially."""
    workers = workers or os.cpu_count() or 1
    if workers < 2 or size < max(MIN_PARALLEL_BYTES if min_bytes is None else min_bytes, 1):
        return None
    bounds = _boundaries(fd, size, workers)
    if bounds is None:
        return None
    starts = [(0, 0, GENESIS), *bounds]
    spans = [(a, starts[i + 1][0] if i + 1 < len(starts) else size, seq, head) for i, (a, seq, head) in enumerate(starts)]
    if any(a >= b for a, b, _, _ in spans):
        return None
    procs: list[subprocess.Popen[bytes]] = []
    try:
        try:
            for span in spans[1:]:
                procs.append(_spawn(fd, session, *span))
        except OSError:  # no interpreter to start (or no process left): the serial walk needs none
            return None
        first = walk_range(fd, session, *spans[0])
        if first is None:
            return None  # a break in the first range: the serial walk names it; the children are stopped below
        ranges: list[RangeWalk | None] = [first]
        for proc in procs:
            out, _ = proc.communicate()
            try:
                ranges.append(decode(out) if proc.returncode == 0 and out else None)
            except (ValueError, KeyError, TypeError, struct.error, orjson.JSONDecodeError):
                ranges.append(None)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
    return _stitch(fd, spans, ranges)


def _stitch(fd: int, spans: list[tuple[int, int, int, bytes]], ranges: list[RangeWalk | None]) -> WholeWalk | None:
    got: list[RangeWalk] = []
    for (a, b, seq, head), r in zip(spans, ranges, strict=True):
        if r is None or (r.start, r.end, r.first_seq) != (a, b, seq) or len(r.starts) != r.next_seq - seq:
            return None
        if got and (got[-1].next_seq != seq or got[-1].head != head):
            return None  # the range before did not end on the seq and chain hash this one started from
        got.append(r)
    erasures = _replay([e for r in got for e in r.erased], [e for r in got for e in r.entries])
    if erasures is None:
        return None
    n = got[-1].next_seq
    try:
        levels = _levels(got, n)
    except ValueError:
        return None
    chunks = _chunks(fd, [p for r in got for p in r.pieces])
    if chunks is None:
        return None
    offsets = array("Q")
    for r in got:
        offsets.extend(r.starts)
    return WholeWalk(n, got[-1].end, got[-1].head, offsets, levels, chunks, [h for r in got for h in r.hits], erasures)


__all__ = ["MIN_PARALLEL_BYTES", "RangeWalk", "WholeWalk", "decode", "encode", "walk", "walk_range"]

if __name__ == "__main__":  # a child: python -m storage.files.receipts.audit_parallel FD SESSION START END FIRST_SEQ HEAD CHUNK_LINES
    _fd, _session, _start, _end, _seq, _head, _per_chunk = sys.argv[1:8]
    _r = walk_range(int(_fd), _session, int(_start), int(_end), int(_seq), bytes.fromhex(_head), int(_per_chunk))
    if _r is None:
        sys.exit(1)
    sys.stdout.buffer.write(encode(_r))
