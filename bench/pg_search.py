"""Search on PostgreSQL (storage.pg.index.PgIndex) beside the SQLite index, on the same ledgers.

    python bench/pg_search.py [--recall dev|test|both|none] [--sessions 100] [--events 10000] [--queries 300]
                              [--url postgresql://...] [--out DIR]

1. LoCoMo evidence recall at K = 5, 10, 25, 50 on both backends (bench/locomo.py's import and
   questions; one ledger per split, both indexes over it), and how many top-50 lists differ.
2. Search p50 / p95 (ms, top-8, LoCoMo questions) at --sessions x --events (default 100 x 10k, as
   bench/search.py's 100-session case: the same recombined LoCoMo sentences, one session searched),
   both backends on the same ledger, the queries interleaved (SQLite, PostgreSQL, SQLite, ...), and
   each index's build time.

Without --url a throwaway cluster is started in a temporary folder (tests/pg_support.py; fsync off:
the build's durability is not what is measured) and removed after. The ledger of case 2 is kept
in --out (default bench/out/, git-ignored) and reused; the indexes are built on every run.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import LOCOMO, import_lines, load, machine, questions, recall, turns  # noqa: E402
from bench.locomo import CATEGORIES, KS, SPLITS  # noqa: E402
from bench.search import Recombiner, pct  # noqa: E402
from retrieval import SearchResponse  # noqa: E402
from storage.files.ledger.store import Ledger  # noqa: E402
from storage.files.retrieval.db import Index
from storage.pg import sql as pg_sql  # noqa: E402
from storage.pg.connect import Database  # noqa: E402
from storage.pg.index import PgIndex  # noqa: E402

K = 8


@contextlib.contextmanager
def server(url: str | None) -> Iterator[str]:
    if url is not None:
        yield url
        return
    from tests import pg_support

    with pg_support.started_server(settings={"fsync": "off", "synchronous_commit": "off"}) as srv:
        yield pg_support.fresh_database(srv)


def empty(db: Database) -> None:
    with db.transaction() as conn:
        conn.execute(pg_sql.SEARCH_TRUNCATE)


def recall_split(tmp: Path, split: str, data: list[dict], db: Database) -> tuple[str, list[str]]:
    ledger = Ledger(tmp / split)
    lite = Index(tmp / split, ledger)
    empty(db)
    pg = PgIndex(db, ledger)
    scores: dict[str, dict[tuple[str, int], list[float]]] = {"SQLite FTS5": defaultdict(list), "PostgreSQL": defaultdict(list)}
    differ: list[str] = []
    n = 0
    for i in SPLITS[split]:
        conv = data[i]
        ts = turns(conv)
        session = f"locomo-{i}"
        ledger.import_jsonl(session, import_lines(ts))
        lite.index_session(session)
        pg.index_session(session)
        dia = [t.dia_id for t in ts]
        for q in questions(conv, i):
            n += 1
            a, b = lite.search(session, q.question, 50), pg.search(session, q.question, 50)
            if [h.seq for h in a.results] != [h.seq for h in b.results]:
                differ.append(f"{session}: {q.question!r}")
            labels = ("all", f"{q.category} {CATEGORIES[q.category]}")
            for name, resp in (("SQLite FTS5", a), ("PostgreSQL", b)):
                ids = [dia[h.seq] for h in resp.results]
                for k in KS:
                    for label in labels:
                        scores[name][(label, k)].append(recall(q.gold, ids[:k]))
    lite.close()
    ledger.close()
    lines = [f"**{split} split (conversations {SPLITS[split].start}-{SPLITS[split].stop - 1}), {n} questions**", ""]
    lines.append("| backend | category | n | " + " | ".join(f"R@{k}" for k in KS) + " |")
    lines.append("|---|---|---:|" + "---:|" * len(KS))
    for name, by in scores.items():
        for label in ["all"] + [f"{c} {nm}" for c, nm in CATEGORIES.items()]:
            vals = [by.get((label, k), []) for k in KS]
            if vals[0]:
                cells = " | ".join(f"{100 * sum(v) / len(v):.1f}" for v in vals)
                lines.append(f"| {name} | {label} | {len(vals[0])} | {cells} |")
    lines.append(f"\ntop-50 lists that differ (seqs or order): {len(differ)} of {n}")
    return "\n".join(lines), differ


def timed_pair(fns: dict[str, Callable[[str], SearchResponse]], queries: list[str]) -> dict[str, tuple[float, float]]:
    for q in queries[:10]:
        for fn in fns.values():
            fn(q)
    times: dict[str, list[float]] = {name: [] for name in fns}
    for q in queries:
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn(q)
            times[name].append((time.perf_counter() - t0) * 1000)
    return {name: (pct(t, 0.5), pct(t, 0.95)) for name, t in times.items()}


def latency(out: Path, n_sessions: int, n_events: int, queries: list[str], data: list[dict], db: Database, seed: int) -> str:
    root = out / f"pg-multi-{n_sessions}x{n_events}-s{seed}"
    done = root / "ledger.done"
    if not done.is_file():
        import shutil

        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        print(f"writing {n_sessions} x {n_events:,} events ...", file=sys.stderr)
        rec = Recombiner(data, seed + 1)
        led = Ledger(root)
        for i in range(n_sessions):
            led.append_many(f"s{i:03d}", rec.messages(n_events))
        led.close()
        done.write_text("ok")
    (root / "index.sqlite").unlink(missing_ok=True)
    for extra in root.glob("index.sqlite-*"):
        extra.unlink()
    ledger = Ledger(root)
    t0 = time.perf_counter()
    lite = Index(root, ledger)
    lite.catch_up()
    t_lite = time.perf_counter() - t0
    empty(db)
    t0 = time.perf_counter()
    pg = PgIndex(db, ledger)
    pg.catch_up()
    t_pg = time.perf_counter() - t0
    with db.connection() as conn:
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE search_events")
        conn.execute("VACUUM ANALYZE search_sessions")
        size = conn.execute("SELECT pg_total_relation_size('search_events')").fetchone()
        conn.autocommit = False
    target = f"s{n_sessions // 2:03d}"
    same = sum(
        [h.seq for h in lite.search(target, q, K).results] == [h.seq for h in pg.search(target, q, K).results] for q in queries
    )
    r = timed_pair({"SQLite": lambda q: lite.search(target, q, K), "PostgreSQL": lambda q: pg.search(target, q, K)}, queries)
    lite.close()
    ledger.close()
    lines = [
        f"**{n_sessions} sessions x {n_events:,} events, one searched, top-{K}, {len(queries)} LoCoMo questions**",
        "",
        "| backend | p50 ms | p95 ms | index build s |",
        "|---|---:|---:|---:|",
        f"| SQLite FTS5 | {r['SQLite'][0]:.1f} | {r['SQLite'][1]:.1f} | {t_lite:.1f} |",
        f"| PostgreSQL | {r['PostgreSQL'][0]:.1f} | {r['PostgreSQL'][1]:.1f} | {t_pg:.1f} |",
        "",
        f"PostgreSQL p95 / SQLite p95: {r['PostgreSQL'][1] / r['SQLite'][1]:.2f}; same top-{K} seqs for {same} of "
        f"{len(queries)} queries; search_events with its indexes: {int(size[0]) / 1e6:.0f} MB" if size else "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default=None, help="an empty PostgreSQL database (default: a throwaway cluster)")
    p.add_argument("--recall", choices=["dev", "test", "both", "none"], default="dev")
    p.add_argument("--sessions", type=int, default=100)
    p.add_argument("--events", type=int, default=10_000, help="events per session (0: no latency case)")
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--data", type=Path, default=LOCOMO)
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out")
    args = p.parse_args(argv)
    data = load(args.data)
    started = time.perf_counter()
    print(f"Search on PostgreSQL beside SQLite — {machine()}\n")
    with server(args.url) as url, Database(url) as db:
        with db.connection() as conn:
            version = conn.execute("SHOW server_version").fetchone()
        print(f"PostgreSQL {version[0] if version else '?'}\n")
        splits = {"dev": ["dev"], "test": ["test"], "both": ["dev", "test"], "none": []}[args.recall]
        with tempfile.TemporaryDirectory(prefix="pg-search-") as tmp:
            for split in splits:
                text, differ = recall_split(Path(tmp), split, data, db)
                print(text)
                for d in differ[:10]:
                    print(f"- {d}")
                print()
        if args.events > 0:
            all_q = [q for i, c in enumerate(data) for q in questions(c, i)]
            qs = [q.question for q in random.Random(args.seed).sample(all_q, min(args.queries, len(all_q)))]
            args.out.mkdir(parents=True, exist_ok=True)
            print(latency(args.out, args.sessions, args.events, qs, data, db, args.seed))
    print(f"\n_{time.perf_counter() - started:.1f}s_")
    return 0


if __name__ == "__main__":
    sys.exit(main())
