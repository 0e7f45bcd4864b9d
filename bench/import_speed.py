"""Bulk import speed (issue 30) against the raw parse + 2 sha256 of the same lines, measured in the same run.

    python bench/import_speed.py [--events 1000000] [--runs 3] [--workers 0,1,2,auto] [--compact] [--cli]

The file is written the way most JSONL is (Python's json.dumps: ", " and ": " between items; --compact: orjson's
compact lines), in BENCH_TMP or the system temporary folder, and removed after. For each run and each worker count:
first the raw loop (orjson.loads of each line and two sha256: of the line, then of that digest), then the import's
ledger part in-process (ledger.importer.stage + commit into a fresh data directory: parse strictly, validate, salt,
hash, chain, serialise, write, one fsync); the ratio is the import's events/s over the raw loop's just before it,
and the CPU ratio the same with CPU seconds (this process and the workers), which a shared machine moves less.
Every import uses the same salts and clock, so their ledgers must be byte-identical whatever the worker count: the
script checks it. `auto` is what `ledger import` chooses (ledger.importer.workers_for) at that moment's load.
--cli: also `python -m ledger import` end to end (a fresh process: start-up, the ledger, the index), then the first
`python -m retrieval search` after it, wall time; beside them a raw FTS5 build of the same texts in one transaction,
text only and with the index's second column (the neighbours' context), same run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path[0] = str(Path(__file__).resolve().parents[1])  # the script's folder would shadow the `ledger` package

from bench._machine import machine_line  # noqa: E402
from ledger import bulk, importer  # noqa: E402
from storage.files.ledger.store import Ledger  # noqa: E402

WORDS = "the a memory receipt ledger Lisbon moved cat dog yesterday support group painting camping".split()
NOW = "2026-12-06T00:00:00.000000Z"


def write_file(path: Path, n: int, compact: bool) -> None:
    with open(path, "wb") as f:
        for i in range(n):
            words = " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(12 + i % 20))
            obj = {"role": "user" if i % 2 == 0 else "assistant", "text": f"Speaker{i % 2}: {words}", "meta": {"dia_id": f"D{i // 20}:{i % 20}", "session": i // 20}}
            f.write(orjson.dumps(obj) + b"\n" if compact else json.dumps(obj).encode() + b"\n")


def cpu_seconds() -> float:
    """CPU time of this process and of its children that have ended (the import's workers)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def raw_parse_hash(path: Path) -> tuple[float, float]:
    """(wall, CPU) seconds for orjson.loads of every line and two sha256 (the line's, then that digest's)."""
    h = hashlib.sha256
    c, t = cpu_seconds(), time.perf_counter()
    with open(path, "rb") as f:
        for line in f:
            orjson.loads(line)
            h(h(line).digest()).digest()
    return time.perf_counter() - t, cpu_seconds() - c


def seeded(seed: int = 7) -> object:
    state = {"n": 0}

    def draw(k: int) -> bytes:
        out = bytearray()
        while len(out) < k:
            out += hashlib.sha256(b"%d:%d" % (seed, state["n"])).digest()
            state["n"] += 1
        return bytes(out[:k])

    return draw


def import_once(src: Path, data: Path, workers: int | None) -> tuple[float, float, bytes]:
    """(wall, CPU) seconds for stage + commit of `src` into a fresh `data` (salts and clock fixed; CPU: the workers'
    too), and the ledger's sha256."""
    bulk.random_bytes = seeded()  # type: ignore[assignment]
    real_now = importer.now_ts
    importer.now_ts = lambda: NOW
    try:
        led = Ledger(data)
        c, t = cpu_seconds(), time.perf_counter()
        with open(src, "rb") as f:
            staged = importer.stage(led, "s", f, content=True, workers=workers)
        importer.commit(led, staged)
        took, cpu = time.perf_counter() - t, cpu_seconds() - c
    finally:
        bulk.random_bytes = os.urandom
        importer.now_ts = real_now
    digest = hashlib.sha256(led.log_path("s").read_bytes()).digest()
    shutil.rmtree(data)
    return took, cpu, digest


def raw_fts(src: Path, work: Path) -> tuple[float, float, float, float]:
    """(wall, CPU) seconds of a raw FTS5 build of the file's texts in one transaction (the index's tokenizer): text only, then
    text and the neighbours' context (2 before, 2 after, the index's separator), as the index's two columns. Texts
    are read and the contexts joined before the clock starts."""
    import sqlite3

    from retrieval.indexing import CONTEXT_SEP
    from retrieval.sql import TOKENIZER

    with open(src, "rb") as f:
        texts = [orjson.loads(line)["text"] for line in f]
    ctx = [CONTEXT_SEP.join([*texts[max(0, i - 2) : i], *texts[i + 1 : i + 3]]) for i in range(len(texts))]
    out = []
    for cols, rows in (("text", [(t,) for t in texts]), ("text, context", list(zip(texts, ctx, strict=True)))):
        path = work / "raw.sqlite"
        path.unlink(missing_ok=True)
        c, t = cpu_seconds(), time.perf_counter()
        conn = sqlite3.connect(path)
        conn.execute(f"CREATE VIRTUAL TABLE raw USING fts5({cols}, tokenize='{TOKENIZER}')")
        with conn:
            conn.executemany(f"INSERT INTO raw ({cols}) VALUES ({', '.join('?' * len(rows[0]))})", rows)
        conn.close()
        out += [time.perf_counter() - t, cpu_seconds() - c]
        path.unlink()
    return out[0], out[1], out[2], out[3]


def cli_import_then_search(src: Path, data: Path) -> tuple[float, float, float, float, int]:
    """Wall and CPU seconds (the child's, every thread) of `python -m ledger import`, then of the first search."""
    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "RECEIPT_SIGNING_KEY")}
    c, t = cpu_seconds(), time.perf_counter()
    subprocess.run([sys.executable, "-m", "ledger", "import", str(data), "s", str(src), "--create"], cwd=root, env=env, check=True, capture_output=True)
    imp, imp_cpu = time.perf_counter() - t, cpu_seconds() - c
    c, t = cpu_seconds(), time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "retrieval", "search", str(data), "s", "Lisbon camping", "--json"], cwd=root, env=env, check=True, capture_output=True)
    first, first_cpu = time.perf_counter() - t, cpu_seconds() - c
    shutil.rmtree(data)
    return imp, imp_cpu, first, first_cpu, len(json.loads(out.stdout)["results"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", default="0,1,2,auto", help="comma-separated worker counts; auto: workers_for's choice")
    ap.add_argument("--compact", action="store_true", help="orjson's compact lines instead of json.dumps'")
    ap.add_argument("--cli", action="store_true", help="also `python -m ledger import` then the first search, wall time")
    args = ap.parse_args()
    choices = [None if w == "auto" else int(w) for w in args.workers.split(",")]
    loads = [os.getloadavg()[0]]
    print(f"machine: {machine_line()}")
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        src = Path(tmp) / "in.jsonl"
        write_file(src, args.events, args.compact)
        print(f"file: {args.events:,} lines, {src.stat().st_size / 1e6:.0f} MB ({'orjson compact' if args.compact else 'json.dumps'} lines)")
        rates: dict[str, list[float]] = {}
        ratios: dict[str, list[float]] = {}
        cpu_ratios: dict[str, list[float]] = {}
        cpu_us: dict[str, list[float]] = {}
        raws: list[float] = []
        raw_us: list[float] = []
        digests: set[bytes] = set()
        for _ in range(args.runs):
            for w in choices:
                name = "auto" if w is None else str(w)
                raw_wall, raw_cpu = raw_parse_hash(src)
                took, cpu, digest = import_once(src, Path(tmp) / "data", w)
                digests.add(digest)
                raws.append(args.events / raw_wall)
                raw_us.append(raw_cpu / args.events * 1e6)
                rates.setdefault(name, []).append(args.events / took)
                ratios.setdefault(name, []).append(raw_wall / took)
                cpu_us.setdefault(name, []).append(cpu / args.events * 1e6)
                cpu_ratios.setdefault(name, []).append(raw_cpu / cpu)
                loads.append(os.getloadavg()[0])
        assert len(digests) == 1, "the ledgers differ between worker counts"
        cli = [(*cli_import_then_search(src, Path(tmp) / "cli"), *raw_fts(src, Path(tmp))) for _ in range(args.runs)] if args.cli else []
    print(f"load average (1 min) from {loads[0]:.2f} to {loads[-1]:.2f}, max {max(loads):.2f}; auto chose {importer.workers_for(args.events)} workers at the end")
    print("ledgers byte-identical across worker counts: yes\n")
    med = statistics.median
    print(f"raw parse + 2 sha256, every run: {min(raws):,.0f} / {med(raws):,.0f} / {max(raws):,.0f} lines/s (min / median / max), {med(raw_us):.2f} us of CPU per line (median)\n")
    print(f"| import's ledger part, {args.events:,} events | events/s min / median / max | ratio to the raw run just before it, min / median / max | CPU us per event (median) | CPU ratio (raw CPU / import CPU), median |")
    print("|---|---:|---:|---:|---:|")
    for name, rs in rates.items():
        rt = ratios[name]
        print(f"| workers {name} | {min(rs):,.0f} / {med(rs):,.0f} / {max(rs):,.0f} | {min(rt):.2f} / {med(rt):.2f} / {max(rt):.2f}× | {med(cpu_us[name]):.2f} | {med(cpu_ratios[name]):.2f}× |")
    if cli:
        print("\nwall s (CPU s):\n")
        print("| `python -m ledger import` (start-up, ledger, index) | first `python -m retrieval search` after it | in all | hits | raw FTS5 of the texts, same run | raw FTS5, text + neighbours' context |")
        print("|---:|---:|---:|---:|---:|---:|")
        for imp, imp_c, first, first_c, hits, raw1, raw1_c, raw2, raw2_c in cli:
            print(
                f"| {imp:.1f} ({imp_c:.1f}) | {first:.2f} ({first_c:.2f}) | {imp + first:.1f} ({imp_c + first_c:.1f}) | {hits} "
                f"| {raw1:.1f} ({raw1_c:.1f}) | {raw2:.1f} ({raw2_c:.1f}) |"
            )


if __name__ == "__main__":
    main()
