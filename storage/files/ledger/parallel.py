"""Parallel verification of large ledgers: an accelerator, never the judge.

Verification is local except for two values carried from line to line, the seq
and the chain hash, and both are written in every line. So the file is cut at
line boundaries into one range per core; each range is verified by a worker
starting from the seq and stored chain hash of the line just before it. The
worker checks everything the serial walk checks, including that its first line
links to that stored chain hash; the range before it checks that the stored
chain hash is the recomputed one. When every range verifies, the file verifies.

Erasure is the one check that is not local: an erased line is legitimate only
when a later erasure record lists it, possibly in a later range. Each worker
returns the erased lines and record entries it saw; the parent replays them in
seq order through one ErasureState, exactly as the serial walk would.

When any range reports a problem (or a boundary line cannot be read), the
caller runs the serial walk, which alone produces the report naming the break.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from ledger.erasures import Entry, ErasureState
from ledger.verify import ChainWalker, read_chunks, verify_stream

MIN_PARALLEL_BYTES = 64 << 20  # below this, process start-up costs more than it saves


def verify_range(
    path: str, session: str, start: int, end: int, next_seq: int, head_hex: str, progress: Callable[[int], None] | None = None
) -> tuple[bool, int, int, list[list[Any]], list[list[Any]]]:
    """Verify the lines in [start, end); return (ok, events verified, last seq + 1, erased lines, record entries).

    Erased lines are [seq, id, digest, commit, prev]; record entries [record seq, seq, id, digest, commit],
    every entry of every erasure record in the range (whether or not it names a seq in this range).
    `progress(n)` is told the bytes of each block read.
    """
    walker = ChainWalker(session, next_seq, bytes.fromhex(head_hex), next_seq, ErasureState(unknown_before=next_seq))
    with open(path, "rb") as f:
        f.seek(start)
        report = verify_stream(session, counted(read_chunks(f, end - start), progress), walker=walker, final=False)
    state = walker.erasures
    erased = [list(e) for e in sorted(state.erased.values())]
    lines = {s: e for s, e in state.erased.items()}
    entries = [[r, s, lines[s].id, lines[s].digest, lines[s].commit] for s, r in state.recorded.items() if s in lines]
    entries += [[r, *e] for r, e in state.unchecked]
    return report.brk is None, report.events - next_seq, walker.next_seq, erased, sorted(entries)


def counted(blocks: Iterable[bytes], progress: Callable[[int], None] | None) -> Iterator[bytes]:
    """The blocks, each reported to `progress` (its length in bytes) before it is handed on."""
    for block in blocks:
        if progress is not None:
            progress(len(block))
        yield block


def _collect(procs: list[subprocess.Popen[bytes]], progress: Callable[[int], None]) -> list[bytes]:
    """Every worker's stdout, while its stderr (one line per block: its bytes) moves `progress` on."""
    outs = {id(p): bytearray() for p in procs}
    sel = selectors.DefaultSelector()
    for p in procs:
        for stream, kind in ((p.stdout, "out"), (p.stderr, "err")):
            if stream is not None:
                sel.register(stream, selectors.EVENT_READ, (p, kind))
    carry: dict[int, bytes] = {}
    while sel.get_map():
        for key, _ in sel.select():
            p, kind = key.data
            chunk = os.read(key.fd, 1 << 16)
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            if kind == "out":
                outs[id(p)] += chunk
                continue
            *done, carry[id(p)] = (carry.get(id(p), b"") + chunk).split(b"\n")
            for n in done:
                if n.isdigit():
                    progress(int(n))
    sel.close()
    for p in procs:
        p.wait()
    return [bytes(outs[id(p)]) for p in procs]


def _replay(erased: list[list[Any]], entries: list[list[Any]]) -> tuple[int, ...] | None:
    """Erased seqs when every erased line is listed by a later record that matches it; None otherwise."""
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
    return state.seqs()


