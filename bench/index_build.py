"""The first index build of a large session, and `python -m retrieval search` on it (issue 15), beside raw baselines.

    python bench/index_build.py [--size 1000000] [--data DIR] [--cli-runs 10] [--out DIR] [--cli-only] [--build-cache]
    PYTHONPATH=/tmp/old-mre python bench/index_build.py --data DIR ...   # the same driver over older code

One session of --size events (LoCoMo sentences recombined, as bench/growth.py builds them; written once
with Ledger.import_jsonl into --data and reused), then, each in a fresh process:

  index            the first Index.index_session of the session (what the first search after an import waits
                   for): wall and CPU seconds (user + system, every thread; imports not counted)
  raw text         a plain FTS5 table (porter) of the same texts: the baseline growth.py uses
  raw same cols    an FTS5 table over the same `events` rows the index holds (text and context columns,
                   external content, the index's tokenizer), filled in the same 20k-row transactions: the
                   floor for what the index stores, with no reading, planning or novelty; with --build-cache,
                   again with the page cache the index's own build sets (BUILD_CACHE_KIB)
  cli search       `python -m retrieval search DATA s QUESTION` with the index up to date, minus the same
                   interpreter importing the same modules (`python -c "import cli.prog_retrieval"`), p50 / p95
  cli parts        inside one such process: opening the ledger and index, the revocation and supersession
                   state (control.revocation.current), the search itself (ms)

Prints a markdown table and the machine; writes DIR/index_build-<label>.json (default bench/out/).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.append(str(ROOT))  # appended: PYTHONPATH (older code) wins for the project's packages
if sys.path and Path(sys.path[0]).resolve() == HERE:
    sys.path.pop(0)  # the script's folder would shadow the `bundle` package with bench/bundle.py

SESSION = "s"
ROWS_PER_TX = 20_000

CHILD_INDEX = """
import resource, sys, time
from storage.files.ledger.store import Ledger
from storage.files.retrieval.db import Index
r0, t = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
idx = Index(sys.argv[1], Ledger(sys.argv[1]))
idx.index_session(sys.argv[2])
wall = time.perf_counter() - t
idx.close()
r1 = resource.getrusage(resource.RUSAGE_SELF)  # every thread of the process
print(wall, (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime))
"""

CHILD_CONTROL = """
import sys, time
from storage.files.ledger.store import Ledger
from control.revocation import current
led = Ledger(sys.argv[1])  # a writer's ledger (the app, a turn): it leaves control-state.json behind
t = time.perf_counter()
try:
    current(led, sys.argv[2], save=True)
except TypeError:  # code from before the control state file
    current(led, sys.argv[2])
print((time.perf_counter() - t) * 1000)
"""

CHILD_PARTS = """
import sys, time
t0 = time.perf_counter()
from storage.files.ledger.store import Ledger
from storage.files.retrieval.db import Index
from control.revocation import current
t1 = time.perf_counter()
try:
    led = Ledger(sys.argv[1], record_tails=False)  # as the CLI opens it
except TypeError:  # code from before the tail record
    led = Ledger(sys.argv[1])
led.head(sys.argv[2])
idx = Index(sys.argv[1], led)
idx.index_session(sys.argv[2])
t2 = time.perf_counter()
state = current(led, sys.argv[2])
t3 = time.perf_counter()
idx.search(sys.argv[2], sys.argv[3], 8, sorted(state.revoked))
t4 = time.perf_counter()
print((t2 - t1) * 1000, (t3 - t2) * 1000, (t4 - t3) * 1000)
"""


def env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(x for x in (os.environ.get("PYTHONPATH"), str(ROOT)) if x))


def child(args: list[str]) -> str:
    # cwd outside the repository: `python -m` puts the working directory first on sys.path, ahead of PYTHONPATH
    out = subprocess.run([sys.executable, *args], check=True, capture_output=True, text=True, cwd="/", env=env())
    return out.stdout


def child_ms(args: list[str]) -> float:
    t = time.perf_counter()
    child(args)
    return (time.perf_counter() - t) * 1000


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def build_ledger(data: Path, n: int, seed: int) -> None:
    from bench.growth import jsonl, locomo, texts
    from storage.files.ledger.store import Ledger

    sentences, speakers, _ = locomo()
    data.mkdir(parents=True, exist_ok=True)
    Ledger(data).import_jsonl(SESSION, jsonl(texts(n, sentences, speakers, seed)))


def raw_text(data: Path, work: Path) -> tuple[float, float]:
    """A plain FTS5 table of the session's texts (read from the ledger file first, not timed)."""
    import orjson

    log = data / "sessions" / SESSION / "events.jsonl"
    items = [orjson.loads(line)["text"] for line in log.open("rb")]
    path = work / "raw_text.sqlite"
    path.unlink(missing_ok=True)
    r0, t = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    conn = sqlite3.connect(path)
    conn.execute("CREATE VIRTUAL TABLE raw USING fts5(text, tokenize='porter')")
    with conn:
        conn.executemany("INSERT INTO raw (rowid, text) VALUES (?, ?)", enumerate(items))
    conn.close()
    wall, r1 = time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF)
    path.unlink()
    return wall, (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)


