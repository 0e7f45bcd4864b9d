"""The anchor a user would otherwise pick (issue 30): tantivy's top-8 beside raw FTS5 on the same texts and queries.

    python bench/tantivy_anchor.py [--events 1000000] [--queries 100] [--passes 3]

Bench only: tantivy (PyPI `tantivy`, Rust via PyO3) is not a requirement of the app. Install it with
`pip install -r bench/requirements-anchor.txt`; without it this script says so in one line and exits 0.

Texts: bench/search.py's one-session data (LoCoMo sentences recombined, the same seed, so the same N texts, with the
10 LoCoMo conversations embedded at 1M), held in memory here. Queries: the same seeded sample of LoCoMo questions.
- raw FTS5: `CREATE VIRTUAL TABLE raw USING fts5(text, tokenize='porter')`, the question's words OR-ed (quoted),
  `MATCH ... ORDER BY bm25(raw) LIMIT 8` (bench/common.RawBaseline.match).
- tantivy: one text field with the `en_stem` tokenizer (lower-case + Porter stemming, as FTS5's porter), the same
  words OR-ed as term queries (`Occur.Should`) on that field, BM25, top 8; one segment after a final merge.
Each pass times every query once after 10 warm-up queries; the table prints min / median / max over the passes of
each pass's p50 and p95, and the ratio tantivy ÷ raw FTS5 of the p95 medians.
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench._machine import machine_line  # noqa: E402
from bench.common import LOCOMO, RAW_TOKEN_RE, RawBaseline, load, questions  # noqa: E402
from bench.search import timed  # noqa: E402  # the same warm-up and percentiles as bench/search.py

K = 8


def texts(n: int, seed: int) -> list[str]:
    from bench.search import Recombiner, embed_locomo

    data = load(LOCOMO)
    msgs = Recombiner(data, seed + n).messages(n)
    if n == 1_000_000:
        msgs = embed_locomo(msgs, data)
    return [m.text for m in msgs]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    try:
        import tantivy
    except ImportError:
        print("tantivy is not installed (pip install -r bench/requirements-anchor.txt): the anchor is skipped")
        return 0
    data = load(LOCOMO)
    all_q = [q for i, c in enumerate(data) for q in questions(c, i)]
    queries = [q.question for q in random.Random(args.seed).sample(all_q, min(args.queries, len(all_q)))]
    load0 = os.getloadavg()[0]
    items = texts(args.events, args.seed)
    n_texts = len(items)  # at 1M, the 5,882 LoCoMo turns embedded too (bench/search.py)

    with tempfile.TemporaryDirectory(prefix="tantivy-anchor-") as tmp:
        t0 = time.perf_counter()
        raw = sqlite3.connect(Path(tmp) / "raw.sqlite")
        raw.execute("CREATE VIRTUAL TABLE raw USING fts5(text, tokenize='porter')")
        with raw:
            raw.executemany("INSERT INTO raw (rowid, text) VALUES (?, ?)", enumerate(items, start=1))
        raw_build = time.perf_counter() - t0

        t0 = time.perf_counter()
        sb = tantivy.SchemaBuilder()
        sb.add_text_field("text", stored=False, tokenizer_name="en_stem")
        sb.add_integer_field("seq", stored=True, fast=True)
        schema = sb.build()
        tdir = Path(tmp) / "tantivy"
        tdir.mkdir()
        index = tantivy.Index(schema, path=str(tdir))
        writer = index.writer(heap_size=256 * 1024 * 1024, num_threads=1)
        for i, text in enumerate(items, start=1):
            writer.add_document(tantivy.Document(text=text, seq=i))
        writer.commit()
        writer.wait_merging_threads()
        index.reload()
        tantivy_build = time.perf_counter() - t0
        del items
        searcher = index.searcher()

        def raw_top(q: str) -> list[int]:
            m = RawBaseline.match(q)
            if m is None:
                return []
            return [r[0] for r in raw.execute("SELECT rowid FROM raw WHERE raw MATCH ? ORDER BY bm25(raw) LIMIT ?", (m, K))]

        def tantivy_top(q: str) -> list[int]:
            words = list(dict.fromkeys(w.lower() for w in RAW_TOKEN_RE.findall(q)))
            if not words:
                return []
            # the same words, each analysed by the field's tokenizer (en_stem), OR-ed
            parts = [(tantivy.Occur.Should, index.parse_query(f'"{w}"', ["text"])) for w in words]
            hits = searcher.search(tantivy.Query.boolean_query(parts), K).hits
            return [searcher.doc(addr)["seq"][0] for _score, addr in hits]

        runs: dict[str, list[tuple[float, float]]] = {"raw FTS5 (porter, bm25)": [], "tantivy (en_stem, BM25)": []}
        for _ in range(args.passes):
            runs["raw FTS5 (porter, bm25)"].append(timed(raw_top, queries))
            runs["tantivy (en_stem, BM25)"].append(timed(tantivy_top, queries))
        overlap = statistics.mean(len(set(raw_top(q)) & set(tantivy_top(q))) / K for q in queries)
        raw.close()
    load1 = os.getloadavg()[0]

    print(machine_line())
    print(f"load {load0:.2f} -> {load1:.2f}; {n_texts:,} texts (bench/search.py's one session, seed {args.seed}), "
          f"{len(queries)} LoCoMo questions, top-{K}, {args.passes} passes; {getattr(tantivy, '__version__', 'tantivy ?')}")
    print()
    print("| engine | build s | p50 ms (min / median / max) | p95 ms (min / median / max) |")
    print("|---|---|---|---|")
    builds = {"raw FTS5 (porter, bm25)": raw_build, "tantivy (en_stem, BM25)": tantivy_build}
    for name, rs in runs.items():
        p50 = [a for a, _ in rs]
        p95 = [b for _, b in rs]
        print(f"| {name} | {builds[name]:.1f} | {min(p50):.2f} / {statistics.median(p50):.2f} / {max(p50):.2f} | "
              f"{min(p95):.2f} / {statistics.median(p95):.2f} / {max(p95):.2f} |")
    ratio = statistics.median(b for _, b in runs["tantivy (en_stem, BM25)"]) / statistics.median(b for _, b in runs["raw FTS5 (porter, bm25)"])
    print()
    print(f"tantivy p95 / raw FTS5 p95 (medians): {ratio:.3f}x; top-8 overlap with raw FTS5: {overlap:.0%} (the two BM25s differ in IDF and length normalisation)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
