"""Ledger speed against raw baselines measured in the same run.

    python bench/ledger.py [--events 1000000] [--appends 2000]
    python bench/ledger.py --open-sizes 10000,100000,1000000 [--runs 3]

(a) verification throughput vs a raw loop that only parses each line and computes two sha256;
(b) durable single appends vs a raw write+fsync loop;
(c) bulk import vs a raw bulk write of the same bytes with one fsync (issue 15: also in one process,
workers=0, and the CPU time per event of each, workers included).
Peak RSS growth during verification is reported to show constant memory.
(d) with --open-sizes (only that): opening a session in a fresh process (`Ledger(d).head(s)`, the
time inside the child, interpreter start-up and imports excluded) from the tail record, against the
full walk (the record removed first) and a raw read of the file's last line; plus the first
`read_events` of one seq in a fresh process (found by bisection, no offset table).
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
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

# The script's own folder would shadow the `ledger` package: put the repository root first instead.
sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench._machine import machine_line  # noqa: E402
from storage.files.ledger.store import Ledger  # noqa: E402

WORDS = "the a memory receipt ledger Lisbon moved cat dog yesterday support group painting camping".split()


def messages(n: int) -> list[bytes]:
    out = []
    for i in range(n):
        words = " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(12 + i % 20))
        role = "user" if i % 2 == 0 else "assistant"
        out.append(orjson.dumps({"role": role, "text": f"Speaker{i % 2}: {words}", "meta": {"dia_id": f"D{i // 20}:{i % 20}", "session": i // 20}}) + b"\n")
    return out


def cpu_seconds() -> float:
    """CPU time of this process and of its children that have ended (the import's workers)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def raw_verify(path: Path) -> int:
    n = 0
    h = hashlib.sha256
    with open(path, "rb") as f:
        for line in f:
            obj = orjson.loads(line)
            h(h(line).digest() + obj["digest"].encode()).digest()
            n += 1
    return n


CHILD = """
import sys, time
from storage.files.ledger.store import Ledger
data, what = sys.argv[1], sys.argv[2]
led = Ledger(data)
t = time.perf_counter()
if what == "raw":
    with open(data + "/sessions/s/events.jsonl", "rb") as f:
        f.seek(-4096, 2)
        last = f.read().rsplit(b"\\n", 2)[-2]
elif what == "read":
    led.read_events("s", [7])
else:
    led.head("s")
print(time.perf_counter() - t)
"""


def child_ms(data: Path, what: str) -> float:
    root = str(Path(__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", CHILD, str(data), what], cwd=root, check=True, capture_output=True, text=True)
    return float(out.stdout) * 1000


def bench_open(sizes: list[int], runs: int) -> None:
    """(d) open a session in a fresh process: the tail record against the full walk, medians in ms."""
    print(f"machine: {machine_line()}\n")
    print("| events | open from the tail record | full walk (no record) | raw: read the last line | first read_events of one seq (bisection) |")
    print("|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        for n in sizes:
            data = Path(tmp) / f"d{n}"
            Ledger(data).import_jsonl("s", messages(n))
            record = data / "sessions" / "s" / "tail.json"
            fast = [child_ms(data, "head") for _ in range(runs)]
            read = [child_ms(data, "read") for _ in range(runs)]
            raw = [child_ms(data, "raw") for _ in range(runs)]
            walk = []
            for _ in range(runs):
                record.unlink()
                walk.append(child_ms(data, "head"))  # the walk writes the record again
            med = statistics.median
            print(f"| {n:,} | {med(fast):.2f} ms | {med(walk):,.0f} ms | {med(raw):.2f} ms | {med(read):.2f} ms |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--appends", type=int, default=2000)
    ap.add_argument("--open-sizes", help="comma-separated session sizes: run only (d), the open in a fresh process")
    ap.add_argument("--runs", type=int, default=3, help="fresh processes per figure in (d); the median is shown")
    args = ap.parse_args()
    if args.open_sizes:
        bench_open([int(x) for x in args.open_sizes.split(",")], args.runs)
        return
    load0 = " ".join(f"{x:.2f}" for x in os.getloadavg())
    rows = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        tmpd = Path(tmp)
        src = messages(args.events)

        # (c) bulk import vs raw bulk write + one fsync
        try:
            from ledger.importer import workers_for  # issue 15: what the default import chooses at this load

            chosen = workers_for(args.events)
        except ImportError:  # older code: no workers
            chosen = 0
        cpu0 = cpu_seconds()
        t = time.perf_counter()
        led = Ledger(tmpd / "data")
        led.import_jsonl("bulk", src)
        imp = time.perf_counter() - t
        imp_cpu = cpu_seconds() - cpu0
        log = led.log_path("bulk")
        t = time.perf_counter()
        with open(tmpd / "raw.jsonl", "wb") as f:
            for line in src:
                f.write(line)
            f.flush()
            os.fsync(f.fileno())
        raw_bulk = time.perf_counter() - t
        rows.append(("bulk import (parse+validate+hash+write+1 fsync)", args.events / imp, args.events / raw_bulk, "lines/s"))
        notes.append(f"bulk import: {imp_cpu / args.events * 1e6:.1f} us of CPU per event (this process and its workers)")
        if "workers" in inspect.signature(led.import_jsonl).parameters:  # issue 15: the same import both ways, forced
            notes.append(f"bulk import (default): {chosen} worker processes at this load (ledger.importer.workers_for)")
            for workers, name in ((0, "in one process (workers=0)"), (2, "2 worker processes (workers=2)")):
                cpu0 = cpu_seconds()
                t = time.perf_counter()
                Ledger(tmpd / "data1").import_jsonl("bulk", src, workers=workers)
                took = time.perf_counter() - t
                took_cpu = cpu_seconds() - cpu0
                shutil.rmtree(tmpd / "data1")
                rows.append((f"bulk import, {name}", args.events / took, args.events / raw_bulk, "lines/s"))
                notes.append(f"bulk import {name}: {took_cpu / args.events * 1e6:.1f} us of CPU per event")

        # (a) verification vs raw parse + 2 sha256
        rss0 = rss_mb()
        t = time.perf_counter()
        report = led.verify("bulk")
        ver = time.perf_counter() - t
        assert report.ok and report.events == args.events, report
        rss1 = rss_mb()
        t = time.perf_counter()
        n = raw_verify(log)
        raw = time.perf_counter() - t
        assert n == args.events
        rows.append((f"verify {args.events:,} events", args.events / ver, args.events / raw, "lines/s"))

        # (b) durable single appends vs raw write+fsync
        led2 = Ledger(tmpd / "data2")
        led2.append("single", "user", "warm-up")
        t = time.perf_counter()
        for i in range(args.appends):
            led2.append("single", "user", f"message number {i} about the Lisbon move", {"i": i})
        app = time.perf_counter() - t
        line = src[0]
        fd = os.open(tmpd / "raw-append.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        t = time.perf_counter()
        for _ in range(args.appends):
            os.write(fd, line)
            os.fsync(fd)
        raw_app = time.perf_counter() - t
        os.close(fd)
        rows.append(("durable single append (fsync each)", args.appends / app, args.appends / raw_app, "appends/s"))

        jsonl_mb = log.stat().st_size / 1e6

    print(f"machine: {machine_line()}")
    print(f"ledger file: {jsonl_mb:.0f} MB for {args.events:,} events; verify peak RSS growth {rss1 - rss0:.1f} MB")
    print(f"load average before/after: {load0} / {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for note in notes:
        print(note)
    print()
    print("| measurement | project | raw baseline | ratio |")
    print("|---|---:|---:|---:|")
    for name, ours, base, unit in rows:
        print(f"| {name} | {ours:,.0f} {unit} | {base:,.0f} {unit} | {ours / base:.2f}× |")


if __name__ == "__main__":
    main()