def _boundaries(path: Path, size: int, parts: int) -> list[tuple[int, int, str]] | None:
    """(start offset, next seq, stored chain of the previous line) for each range after the first."""
    out = []
    with open(path, "rb") as f:
        for k in range(1, parts):
            guess = size * k // parts
            f.seek(max(0, guess - 1))
            window = f.read(64 << 10)
            nl = window.find(b"\n")
            if nl < 0:
                return None
            start = max(0, guess - 1) + nl + 1
            # the line before `start` ends at start-1: find its beginning
            back = min(start - 1, 256 << 10)
            f.seek(start - 1 - back)
            before = f.read(back)
            line_start = before.rfind(b"\n") + 1
            try:
                prev = orjson.loads(before[line_start:])
                out.append((start, int(prev["seq"]) + 1, str(prev["chain"])))
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                return None
    return out


def verify_file_parallel(
    path: Path, session: str, workers: int | None = None, min_bytes: int = MIN_PARALLEL_BYTES
) -> tuple[int, str] | None:
    """(events, head) when every range verifies; None when the serial walk must decide."""
    out = verify_file_parallel_erased(path, session, workers, min_bytes)
    return None if out is None else (out[0], out[1])


def verify_file_parallel_erased(
    path: Path, session: str, workers: int | None = None, min_bytes: int = MIN_PARALLEL_BYTES,
    progress: Callable[[int], None] | None = None,
) -> tuple[int, str, tuple[int, ...]] | None:
    """(events, head, erased seqs) when every range verifies; None when the serial walk must decide.

    `progress(n)` is told the bytes each worker has read, as it reads them.
    """
    size = path.stat().st_size
    workers = workers or os.cpu_count() or 1
    if workers < 2 or size < max(min_bytes, 1):
        return None
    bounds = _boundaries(path, size, workers)
    if bounds is None:
        return None
    starts = [(0, 0, "00" * 32), *bounds]
    ranges = [(s, starts[i + 1][0] if i + 1 < len(starts) else size, seq, head) for i, (s, seq, head) in enumerate(starts)]
    if any(a >= b for a, b, _, _ in ranges):
        return None
    # Plain child processes (not multiprocessing): safe from a threaded server,
    # and independent of how the caller's __main__ is written.
    root = str(Path(__file__).resolve().parents[3])  # the checkout: storage/files/ledger/ is three floors down
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "storage.files.ledger.parallel", str(path), session, str(a), str(b), str(seq), head]
            + (["--progress"] if progress is not None else []),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL if progress is None else subprocess.PIPE,
            env=env,
        )
        for a, b, seq, head in ranges
    ]
    outs = [proc.communicate()[0] for proc in procs] if progress is None else _collect(procs, progress)
    results = []
    erased: list[list[Any]] = []
    entries: list[list[Any]] = []
    for proc, out in zip(procs, outs, strict=True):
        if proc.returncode != 0:
            return None
        try:
            ok, n, after, some_erased, some_entries = orjson.loads(out)
            erased.extend(some_erased)
            entries.extend(some_entries)
        except (orjson.JSONDecodeError, ValueError, TypeError):
            return None
        results.append((bool(ok), int(n), int(after)))
    expected_next = [seq for _, _, seq, _ in ranges[1:]] + [None]
    total = 0
    for (ok, n, after), nxt in zip(results, expected_next, strict=True):
        if not ok or (nxt is not None and after != nxt):
            return None
        total += n
    try:
        erased_seqs = _replay(erased, entries)
    except (ValueError, TypeError, IndexError, KeyError):
        return None
    if erased_seqs is None:
        return None
    # the head is the stored chain of the last line, which the last range verified
    with open(path, "rb") as f:
        f.seek(max(0, size - (256 << 10)))
        tail = f.read()
    last = tail.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    return total, str(orjson.loads(last)["chain"]), erased_seqs


__all__ = ["verify_file_parallel", "verify_file_parallel_erased", "verify_range"]

def _report_bytes(n: int) -> None:
    sys.stderr.write(f"{n}\n")
    sys.stderr.flush()


if __name__ == "__main__":  # worker: python -m storage.files.ledger.parallel PATH SESSION START END NEXT_SEQ HEAD [--progress]
    _path, _session, _start, _end, _seq, _head = sys.argv[1:7]
    _progress = _report_bytes if sys.argv[7:8] == ["--progress"] else None
    sys.stdout.write(orjson.dumps(verify_range(_path, _session, int(_start), int(_end), int(_seq), _head, _progress)).decode())
