"""Search latency and index cost through the project's API, beside raw FTS5 on the same data.

    python bench/search.py [--quick] [--sizes 10000,100000,1000000] [--queries N] [--recall-questions N] [--out DIR]

Data: LoCoMo turns recombined (1-3 random sentences of random turns, a random
LoCoMo speaker), written through the ledger, indexed with Index.catch_up().
Cases: one session of 10k / 100k / 1M events; 100 sessions of 10k (1M in the
index, one session searched); and LoCoMo recall inside the 1M session (the 10
real conversations embedded in it), pruned vs exhaustive vs raw.
--quick: 10k and 100k, 10 sessions of 10k, no 1M cases. Built data is kept
in --out (default bench/out/, git-ignored) and reused by the next run.
Raw query: `MATCH <question words OR-ed> ORDER BY bm25 LIMIT 8`, porter.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import LOCOMO, RawBaseline, load, machine, questions, recall, turns  # noqa: E402
from ledger.messages import Message  # noqa: E402
from retrieval import IndexConfig  # noqa: E402
from retrieval.sql import SCHEMA_VERSION  # noqa: E402
from storage.files.ledger.store import Ledger
from storage.files.retrieval.db import Index

K = 8
RECALL_KS = (5, 10, 25, 50)
BATCH = 50_000
SENTENCE_RE = re.compile(r"(?<=[.!?])\s+")
EXHAUSTIVE = IndexConfig(prune_min_events=10**12)  # same index, no term pruning
EXACT = IndexConfig(exact_prune=True)  # the score bound (retrieval.bounded): the exhaustive answer, fewer rows scored
SHARE = IndexConfig(exact_prune=False)  # the older default: common terms dropped (recall lost)
PRUNE_SWEEP = (0.01, 0.002)  # other pruning thresholds measured in the 1M recall table


class Recombiner:
    """Deterministic synthetic turns made of real LoCoMo sentences."""

    def __init__(self, data: list[dict], seed: int) -> None:
        self.rng = random.Random(seed)
        self.sentences: list[str] = []
        speakers: set[str] = set()
        for conv in data:
            for t in turns(conv):
                speaker, _, body = t.text.partition(": ")
                speakers.add(speaker)
                self.sentences.extend(s for s in SENTENCE_RE.split(body) if s)
        self.speakers = sorted(speakers)

    def text(self) -> str:
        n = self.rng.choice((1, 1, 2, 2, 3))
        body = " ".join(self.rng.choice(self.sentences) for _ in range(n))
        return f"{self.rng.choice(self.speakers)}: {body}"

    def messages(self, n: int) -> list[Message]:
        return [Message("user" if i % 2 == 0 else "assistant", self.text(), {}) for i in range(n)]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def timed(fn: Callable[[str], object], queries: list[str]) -> tuple[float, float]:
    for q in queries[:10]:  # warm the page cache and the statement cache
        fn(q)
    times = []
    for q in queries:
        t0 = time.perf_counter()
        fn(q)
        times.append((time.perf_counter() - t0) * 1000)
    return pct(times, 0.5), pct(times, 0.95)


def dir_size(path: Path, pattern: str) -> int:
    return sum(p.stat().st_size for p in path.glob(pattern) if p.is_file())


def index_version() -> str:
    return f"schema {SCHEMA_VERSION}, {IndexConfig().indexed_part()}"


class Dataset:
    """A data dir with ledgers, the project's index, and a raw FTS5 table over the same texts."""

    def __init__(self, root: Path, name: str) -> None:
        self.dir = root / name
        self.stats_file = self.dir / "build.json"
        self.raw_path = self.dir / "raw.sqlite"

    def built(self) -> bool:
        """Built by this index version (schema and indexed settings), so the cached data is comparable."""
        return self.stats_file.is_file() and self.stats().get("index_version") == index_version()

    def build(self, sessions: dict[str, list[Message]]) -> dict:
        if self.dir.exists():
            import shutil

            shutil.rmtree(self.dir)
        self.dir.mkdir(parents=True)
        ledger = Ledger(self.dir)
        t0 = time.perf_counter()
        for session, msgs in sessions.items():
            for i in range(0, len(msgs), BATCH):
                ledger.append_many(session, msgs[i : i + BATCH])
        t_ledger = time.perf_counter() - t0
        t0 = time.perf_counter()
        index = Index(self.dir, Ledger(self.dir))  # a fresh Ledger: its first head() verifies each chain
        index.catch_up()
        index.close()
        t_index = time.perf_counter() - t0
        t0 = time.perf_counter()
        raw = sqlite3.connect(self.raw_path)
        raw.execute("CREATE VIRTUAL TABLE raw USING fts5(text, session UNINDEXED, tokenize='porter')")
        with raw:
            for session, msgs in sessions.items():
                raw.executemany("INSERT INTO raw (text, session) VALUES (?, ?)", ((m.text, session) for m in msgs))
        raw.close()
        t_raw = time.perf_counter() - t0
        stats = {
            "index_version": index_version(),
            "events": sum(len(m) for m in sessions.values()),
            "sessions": len(sessions),
            "ledger_s": t_ledger,
            "index_s": t_index,
            "raw_s": t_raw,
            "jsonl_bytes": dir_size(self.dir / "sessions", "*/events.jsonl"),
            "index_bytes": dir_size(self.dir, "index.sqlite*"),
            "raw_bytes": dir_size(self.dir, "raw.sqlite*"),
        }
        self.stats_file.write_text(json.dumps(stats))
        return stats

    def stats(self) -> dict:
        return json.loads(self.stats_file.read_text())


