"""Search whose cost follows the query (issue 30): p50 / p95 in one 1M-event session, by how common the query's terms are.

    python bench/search_rare.py [--size 1000000] [--queries 300] [--passes 3] [--out DIR]

Data: bench/search.py's one session (the same seed, so the same texts; built once into --out, default bench/out/, and
reused). Queries: the seeded LoCoMo questions bench/search.py times. Each question is put in a class by the share of the
session's rows holding each of its terms (the words the project's query keeps: retrieval.text.content_terms, no stop
words; each counted as a one-word MATCH on the raw table, porter-stemmed):
- rare: every word is in fewer than 10% of the rows (the issue's goal: p95 ≤ 50 ms);
- common: at least one word is in 10% or more.
Timed per class, each pass after 10 warm-up queries: the project's search as the app runs it (Index.search, the
default IndexConfig: the exact score bound) and raw FTS5 (`MATCH <words OR-ed> ORDER BY bm25 LIMIT 8`) on the same
texts, in the same run. The table prints min / median / max over the passes of each pass's p50 and p95.
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import statistics
import sys
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench._machine import machine_line  # noqa: E402
from bench.common import LOCOMO, RAW_TOKEN_RE, load, questions  # noqa: E402
from bench.search import Dataset, Recombiner, embed_locomo, raw_search, timed  # noqa: E402
from retrieval.text import content_terms  # noqa: E402
from storage.files.ledger.store import Ledger  # noqa: E402
from storage.files.retrieval.db import Index  # noqa: E402

K = 8
RARE = 0.10


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out")
    args = ap.parse_args(argv)
    data = load(LOCOMO)
    all_q = [q for i, c in enumerate(data) for q in questions(c, i)]
    timing_q = [q.question for q in random.Random(args.seed).sample(all_q, min(args.queries, len(all_q)))]
    args.out.mkdir(parents=True, exist_ok=True)
    ds = Dataset(args.out, f"single-{args.size}-s{args.seed}")
    if not ds.built():
        print(f"building one session of {args.size:,} events ...", file=sys.stderr)
        msgs = Recombiner(data, args.seed + args.size).messages(args.size)
        if args.size == 1_000_000:
            msgs = embed_locomo(msgs, data)
        ds.build({"s": msgs})
    load0 = os.getloadavg()[0]
    raw = sqlite3.connect(ds.raw_path)
    rows = raw.execute("SELECT count(*) FROM raw").fetchone()[0]
    # each word as FTS5 counts it: the porter tokenizer of a one-word MATCH gives the stemmed term
    df: dict[str, int] = {}

    def share(word: str) -> float:
        if word not in df:
            df[word] = int(raw.execute("SELECT count(*) FROM raw WHERE raw MATCH ?", (f'"{word}"',)).fetchone()[0])
        return df[word] / int(rows)

    classes: dict[str, list[str]] = {"rare": [], "common": []}
    for q in timing_q:
        words = {w.lower() for w in RAW_TOKEN_RE.findall(q) if content_terms(w)}  # the terms the project's query keeps
        top = max((share(w) for w in words), default=0.0)
        classes["rare" if top < RARE else "common"].append(q)
    index = Index(ds.dir, Ledger(ds.dir))
    index.search("s", timing_q[0], k=K)
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for _ in range(args.passes):
        for name, qs in classes.items():
            if not qs:
                continue
            results.setdefault((name, "project"), []).append(timed(lambda q: index.search("s", q, k=K), qs))
            results.setdefault((name, "raw"), []).append(timed(lambda q: raw_search(raw, q, K), qs))
    index.close()
    raw.close()
    load1 = os.getloadavg()[0]
    print(machine_line())
    print(f"load {load0:.2f} -> {load1:.2f}; one session of {rows:,} events; {len(timing_q)} LoCoMo questions: "
          f"{len(classes['rare'])} rare (every word in < {RARE:.0%} of rows), {len(classes['common'])} common; top-{K}, {args.passes} passes")
    print()
    print("| class | system | p50 ms (min / median / max) | p95 ms (min / median / max) |")
    print("|---|---|---|---|")
    for (name, system), rs in results.items():
        p50, p95 = [a for a, _ in rs], [b for _, b in rs]
        print(f"| {name} ({len(classes[name])}) | {system} | {min(p50):.1f} / {statistics.median(p50):.1f} / {max(p50):.1f} | "
              f"{min(p95):.1f} / {statistics.median(p95):.1f} / {max(p95):.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
