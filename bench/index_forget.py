"""Forgetting one event in the index, beside raw baselines measured in the same run (issue 10 §4).

    python bench/index_forget.py [--sizes 10000,100000] [--forgets 5] [--out DIR]

Each size is one session of N events (LoCoMo sentences recombined, as bench/search.py
does), written through the ledger and indexed with the default IndexConfig (2 + 2
turns of context). Then --forgets times: one event, at a seeded random seq, is erased
in the ledger (Ledger.erase, not timed here) and Index.forget_events removes it
(timed): delete the row, rebuild the 4 neighbours' context, re-judge novelty, FTS5
'optimize' of the session's table, wal_checkpoint(TRUNCATE).

Raw baselines, on the same index file in the same run:
  copy+fsync     copy index.sqlite to a new file and fsync it (what rewriting the file costs at least)
  delete+vacuum  on a copy: delete one row (FTS 'delete' + DELETE) and VACUUM (SQLite rewriting the file)
  plain delete   on a copy: the same delete and a checkpoint only (what a naive forget costs)
  optimize only  on a copy: FTS5 'optimize' of the session's table after that delete
Every case also reports whether the marker's bytes are left in index.sqlite / -wal / -shm.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._machine import machine_line  # noqa: E402
from bench.common import LOCOMO, load  # noqa: E402
from bench.search import Recombiner  # noqa: E402
from ledger.messages import Message  # noqa: E402
from retrieval import sql as rsql  # noqa: E402
from storage.files.ledger.store import Ledger
from storage.files.retrieval.db import Index  # noqa: E402

MARKER = "Zorblaxian"
PARTS = (b"blax", b"zorb")
SESSION = "bench"
BATCH = 50_000


def marker_left(data_dir: Path, name: str = "index.sqlite") -> bool:
    for suffix in ("", "-wal", "-shm"):
        p = data_dir / (name + suffix)
        if p.exists() and any(part in p.read_bytes().lower() for part in PARTS):
            return True
    return False


def timed_copy(src: Path, dst: Path) -> float:
    t0 = time.perf_counter()
    shutil.copyfile(src, dst)
    fd = os.open(dst, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    return time.perf_counter() - t0


def naive_delete(conn: sqlite3.Connection, num: int, seq: int) -> None:
    rid = rsql.row_id(num, seq)
    text, context = conn.execute("SELECT text, context FROM events WHERE id = ?", (rid,)).fetchone()
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(rsql.delete_fts_one(num), (rid, text, context))
    conn.execute("DELETE FROM events WHERE id = ?", (rid,))
    conn.execute("COMMIT")


def baselines(data: Path, num: int, seq: int) -> dict[str, tuple[float, bool]]:
    """Each raw baseline on a fresh copy of the index (the marker still in it); (seconds, marker left)."""
    out: dict[str, tuple[float, bool]] = {}
    src = data / "index.sqlite"
    work = data / "copy"
    work.mkdir(exist_ok=True)
    copy = work / "index.sqlite"
    out["copy+fsync"] = (timed_copy(src, copy), True)
    for case in ("delete+vacuum", "plain delete", "optimize only"):
        for suffix in ("", "-wal", "-shm"):
            Path(str(copy) + suffix).unlink(missing_ok=True)
        shutil.copyfile(src, copy)
        conn = sqlite3.connect(copy, isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        if case == "optimize only":
            naive_delete(conn, num, seq)
            t0 = time.perf_counter()
            t = rsql.fts_table(num)
            conn.execute(f"INSERT INTO {t} ({t}) VALUES ('optimize')")
        else:
            t0 = time.perf_counter()
            naive_delete(conn, num, seq)
            if case == "delete+vacuum":
                conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        took = time.perf_counter() - t0
        conn.close()
        out[case] = (took, marker_left(work))
    shutil.rmtree(work)
    return out


def run_size(root: Path, n: int, forgets: int, rng: random.Random) -> dict[str, object]:
    t0 = time.perf_counter()
    data = root / f"n{n}"
    shutil.rmtree(data, ignore_errors=True)
    led = Ledger(data)
    gen = Recombiner(load(LOCOMO), seed=n)
    targets = sorted(rng.sample(range(n // 10, n - 10), forgets))
    written = 0
    while written < n:
        msgs = gen.messages(min(BATCH, n - written))
        for i, m in enumerate(msgs):  # the events to forget carry the marker, in several forms
            if written + i in targets:
                msgs[i] = Message(m.role, f"{m.text} {MARKER} ZORBLAXIANS zorblaxian's", {})
        led.append_many(SESSION, msgs)
        written += len(msgs)
    index = Index(data, led)
    index.catch_up()
    index._w().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    build_s = time.perf_counter() - t0
    num = int(index._w().execute("SELECT num FROM watermarks WHERE session = ?", (SESSION,)).fetchone()[0])
    size_mb = (data / "index.sqlite").stat().st_size / 1e6
    base = baselines(data, num, targets[0])
    times, changed = [], []
    for seq in targets:
        led.erase(SESSION, [seq])
        t1 = time.perf_counter()
        done = index.forget_events(SESSION, [seq])
        times.append(time.perf_counter() - t1)
        changed.append(len(done.recontexted) + len(done.rescored))
    left = marker_left(data)
    found = index.search(SESSION, "zorblaxian zorblaxians").results
    index.close()
    led.close()
    return {
        "n": n,
        "size_mb": size_mb,
        "build_s": build_s,
        "forget_p50": statistics.median(times),
        "forget_max": max(times),
        "changed": statistics.median(changed),
        "left": left or bool(found),
        "base": base,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="10000,100000")
    p.add_argument("--forgets", type=int, default=5)
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out" / "index_forget")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(10)
    print(machine_line())
    print()
    rows = [run_size(args.out, int(s), args.forgets, rng) for s in args.sizes.split(",")]
    print(
        "| session events | index.sqlite (MB) | forget_events p50 / max (ms) | copy+fsync (ms) | forget ÷ copy |"
        " delete+vacuum (ms) | plain delete (ms) | optimize only (ms) | marker left: forget / vacuum / plain / optimize |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        base = r["base"]
        assert isinstance(base, dict)
        copy_s = base["copy+fsync"][0]
        fp50 = float(r["forget_p50"])  # type: ignore[arg-type]
        fmax = float(r["forget_max"])  # type: ignore[arg-type]

        def yn(v: bool) -> str:
            return "yes" if v else "no"

        print(
            f"| {r['n']:,} | {r['size_mb']:.1f} | {fp50 * 1e3:.0f} / {fmax * 1e3:.0f} | {copy_s * 1e3:.0f} | "
            f"{fp50 / copy_s:.2f}× | {base['delete+vacuum'][0] * 1e3:.0f} | {base['plain delete'][0] * 1e3:.0f} | "
            f"{base['optimize only'][0] * 1e3:.0f} | {yn(bool(r['left']))} / {yn(base['delete+vacuum'][1])} / "
            f"{yn(base['plain delete'][1])} / {yn(base['optimize only'][1])} |"
        )
    print()
    print("build (import + index) s: " + ", ".join(f"{r['n']:,}: {r['build_s']:.1f}" for r in rows))
    print(
        "rows rewritten per forget (context + novelty), median: "
        + ", ".join(f"{r['n']:,}: {r['changed']}" for r in rows)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
