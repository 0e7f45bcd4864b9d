"""Search latency (p50 / p95, ms) of whichever `retrieval` package is importable, on fixed data.

    python bench/search_latency.py [--out DIR] [--rounds N]
    PYTHONPATH=OLD python bench/search_latency.py ...   # the same, for an older retrieval/ in OLD

For a before/after in one run, extract the older package (`git archive <commit> retrieval |
tar -x -C OLD`) and alternate the two commands (the machine's load moves; alternating
spreads it over both). The data (LoCoMo dev conversations 0-4 as dated sessions, and one
session of 10,000 recombined LoCoMo sentences) is built once in --out and reused; both
versions read the same index.sqlite (same schema and indexed settings).
Queries: every dev question in its own conversation (999), and 300 seeded dev questions
in the 10k session; K = 8, as a chat turn asks.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

# The checkout goes last, not first: a `retrieval` on PYTHONPATH (an older copy) is imported before
# this checkout's. bench/ itself leaves the path (its ledger.py would shadow the ledger package).
_HERE = Path(__file__).resolve().parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE.parent)]

from bench.common import import_lines, load, machine, questions, turns  # noqa: E402
from ledger.messages import Message  # noqa: E402
from storage.files.ledger.store import Ledger  # noqa: E402

K = 8


def build(out: Path, data: list[dict]) -> None:
    from bench.search import Recombiner

    ledger = Ledger(out)
    for i in range(5):
        if not ledger.exists(f"locomo-{i}"):
            ledger.import_jsonl(f"locomo-{i}", import_lines(turns(data[i])))
    if not ledger.exists("synthetic-10k"):
        rec = Recombiner(data, seed=16)
        ledger.append_many("synthetic-10k", [Message("user", rec.text(), {}) for _ in range(10_000)])
    ledger.close()


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def main(argv: list[str] | None = None) -> int:
    import retrieval
    from storage.files.retrieval.db import Index

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out" / "latency")
    p.add_argument("--rounds", type=int, default=1, help="times each query set is run (after one warm-up)")
    args = p.parse_args(argv)
    data = load()
    build(args.out, data)
    index = Index(args.out)
    index.catch_up()
    locomo = [(f"locomo-{i}", q.question) for i in range(5) for q in questions(data[i], i)]
    synth = [("synthetic-10k", q) for _, q in random.Random(16).sample(locomo, 300)]
    print(f"retrieval from {Path(retrieval.__file__).parent} — {machine()}")
    for label, queries in (("LoCoMo dev sessions (~600 events), 999 questions", locomo), ("one session of 10,000", synth)):
        for s, q in queries[:50]:
            index.search(s, q, K)  # warm-up
        times = []
        for _ in range(args.rounds):
            for s, q in queries:
                t0 = time.perf_counter()
                index.search(s, q, K)
                times.append((time.perf_counter() - t0) * 1000)
        print(
            f"| {label} | {statistics.median(times):.2f} | {pct(times, 0.95):.2f} | {len(times)} |"
        )
    index.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
