"""Durable appends per second, files against PostgreSQL, with 1, 4 and 16 concurrent writers on distinct sessions.

    python bench/backends.py [--appends 2000] [--writers 1,4,16] [--rounds 3] [--database-url URL]

Each writer is its own process (as replicas are) appending to its own session; the APPENDS of a
row are split between its writers, so every row does the same work. The clock runs from a barrier
all writers wait at (connected, session created, one event written) to the last writer's end;
each cell is the median of ROUNDS, the kinds alternated within a round (the machine is shared).
Raw baselines, same run, same scheme: `file raw` is write+fsync of a 400-byte line to an O_APPEND
file; `pg raw` is one INSERT and COMMIT of such a line into a bare table. Without --database-url
(or $DATABASE_URL) a throwaway server is started (tests/pg_support.py: initdb in /tmp, fsync on,
default settings) and stopped. The target database gets the schema; nothing else is touched
but its `events`/`sessions` rows of sessions named bench-*, and a table bench_raw it drops.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench._machine import machine_line  # noqa: E402
from bench.common import pg_database  # noqa: E402

LINE = b'{"role":"user","text":"' + b"x" * 370 + b'"}\n'
KINDS = ("file", "pg", "file raw", "pg raw")


def _writer(kind: str, target: str, session: str, n: int, barrier: Any, ends: Any) -> None:
    """One writer: get ready, wait at the barrier, append `n` times, report when it ended."""
    sys.path[0] = str(Path(__file__).resolve().parents[1])
    text = "x" * 370
    if kind == "file":
        from storage.files.ledger.store import Ledger

        led: Any = Ledger(target)
        led.append(session, "user", "warm-up")
        barrier.wait()
        for i in range(n):
            led.append(session, "user", f"{i} {text}")
    elif kind == "pg":
        from storage.pg.ledger import PgLedger

        led = PgLedger(target)
        led.append(session, "user", "warm-up")
        barrier.wait()
        for i in range(n):
            led.append(session, "user", f"{i} {text}")
        led.close()
    elif kind == "file raw":
        fd = os.open(Path(target) / f"{session}.raw", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        barrier.wait()
        for _ in range(n):
            os.write(fd, LINE)
            os.fsync(fd)
        os.close(fd)
    else:
        import psycopg

        with psycopg.connect(target) as conn:
            barrier.wait()
            for i in range(n):
                conn.execute("INSERT INTO bench_raw (session, seq, line) VALUES (%s, %s, %s)", (session, i, LINE))
                conn.commit()
    ends.put(time.monotonic())


def measure(kind: str, target: str, writers: int, appends: int, tag: str) -> float:
    """Appends per second of `writers` processes together doing `appends` appends."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(writers + 1)
    ends = ctx.Queue()
    each = appends // writers
    procs = [
        ctx.Process(target=_writer, args=(kind, target, f"bench-{tag}-{writers}-{k}", each, barrier, ends)) for k in range(writers)
    ]
    for p in procs:
        p.start()
    barrier.wait(timeout=120)
    t0 = time.monotonic()
    last = max(ends.get(timeout=600) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        if p.exitcode != 0:
            raise RuntimeError(f"{kind}: a writer failed (exit {p.exitcode})")
    return each * writers / (last - t0)




def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--appends", type=int, default=2000, help="appends per row, split between its writers (default 2000)")
    ap.add_argument("--writers", default="1,4,16", help="writer counts (default 1,4,16)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds; each cell is their median (default 3)")
    ap.add_argument("--database-url", default=os.environ.get("DATABASE_URL"), help="an existing database (default: a throwaway server)")
    args = ap.parse_args()
    counts = [int(c) for c in args.writers.split(",")]
    print(machine_line())
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    runs: dict[tuple[str, int], list[float]] = {}
    with pg_database(args.database_url) as url, tempfile.TemporaryDirectory(prefix="mre-bench-") as tmp:
        import psycopg

        from storage.pg.connect import Database

        Database(url).close()  # the schema
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP TABLE IF EXISTS bench_raw")
            conn.execute("CREATE TABLE bench_raw (session text, seq bigint, line bytea, PRIMARY KEY (session, seq))")
            server = conn.execute("SHOW server_version").fetchone()
            sync = conn.execute("SHOW synchronous_commit").fetchone()
        for r in range(args.rounds):
            for writers in counts:
                for kind in KINDS:
                    target = url if kind.startswith("pg") else str(Path(tmp) / kind.replace(" ", "-"))
                    Path(tmp, kind.replace(" ", "-")).mkdir(exist_ok=True)
                    rate = measure(kind, target, writers, args.appends, f"{os.getpid()}-{r}")
                    runs.setdefault((kind, writers), []).append(rate)
                    print(f"  round {r + 1}: {kind:<9} {writers:>2} writers: {rate:>8,.0f} appends/s", file=sys.stderr, flush=True)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP TABLE bench_raw")
    results = {key: statistics.median(rates) for key, rates in runs.items()}
    print(f"PostgreSQL {server[0] if server else '?'} (synchronous_commit {sync[0] if sync else '?'}), {args.appends:,} appends per cell, median of {args.rounds}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print()
    print(f"{'writers':>7} | " + " | ".join(f"{k:>9}" for k in KINDS) + " | pg / file | pg vs 1 writer")
    for writers in counts:
        row = [results[k, writers] for k in KINDS]
        scale = results["pg", writers] / results["pg", counts[0]]
        print(f"{writers:>7} | " + " | ".join(f"{v:>9,.0f}" for v in row) + f" | {row[1] / row[0]:>9.2f} | {scale:>13.2f}x")
    print("(appends/s; each writer a process on its own session; file = Ledger.append, pg = PgLedger.append)")


if __name__ == "__main__":
    main()