def raw_search(conn: sqlite3.Connection, q: str, k: int, session: str | None = None) -> list[int]:
    m = RawBaseline.match(q)
    if m is None:
        return []
    if session is None:
        sql = "SELECT rowid FROM raw WHERE raw MATCH ? ORDER BY bm25(raw) LIMIT ?"
        return [r[0] for r in conn.execute(sql, (m, k))]
    sql = "SELECT rowid FROM raw WHERE raw MATCH ? AND session = ? ORDER BY bm25(raw) LIMIT ?"
    return [r[0] for r in conn.execute(sql, (m, session, k))]


def fmt_mb(n: int) -> str:
    return f"{n / 1e6:.1f}"


def latency_case(ds: Dataset, session: str, queries: list[str], shared_filter: bool) -> dict:
    index = Index(ds.dir, Ledger(ds.dir), config=SHARE)
    raw = sqlite3.connect(ds.raw_path)
    ours = timed(lambda q: index.search(session, q, k=K), queries)
    exhaustive_ix = Index(ds.dir, Ledger(ds.dir), config=EXHAUSTIVE)
    exhaustive = timed(lambda q: exhaustive_ix.search(session, q, k=K), queries)
    raw_t = timed(lambda q: raw_search(raw, q, K, session if shared_filter else None), queries)
    exact_ix = Index(ds.dir, Ledger(ds.dir), config=EXACT)
    exact = timed(lambda q: exact_ix.search(session, q, k=K), queries)
    index.close()
    exhaustive_ix.close()
    exact_ix.close()
    raw.close()
    return {"ours": ours, "exhaustive": exhaustive, "raw": raw_t, "exact": exact}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="10k and 100k only, 10 sessions of 10k")
    p.add_argument("--queries", type=int, default=300, help="LoCoMo questions timed per case")
    p.add_argument("--recall-questions", type=int, default=200, help="questions for the 1M recall comparison")
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out")
    p.add_argument("--data", type=Path, default=LOCOMO)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--no-multi", action="store_true", help="skip the 100-sessions case")
    p.add_argument("--sizes", help="comma-separated single-session sizes to run (default: all; '' for none, e.g. the 100-session case alone)")
    args = p.parse_args(argv)
    data = load(args.data)
    all_q = [q for i, c in enumerate(data) for q in questions(c, i)]
    rng = random.Random(args.seed)
    timing_q = [q.question for q in rng.sample(all_q, min(args.queries, len(all_q)))]
    sizes: tuple[int, ...] = (10_000, 100_000) if args.quick else (10_000, 100_000, 1_000_000)
    if args.sizes is not None:
        sizes = tuple(int(x) for x in args.sizes.split(",") if x.strip())
    n_sessions = 10 if args.quick else 100
    args.out.mkdir(parents=True, exist_ok=True)

    print(f"Search latency (ms, top-{K}, {len(timing_q)} LoCoMo questions) — {machine()}\n")
    rows, cost_rows = [], []

    def cost(name: str, ds: Dataset) -> None:
        s = ds.stats()
        cost_rows.append(
            f"| {name} | {s['events']:,} | {s['ledger_s']:.1f} | {s['index_s']:.1f} | {s['raw_s']:.1f} | "
            f"{fmt_mb(s['jsonl_bytes'])} | {fmt_mb(s['index_bytes'])} | {s['index_bytes'] / s['jsonl_bytes']:.2f} | "
            f"{fmt_mb(s['raw_bytes'])} |"
        )

    for n in sizes:
        ds = Dataset(args.out, f"single-{n}-s{args.seed}")
        if not ds.built():
            print(f"building one session of {n:,} events ...", file=sys.stderr)
            msgs = Recombiner(data, args.seed + n).messages(n)
            if n == 1_000_000:
                msgs = embed_locomo(msgs, data)
            ds.build({"s": msgs})
        r = latency_case(ds, "s", timing_q, shared_filter=False)
        rows.append((f"one session of {n:,}", r, "raw, whole table"))
        cost(f"one session of {n:,}", ds)

    ds = Dataset(args.out, f"multi-{n_sessions}x10000-s{args.seed}")
    if args.no_multi:
        pass
    elif not ds.built():
        print(f"building {n_sessions} sessions of 10,000 events ...", file=sys.stderr)
        rec = Recombiner(data, args.seed + 1)
        ds.build({f"s{i:03d}": rec.messages(10_000) for i in range(n_sessions)})
    if not args.no_multi:
        target = f"s{n_sessions // 2:03d}"
        r = latency_case(ds, target, timing_q, shared_filter=True)
        rows.append((f"{n_sessions} sessions of 10,000 (one searched)", r, "raw, shared table, session filter"))
        cost(f"{n_sessions} sessions of 10,000", ds)

    print("| case | project, share pruning p50 / p95 | project, no pruning p50 / p95 | project, exact bound (default) p50 / p95 | raw FTS5 p50 / p95 | raw query |")
    print("|---|---:|---:|---:|---:|---|")
    for name, r, raw_kind in rows:
        cells = " | ".join(f"{a:.1f} / {b:.1f}" for a, b in (r["ours"], r["exhaustive"], r["exact"], r["raw"]))
        print(f"| {name} | {cells} | {raw_kind} |")
    print("\n**Build cost** (ledger write, index build incl. reading and verifying the ledger, raw FTS5 table)\n")
    print("| case | events | ledger s | index s | raw s | JSONL MB | index MB | index/JSONL | raw MB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(cost_rows))
    if 1_000_000 in sizes:
        ds = Dataset(args.out, f"single-1000000-s{args.seed}")
        print(recall_in_1m(ds, data, args.recall_questions, args.seed))
    return 0


def embed_locomo(msgs: list[Message], data: list[dict]) -> list[Message]:
    """Put the 10 LoCoMo conversations (each contiguous, in order) at evenly spread places."""
    out = list(msgs)
    step = len(msgs) // (len(data) + 1)
    for i in reversed(range(len(data))):
        conv = [Message(t.role, t.text, {"conv": i, "dia_id": t.dia_id}) for t in turns(data[i])]
        at = step * (i + 1)
        out[at:at] = conv
    return out


def recall_in_1m(ds: Dataset, data: list[dict], n_questions: int, seed: int) -> str:
    """LoCoMo evidence recall when each conversation is a small part of one 1M-event session."""
    ledger = Ledger(ds.dir)
    where: dict[tuple[int, str], int] = {}
    for ev in ledger.events("s"):
        if "dia_id" in ev.meta:
            where[(ev.meta["conv"], ev.meta["dia_id"])] = ev.seq
    qs = [q for i, c in enumerate(data) for q in questions(c, i)]
    qs = random.Random(seed).sample(qs, min(n_questions, len(qs)))
    default = IndexConfig()
    indexes = {f"project, default (exact_prune={default.exact_prune})": Index(ds.dir, ledger)}
    for share in (default.prune_share, *PRUNE_SWEEP):
        indexes[f"project, share pruning {share} (exact_prune=False)"] = Index(ds.dir, ledger, config=IndexConfig(prune_share=share, exact_prune=False))
    indexes["project, exhaustive (no pruning)"] = Index(ds.dir, ledger, config=EXHAUSTIVE)
    raw = sqlite3.connect(ds.raw_path)
    systems: dict[str, Callable[[str], list[int]]] = {
        name: (lambda ix: lambda q: [h.seq for h in ix.search("s", q, k=50).results])(ix) for name, ix in indexes.items()
    }
    systems["raw FTS5 exhaustive"] = lambda q: [r - 1 for r in raw_search(raw, q, 50)]  # raw rowids start at 1
    lines = [
        f"\n**LoCoMo recall (%) inside one session of {ds.stats()['events']:,} events** "
        f"({len(qs)} random questions; R@K from the top-50 list's first K)\n",
        "| system | " + " | ".join(f"R@{k}" for k in RECALL_KS) + " | p50 / p95 ms (k=50) |",
        "|---|" + "---:|" * (len(RECALL_KS) + 1),
    ]
    for name, fn in systems.items():
        per_k: dict[int, list[float]] = {k: [] for k in RECALL_KS}
        times = []
        for q in qs:
            t0 = time.perf_counter()
            seqs = fn(q.question)
            times.append((time.perf_counter() - t0) * 1000)
            gold_seqs = tuple(str(where.get((q.conv, g), -1)) for g in q.gold)
            for k in RECALL_KS:
                per_k[k].append(recall(gold_seqs, [str(s) for s in seqs[:k]]))
        cells = " | ".join(f"{100 * statistics.fmean(per_k[k]):.1f}" for k in RECALL_KS)
        lines.append(f"| {name} | {cells} | {pct(times, 0.5):.0f} / {pct(times, 0.95):.0f} |")
    for ix in indexes.values():
        ix.close()
    raw.close()
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
