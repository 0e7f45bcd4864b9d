"""What bounds the exact search of one large session (issue 30): equality with the exhaustive top-K, and the work.

    python bench/search_bound.py [--size 1000000] [--queries 100] [--seed 7] [--out DIR] [--no-exhaustive]

Data and questions: bench/search_rare.py's (the same seeded session in --out, reused; the same LoCoMo questions, the
same rare / common classes). For every question:
  - equality: the default search (the exact score bound, retrieval.bounded) against the exhaustive one (every term in
    one OR query, IndexConfig(prune_min_events=10**9)): the same seqs, bm25 and scores, in the same order;
  - the work the bound leaves: the FTS5 statements it ran, the rows each one scored (bm25() runs once per matching
    row) and the doclist rows bm25()'s set-up counted (it counts every phrase's rows once per statement, for the idf);
  - the floor for this bound: with the final K-th score known in advance (an oracle), the fewest rarest terms whose
    rest's bound is below it, and the rows holding one of them: no run of this method scores fewer.
Then the cost of one scored row and of one counted doclist row, fitted over the statements (CPU time, least squares),
so the search's time is stated as rows x µs.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench._machine import machine_line  # noqa: E402
from bench.common import LOCOMO, RAW_TOKEN_RE, load, questions  # noqa: E402
from bench.search import Dataset, pct  # noqa: E402
from retrieval import IndexConfig, bounded, sql  # noqa: E402
from retrieval.text import build_query, content_terms, or_query  # noqa: E402
from storage.files.ledger.store import Ledger  # noqa: E402
from storage.files.retrieval.db import Index  # noqa: E402

K = 8
RARE = 0.10


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out")
    ap.add_argument("--no-exhaustive", action="store_true", help="skip the equality check (the slow part)")
    args = ap.parse_args(argv)
    ds = Dataset(args.out, f"single-{args.size}-s{args.seed}")
    if not ds.built():
        print(f"{ds.dir}: not built; run bench/search_rare.py --size {args.size} --out {args.out} first", file=sys.stderr)
        return 2
    data = load(LOCOMO)
    all_q = [q for i, c in enumerate(data) for q in questions(c, i)]
    qs = [q.question for q in random.Random(args.seed).sample(all_q, min(args.queries, len(all_q)))]
    raw = sqlite3.connect(ds.raw_path)
    n_raw = int(raw.execute("SELECT count(*) FROM raw").fetchone()[0])
    share: dict[str, float] = {}

    def rare(q: str) -> bool:
        words = {w.lower() for w in RAW_TOKEN_RE.findall(q) if content_terms(w)}
        for w in words - share.keys():
            share[w] = int(raw.execute("SELECT count(*) FROM raw WHERE raw MATCH ?", (f'"{w}"',)).fetchone()[0]) / n_raw
        return max((share[w] for w in words), default=0.0) < RARE

    load0 = os.getloadavg()[0]
    index = Index(ds.dir, Ledger(ds.dir, record_tails=False))
    full = Index(ds.dir, Ledger(ds.dir, record_tails=False), config=IndexConfig(prune_min_events=10**9))
    conn = index._reader()
    counts: dict[str, int] = {}

    def count(match: str) -> int:
        if match not in counts:
            counts[match] = int(conn.execute(sql.count_sql(1), (match,)).fetchone()[0])
        return counts[match]

    statements: list[tuple[int, int, float]] = []  # (rows scored, doclist rows counted, CPU ms)
    log: list[str] = []
    real = index._read_fresh

    def spy(stmt: str, params: dict[str, Any]) -> list[Any]:
        t = time.process_time()
        rows = real(stmt, params)
        cpu = (time.process_time() - t) * 1000
        log.append(str(params["match"]))
        statements.append((count(str(params["match"])), sum(count(p) for p in re.findall(r'"[^"]*"', str(params["match"]))), cpu))
        return rows

    index._read_fresh = spy  # type: ignore[method-assign]
    n_rows = bounded.varints(bytes(conn.execute("SELECT block FROM events_fts_1_data WHERE id = 1").fetchone()[0]))[0]
    per: dict[str, list[tuple[int, int, int, int, tuple[bool, bool]]]] = {"rare": [], "common": []}
    index.search("s", qs[0], K)
    for q in qs:
        log.clear()
        got = [(h.seq, h.bm25, h.score) for h in index.search("s", q, K).results]
        scored = sum(count(m) for m in log)
        setup = sum(count(p) for m in log for p in re.findall(r'"[^"]*"', m))
        terms = build_query(q, max_terms=None).terms
        hits = {t: count(f'"{t}"') for t in terms}
        order = bounded.rarest_first(terms, hits)
        pool = full._read_fresh(sql.search_sql(1, text_weight=1.0, context_weight=0.3), {"match": or_query(terms), "limit": 40})
        theta = -float(pool[-1][8]) if len(pool) == 40 else 0.0
        m = 1
        while m < len(order) and bounded.bound(n_rows, hits, order[m:]) >= theta:
            m += 1
        oracle = count(or_query(order[:m])) if terms else 0
        want = [] if args.no_exhaustive else [(h.seq, h.bm25, h.score) for h in full.search("s", q, K).results]
        same = (got == want, [(s, round(b, 9), round(c, 9)) for s, b, c in got] == [(s, round(b, 9), round(c, 9)) for s, b, c in want])
        per["rare" if rare(q) else "common"].append((scored, setup, oracle, count(or_query(terms)) if terms else 0, same))
    # cost per scored row and per counted doclist row: least squares over the statements (no intercept)
    a = sum(s * s for s, _, _ in statements)
    b = sum(s * u for s, u, _ in statements)
    c = sum(u * u for _, u, _ in statements)
    y1 = sum(s * t for s, _, t in statements)
    y2 = sum(u * t for _, u, t in statements)
    det = a * c - b * b
    us_row = (y1 * c - y2 * b) / det * 1000 if det else float("nan")
    ns_doc = (a * y2 - b * y1) / det * 1e6 if det else float("nan")
    print(machine_line())
    print(f"load {load0:.2f} -> {os.getloadavg()[0]:.2f}; {n_rows:,} rows; {len(qs)} questions; top-{K} (pool 40); "
          f"{len(statements)} statements; fitted CPU cost: {us_row:.2f} µs per scored row, {ns_doc:.1f} ns per counted doclist row")
    print()
    print("| class | same as exhaustive (seqs, order, bm25 and score to 9 decimals) | rows scored p50 / p95 | doclist rows counted p50 / p95 | oracle floor: rows holding an essential term p50 / p95 | rows matching any term p50 / p95 |")
    print("|---|---|---|---|---|---|")
    for name, xs in per.items():
        if not xs:
            continue
        col = [[x[i] for x in xs] for i in range(4)]
        cells = " | ".join(f"{pct(v, 0.5):,} / {pct(v, 0.95):,}" for v in col)
        same = "not checked" if args.no_exhaustive else (
            f"{sum(x[4][1] for x in xs)} of {len(xs)} ({sum(x[4][0] for x in xs)} to the last bit of bm25)"
        )
        print(f"| {name} ({len(xs)}) | {same} | {cells} |")
    print()
    print(f"median CPU of a statement: {statistics.median(t for _, _, t in statements):.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
