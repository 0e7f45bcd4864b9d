"""Does a smaller lexical pool give the hybrid search the same fused top K? (issue 35's cost at 100k, part 3)

    python bench/semantic_pool.py [--pools 40,100,150] [--split dev] [--cache DIR]

The hybrid search reads the lexical top LEXICAL_POOL (200) rows from FTS5 where a lexical search reads
candidates_for(K) (40 at K = 10); fusion (retrieval/semantic.py FUSION) then ranks them with the dense top 25. This
counts, over LoCoMo's dev conversations (each one session, embedded with the shipped model), the (question, K) whose
fused top K (seqs, in order) differs when the SQL reads only P rows, for each P of --pools: the fusion itself is
unchanged (its own lexical_pool cut is 200). A pool is only worth proposing where it differs nowhere; a change to
the shipped pool still needs dev recall figures (bench/semantic.py, bench/fusion_sweep.py) before it ships.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import import_lines, load, machine, questions, turns  # noqa: E402
from bench.locomo import KS, SPLITS  # noqa: E402
from storage.common import semantic  # noqa: E402
from storage.common.retrieval import searcher  # noqa: E402
from storage.files.ledger.store import Ledger  # noqa: E402
from storage.files.retrieval.db import Index  # noqa: E402


def compare(d: Path, data: list[dict], convs: range, pools: list[int]) -> list[str]:
    ledger = Ledger(d)
    hybrid = Index(d, ledger)
    hybrid.use_semantic(semantic.load(threads=0))
    shipped = searcher.LEXICAL_POOL
    differ = {p: 0 for p in pools}
    total = 0
    try:
        for i in convs:
            session = f"locomo-{i}"
            if not ledger.exists(session):
                ledger.import_jsonl(session, import_lines(turns(data[i])))
            hybrid.index_session(session)
            hybrid.embed_pending(session)
            for q in questions(data[i], i):
                for k in KS:
                    base = [h.seq for h in hybrid.search(session, q.question, k=k).results]
                    total += 1
                    for p in pools:
                        searcher.LEXICAL_POOL = p
                        try:
                            got = [h.seq for h in hybrid.search(session, q.question, k=k).results]
                        finally:
                            searcher.LEXICAL_POOL = shipped
                        differ[p] += got != base
    finally:
        hybrid.close()
    lines = [f"LoCoMo conversations {convs.start}-{convs.stop - 1}, {total} (question, K) with K in {KS}:", "",
             f"| SQL pool (shipped {shipped}) | fused top K differs | share |", "| ---: | ---: | ---: |"]
    lines += [f"| {p} | {differ[p]} | {100 * differ[p] / max(total, 1):.1f}% |" for p in pools]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pools", default="40,100,150")
    ap.add_argument("--split", choices=list(SPLITS), default="dev")
    ap.add_argument("--cache", type=Path, default=None, help="keep the ledgers, index and vectors in DIR")
    args = ap.parse_args(argv)
    pools = [int(p) for p in args.pools.split(",")]
    print(machine())
    data = load()
    if args.cache is not None:
        args.cache.mkdir(parents=True, exist_ok=True)
        print("\n".join(compare(args.cache, data, SPLITS[args.split], pools)))
    else:
        with tempfile.TemporaryDirectory(prefix="semantic-pool-") as tmp:
            print("\n".join(compare(Path(tmp), data, SPLITS[args.split], pools)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
