"""What the search statement's second bm25() costs, and whether computing it only for the kept rows pays.

    python bench/search_own_bm25.py [--out DIR] [--rounds N]

`sql.search_sql` computes, for every row matching the query and before its LIMIT, both the
ranking bm25 (text 1.0, context 0.3) and `bm25(t, 1.0, 0.0)` over the text column alone (0 when
a hit matched only through its neighbours: `Hit.context_only`). FTS5 only lets an auxiliary
function run inside a query on the FTS table, so the two ways to compute it for the kept rows
only are measured here against the statement as it is, on the same data and match expressions
as bench/search_latency.py (built there, in the same --out), interleaved query by query:

- now: `sql.search_sql` as it is;
- floor: the same with the second bm25 dropped (wrong answers: what any rewrite could save at most);
- rank: FTS5's own sort, `... AND rank MATCH 'bm25(1.0, 0.3)' ORDER BY rank LIMIT n`, whose
  select-list functions run for the returned rows only;
- two statements: the floor, then the kept rows that match in their text (`text : (...)`,
  `rowid IN (kept)`).

Each variant must give the statement's rows and context-only flags (checked first). Times are the
SQL alone (no ranking in Python), in ms.
"""

from __future__ import annotations

import argparse
import random
import re
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE.parent)]

from bench.common import load, machine, questions  # noqa: E402
from bench.search_latency import K, build, pct  # noqa: E402
from retrieval import IndexConfig, sql  # noqa: E402
from storage.files.retrieval.db import (  # noqa: E402
    Index,
    candidates_for,  # noqa: E402
)

Row = tuple[int, bool]  # (seq, matched in its own text)
Variant = Callable[[sqlite3.Connection, int, str, int], list[Row]]
OWN = re.compile(r", bm25\((events_fts_\d+), 1\.0, 0\.0\) AS own")


def statement(num: int, cfg: IndexConfig) -> str:
    return sql.search_sql(num, text_weight=cfg.text_weight, context_weight=cfg.context_weight)


def now(cfg: IndexConfig) -> Variant:
    def run(conn: sqlite3.Connection, num: int, match: str, limit: int) -> list[Row]:
        rows = conn.execute(statement(num, cfg), {"match": match, "limit": limit}).fetchall()
        return [(r[0], r[10] != 0.0) for r in rows]

    return run


def floor(cfg: IndexConfig) -> Variant:
    def run(conn: sqlite3.Connection, num: int, match: str, limit: int) -> list[Row]:
        stmt = OWN.sub(", 1.0 AS own", statement(num, cfg))
        return [(r[0], True) for r in conn.execute(stmt, {"match": match, "limit": limit})]

    return run


def rank(cfg: IndexConfig) -> Variant:
    def run(conn: sqlite3.Connection, num: int, match: str, limit: int) -> list[Row]:
        t = sql.fts_table(num)
        stmt = statement(num, cfg)
        ranked = re.search(rf"bm25\({t}, ([0-9., ]+)\) AS bm25", stmt)
        assert ranked is not None, stmt
        stmt = (
            stmt.replace(ranked.group(0), "rank AS bm25")
            .replace(f"WHERE {t} MATCH :match", f"WHERE {t} MATCH :match AND rank MATCH 'bm25({ranked.group(1)})'")
            .replace("ORDER BY bm25 LIMIT", "ORDER BY rank LIMIT")
        )
        return [(r[0], r[10] != 0.0) for r in conn.execute(stmt, {"match": match, "limit": limit})]

    return run


def two_statements(cfg: IndexConfig) -> Variant:
    def run(conn: sqlite3.Connection, num: int, match: str, limit: int) -> list[Row]:
        stmt = OWN.sub(", 1.0 AS own", statement(num, cfg))
        seqs = [r[0] for r in conn.execute(stmt, {"match": match, "limit": limit})]
        if not seqs:
            return []
        rids = [sql.row_id(num, s) for s in seqs]
        own = {int(r[0]) for r in conn.execute(sql.match_in_rows_sql(num, len(rids)), (f"text : ({match})", *rids))}
        return [(s, sql.row_id(num, s) in own) for s in seqs]

    return run


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=_HERE / "out" / "latency")
    p.add_argument("--rounds", type=int, default=3, help="times each query set is run per variant (after one check)")
    args = p.parse_args(argv)
    data = load()
    build(args.out, data)
    index = Index(args.out)
    index.catch_up()
    cfg = index.config
    locomo = [(f"locomo-{i}", q.question) for i in range(5) for q in questions(data[i], i)]
    synth = [("synthetic-10k", q) for _, q in random.Random(16).sample(locomo, 300)]
    conn = sqlite3.connect(f"file:{args.out / 'index.sqlite'}?mode=ro", uri=True)
    nums = dict(conn.execute("SELECT session, num FROM watermarks"))
    limit = candidates_for(K)
    cases: dict[str, list[tuple[int, str]]] = {}
    for label, queries in (("LoCoMo dev sessions, 999 questions", locomo), ("one session of 10,000, 300 questions", synth)):
        # the FTS5 expression each search ran (its rarest-first terms), as Index.search reports it
        found = [(int(nums[s]), index.search(s, q, K).match) for s, q in queries]
        cases[label] = [(n, m) for n, m in found if m is not None]
    index.close()
    variants: dict[str, Variant] = {
        "now (bm25 twice, every matching row)": now(cfg),
        "floor (second bm25 dropped; wrong answers)": floor(cfg),
        "rank (FTS5 ORDER BY rank)": rank(cfg),
        "two statements (own-text match of kept rows)": two_statements(cfg),
    }
    base = variants["now (bm25 twice, every matching row)"]
    for name, run in variants.items():
        if name.startswith("floor"):
            continue
        wrong = sum(run(conn, n, m, limit) != base(conn, n, m, limit) for case in cases.values() for n, m in case)
        if wrong:
            print(f"{name}: {wrong} queries answered differently from the statement", file=sys.stderr)
            return 1
    times: dict[tuple[str, str], list[float]] = {(v, c): [] for v in variants for c in cases}
    for _ in range(args.rounds):
        for label, case in cases.items():
            for n, m in case:
                for name, run in variants.items():  # interleaved: the machine's load falls on every variant alike
                    t0 = time.perf_counter()
                    run(conn, n, m, limit)
                    times[(name, label)].append((time.perf_counter() - t0) * 1000)
    conn.close()
    print(f"search SQL alone, K = {K}, LIMIT {limit}, {args.rounds} rounds — {machine()}")
    print("| variant | case | p50 (ms) | p95 (ms) | mean (ms) | n |")
    print("|---|---|---:|---:|---:|---:|")
    for (name, label), ts in times.items():
        print(f"| {name} | {label} | {statistics.median(ts):.2f} | {pct(ts, 0.95):.2f} | {statistics.fmean(ts):.2f} | {len(ts)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