def raw_same_columns(index_file: Path, work: Path, cache_kib: int | None = None) -> tuple[float, float]:
    """The index's own rows (events: text, context, ...) copied into a fresh file with an FTS5 table over them
    (`cache_kib`: with that page cache, as the index's own build sets it; default SQLite's 2 MB)."""
    src = sqlite3.connect(index_file)
    rows = src.execute("SELECT id, session, seq, event_id, role, ts, text, context, meta, digest, chain, novelty, collapse FROM events").fetchall()
    src.close()
    from retrieval import sql

    path = work / "raw_cols.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    r0, t = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    if cache_kib is not None:
        conn.execute(f"PRAGMA cache_size = -{cache_kib}")
    for stmt in sql.DDL.split(";"):
        if stmt.strip():
            conn.execute(stmt)
    conn.execute(sql.create_fts(1))
    for i in range(0, len(rows), ROWS_PER_TX):
        part = rows[i : i + ROWS_PER_TX]
        conn.execute("BEGIN")
        conn.executemany(sql.INSERT_EVENT, part)
        conn.executemany(sql.insert_fts(1), ((r[0], r[6], r[7]) for r in part))
        conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    wall, r1 = time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF)
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    return wall, (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from bench.growth import locomo

    data = Path(args.data)
    if not (data / "sessions" / SESSION / "events.jsonl").exists():
        build_ledger(data, args.size, args.seed)
    r: dict[str, Any] = {"n": args.size}
    if args.cli_only:  # the index built by an earlier run is kept
        child(["-c", CHILD_INDEX, str(data), SESSION])  # up to date: a no-op, or it catches up
    else:
        for p in data.glob("index.sqlite*"):
            p.unlink()
        wall, cpu = (float(x) for x in child(["-c", CHILD_INDEX, str(data), SESSION]).split())
        r["index_s"], r["index_cpu_s"] = wall, cpu
        work = Path(args.out)
        work.mkdir(parents=True, exist_ok=True)
        r["raw_text_s"], r["raw_text_cpu_s"] = raw_text(data, work)
        r["raw_cols_s"], r["raw_cols_cpu_s"] = raw_same_columns(data / "index.sqlite", work)
        if args.build_cache:
            from storage.common.retrieval.indexer import BUILD_CACHE_KIB

            r["raw_cols_cache_s"], r["raw_cols_cache_cpu_s"] = raw_same_columns(data / "index.sqlite", work, BUILD_CACHE_KIB)
    # a writer (the app starting, a turn, a revoke) derives the control state once and saves it (control/state_file.py);
    # the CLI's reader then folds only what is newer. Older code has no such file: this is then its plain derivation.
    r["control_first_ms"] = float(child(["-c", CHILD_CONTROL, str(data), SESSION]))
    qs = locomo()[2][: args.cli_runs]
    cli = [child_ms(["-m", "retrieval", "search", str(data), SESSION, q]) for q in qs]
    start = [child_ms(["-c", "import cli.prog_retrieval"]) for _ in qs]
    floor = statistics.median(start)
    r["cli_p50"], r["cli_p95"], r["cli_startup_ms"] = pct(cli, 0.5) - floor, pct(cli, 0.95) - floor, floor
    parts = [[float(x) for x in child(["-c", CHILD_PARTS, str(data), SESSION, q]).split()] for q in qs[:3]]
    r["open_ms"], r["control_state_ms"], r["search_ms"] = (statistics.median(p[i] for p in parts) for i in range(3))
    return r


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=1_000_000)
    p.add_argument("--data", default=None, help="where the session's ledger is written once and reused")
    p.add_argument("--cli-runs", type=int, default=10)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--label", default="main")
    p.add_argument("--out", default=str(HERE / "out"))
    p.add_argument("--cli-only", action="store_true", help="keep the index an earlier run built; measure the CLI only")
    p.add_argument("--build-cache", action="store_true", help="also the raw same-columns table with the page cache the index's build sets")
    args = p.parse_args(argv)
    if args.data is None:
        args.data = str(Path(args.out) / f"index_build-n{args.size}")
    from bench._machine import machine_line

    load0 = os.getloadavg()
    r = measure(args)
    doc = {"label": args.label, "machine": machine_line(), "load": load0, "load_end": os.getloadavg(), "row": r}
    Path(args.out, f"index_build-{args.label}.json").write_text(json.dumps(doc, indent=1))
    print(doc["machine"])
    print(f"load average at start {load0[0]:.1f} / {load0[1]:.1f} / {load0[2]:.1f}, at end {doc['load_end'][0]:.1f}")
    print()
    print("| events | index s (CPU s) | raw text FTS5 s (CPU s) | raw same columns s (CPU s) | CLI search beyond start-up p50 / p95 ms | CLI parts: open / control state / search ms | control state, a writer's first derivation ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    build = (
        f"{r['index_s']:.1f} ({r['index_cpu_s']:.1f}) | {r['raw_text_s']:.1f} ({r['raw_text_cpu_s']:.1f}) "
        f"| {r['raw_cols_s']:.1f} ({r['raw_cols_cpu_s']:.1f})"
        if "index_s" in r
        else "not measured (--cli-only) | | "
    )
    if "raw_cols_cache_s" in r:
        print(f"raw same columns with the build's page cache: {r['raw_cols_cache_s']:.1f} s ({r['raw_cols_cache_cpu_s']:.1f} s CPU)")
    print(
        f"| {r['n']:,} | {build} | {r['cli_p50']:,.0f} / {r['cli_p95']:,.0f} "
        f"| {r['open_ms']:,.0f} / {r['control_state_ms']:,.0f} / {r['search_ms']:,.0f} | {r['control_first_ms']:,.0f} |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
