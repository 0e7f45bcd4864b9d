"""Erasing one event, and the next ledger verification, beside a raw file copy measured in the same run (issue 10, Speed).

    python bench/erase.py [--sizes 10000,100000,1000000] [--repeat 3] [--cold-repeat 1] [--at 0.5]
                          [--index-max 100000] [--out DIR] [--keep]

Each size is one session of N events written through the ledger's import path
(bench/ledger.py's messages). Then --repeat rounds on that session, each erasing
one more event at seq ≈ N × --at (+ 4 per round):

  raw copy        the session file copied to a temp file in the same folder (shutil.copyfile),
                  fsynced, renamed over an earlier copy of the same size, folder fsynced: what
                  any durable rewrite of the whole file costs at least (timed before the erasure
                  in odd rounds, after it in even ones)
  Ledger.erase    one event, in the Ledger that already has the session open (as the app's):
                  validate, temp file, fsync, rename, folder fsync, erasure record appended
  cached auditor  the next with-ledger verification (receipts/audit.py, its cache warm from before
                  the erasure): every cached chunk re-hashed; the chunk holding the erased line walked
                  again from its start (reported: its first line, and how many lines were walked in all)
  raw sha256      hashlib sha256 of the file in 1 MiB reads: the floor of the auditor's re-hash
  cold auditor    the same check with --full, a walk from genesis        } in the first
  ledger verify   Ledger.verify (`python -m ledger verify`): from genesis,  } --cold-repeat
                  one process per core                                      } rounds only
Then --repeat times control.forget of one more event (erase, index forget + purge, new signed
checkpoint, certificate) with the app's ledger, index and key; the session is indexed only up to
--index-max events (the index's own cost is bench/index_forget.py's). Last, one Ledger.erase from a
fresh Ledger (what a CLI process does: it walks the session first), timed once.

Each figure is the best of its rounds; each ratio is to the best raw copy of the same file in the same run.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

# The script's own folder would shadow the `ledger` package: put the repository root first instead.
sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench._machine import machine_line  # noqa: E402
from bench.ledger import messages  # noqa: E402
from control.forget import forget  # noqa: E402
from ledger.chunks import CHUNK_LINES  # noqa: E402
from storage.common.keyfiles import load_or_create  # noqa: E402
from storage.files.ledger.store import Ledger  # noqa: E402
from storage.files.receipts import files  # noqa: E402
from storage.files.receipts.audit import Auditor  # noqa: E402
from storage.files.retrieval.db import Index  # noqa: E402

SESSION = "bench"
COPY = "bench-copy.jsonl"


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def raw_copy(src: Path) -> float:
    """The raw baseline: copy, fsync, rename over the previous copy, fsync the folder (seconds)."""
    tmp = src.with_name(COPY + ".tmp")
    t0 = time.perf_counter()
    shutil.copyfile(src, tmp)
    fd = os.open(tmp, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    os.replace(tmp, src.with_name(COPY))
    fsync_dir(src.parent)
    return time.perf_counter() - t0


def raw_sha256(path: Path) -> float:
    t0 = time.perf_counter()
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while block := f.read(1 << 20):
            h.update(block)
    return time.perf_counter() - t0


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def audit(data: Path, full: bool) -> dict[str, Any]:
    with Auditor(data, full=full).facts(SESSION) as f:
        assert f.first_break is None, f.first_break
        return {"verified": f.verified, "changed_from_line": f.changed_from_line, "cached_lines": f.cached_lines, "erased": f.erased}


def run_size(root: Path, n: int, repeat: int, cold_repeat: int, at: float, index_max: int) -> dict[str, Any]:
    data = root / f"n{n}"
    shutil.rmtree(data, ignore_errors=True)
    setup: dict[str, float] = {}
    led = Ledger(data)
    setup["import"], _ = timed(lambda: led.import_jsonl(SESSION, messages(n)))
    log = led.log_path(SESSION)
    size_mb = log.stat().st_size / 1e6
    idx = Index(data, led)
    indexed = n <= index_max
    if indexed:
        setup["index"], _ = timed(idx.catch_up)
    key = load_or_create(data)
    setup["merkle"], _ = timed(lambda: files.synced_tree(data, led, SESSION).close())
    setup["first audit"], _ = timed(lambda: audit(data, full=False))  # the cache, warm before the erasures
    shutil.copyfile(log, log.with_name(COPY))  # so that each raw copy replaces a file, as the erasure does

    rows: dict[str, list[float]] = {k: [] for k in ("raw copy", "erase", "cached", "cold", "verify", "sha256", "forget")}
    rewalked: list[tuple[int, int]] = []  # (first line of the first changed chunk, lines walked again)
    base = int(n * at)
    for r in range(repeat):
        seq = base + 4 * r
        if r % 2:  # alternate which of the two goes first: the other helpers' load and the writeback drift
            rows["raw copy"].append(raw_copy(log))
        t, done = timed(partial(led.erase, SESSION, [seq]))
        assert [e.seq for e in done.erased] == [seq]
        rows["erase"].append(t)
        if not r % 2:
            rows["raw copy"].append(raw_copy(log))
        t, facts = timed(lambda: audit(data, full=False))
        changed = facts["changed_from_line"]
        assert seq in facts["erased"] and changed is not None and changed - 1 <= seq < changed - 1 + CHUNK_LINES, facts
        rows["cached"].append(t)
        rewalked.append((changed, facts["verified"] - facts["cached_lines"]))
        rows["sha256"].append(raw_sha256(log))
        if r < cold_repeat:
            t, facts = timed(lambda: audit(data, full=True))
            assert facts["cached_lines"] == 0 and seq in facts["erased"]
            rows["cold"].append(t)
            t, report = timed(lambda: led.verify(SESSION))
            assert report.ok and seq in report.erased, report
            rows["verify"].append(t)
    for r in range(repeat):  # after the erasure rounds: each forget changes the file the cached auditor saw
        seq = base + 4 * r + 1
        t, res = timed(partial(forget, data, SESSION, [seq], ledger=led, index=idx, key=key))
        assert res.erased == (seq,) and res.certificate_path.is_file()
        rows["forget"].append(t)
    fresh = Ledger(data)
    t_fresh, _ = timed(lambda: fresh.erase(SESSION, [base + 4 * repeat]))
    fresh.close()
    idx.close()
    led.close()
    return {
        "n": n,
        "size_mb": size_mb,
        "indexed": indexed,
        "setup": setup,
        "best": {k: min(v) for k, v in rows.items()},
        "all": rows,
        "rewalked": rewalked,
        "fresh_erase": t_fresh,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="10000,100000,1000000")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--cold-repeat", type=int, default=1, help="rounds that also time the walks from genesis (cold auditor, ledger verify)")
    p.add_argument("--at", type=float, default=0.5, help="where the erased events are, as a fraction of the session")
    p.add_argument("--index-max", type=int, default=100_000, help="index sessions up to this size for control.forget")
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out" / "erase")
    p.add_argument("--keep", action="store_true", help="keep the data folders (default: removed after each size)")
    args = p.parse_args(argv)
    args.repeat, args.cold_repeat = max(1, args.repeat), max(1, min(args.cold_repeat, args.repeat))
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ["MRE_CACHE_DIR"] = str(args.out / "audit-cache")  # the auditor's cache, not ~/.cache
    started = time.perf_counter()
    print(machine_line())
    print(f"best of {args.repeat} (walks from genesis: best of {args.cold_repeat}); erased events at seq ≈ N × {args.at}; ratio = time ÷ raw copy of the same file, same run")
    print()
    rows = []
    for s in args.sizes.split(","):
        rows.append(run_size(args.out, int(s), args.repeat, args.cold_repeat, args.at, args.index_max))
        if not args.keep:
            shutil.rmtree(args.out / f"n{int(s)}", ignore_errors=True)
            shutil.rmtree(args.out / f"n{int(s)}.keys", ignore_errors=True)  # the signing key's sibling folder
            shutil.rmtree(args.out / "audit-cache", ignore_errors=True)

    def ms(x: float) -> str:
        return f"{x * 1e3:,.0f}"

    print(
        "| session events | file (MB) | raw copy+fsync (ms) | Ledger.erase (ms) | erase ÷ copy | cached auditor (ms) | ÷ copy |"
        " walked again: from line (lines) | cold auditor (ms) | ÷ copy | ledger verify (ms) | ÷ copy | raw sha256 (ms) | control.forget (ms) | indexed |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        b = r["best"]
        c = b["raw copy"]
        print(
            f"| {r['n']:,} | {r['size_mb']:.0f} | {ms(c)} | {ms(b['erase'])} | {b['erase'] / c:.2f}× | {ms(b['cached'])} | "
            f"{b['cached'] / c:.2f}× | {r['rewalked'][0][0]:,} ({r['rewalked'][0][1]:,} lines) | {ms(b['cold'])} | {b['cold'] / c:.2f}× | {ms(b['verify'])} | "
            f"{b['verify'] / c:.2f}× | {ms(b['sha256'])} | {ms(b['forget'])} | {'yes' if r['indexed'] else 'no'} |"
        )
    print()
    for r in rows:
        a = r["all"]
        each = "; ".join(f"{k} " + " / ".join(ms(x) for x in v) for k, v in a.items())
        print(f"{r['n']:,} — every round (ms): {each}")
        setup = ", ".join(f"{k} {v:.1f} s" for k, v in r["setup"].items())
        print(f"{r['n']:,} — setup: {setup}; Ledger.erase from a fresh Ledger (walks the session first): {ms(r['fresh_erase'])} ms")
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
