"""Replay a receipt's ranking at scale (issue 34; docs/FORMAT.md §24), beside a fresh index build of the same prefix.

    python bench/replay.py [--size 100000] [--turns 3] [--runs 3]

One session of --size events (LoCoMo sentences recombined, as bench/growth.py builds them), indexed once beforehand
(a prepared state: `ledger import` indexes it too), then --turns turns with LoCoMo questions through the engine
(offline stand-in), each writing a receipt with its ranking. Then, for each receipt, --runs times, in this process:

  build prefix     the raw baseline: an index of the session's first `indexed` events built afresh (Index.index_session
                   over a copy of those lines made beforehand, not timed) — what the goal compares with
  replay           chat.replay.replay: copy the lines, index them, fold the control state, re-run the question, compare
                   (the CLI adds start-up and the receipt's verification against the ledger)
  as-of now        chat.replay.search_as_of at the ledger's current size: the deployment's own index is reused
  live retrieve    the same question through the live index (chat.retrieve), the cost of a turn's search

Prints a markdown table (min / median / max ms), the replay ÷ build ratio, the load and the machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.append(str(ROOT))
if sys.path and Path(sys.path[0]).resolve() == HERE:
    sys.path.pop(0)  # the script's folder would shadow the `bundle` package with bench/bundle.py

SESSION = "s"


def ms(f) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    out = f()
    return (time.perf_counter() - t) * 1000, out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", type=int, default=100_000)
    p.add_argument("--turns", type=int, default=3)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args(argv)

    from bench.common import machine
    from bench.growth import locomo
    from bench.index_build import build_ledger
    from chat.citing import Cites
    from chat.engine import Engine
    from chat.llm import LLM
    from chat.replay import REPLAYED, replay, search_as_of
    from chat.retrieve import retrieve
    from control.revocation import current
    from receipts.body import parse_receipt
    from storage.files.ledger.store import Ledger
    from storage.files.retrieval.db import Index

    work = Path(tempfile.mkdtemp(prefix="mre-bench-replay-"))
    try:
        data = work / "data"
        t = time.perf_counter()
        build_ledger(data, args.size, 7)
        e = Engine(data, llm=LLM(api_key=""))
        e.index.index_session(SESSION)
        print(f"prepared: {args.size:,} events imported and indexed in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        _, _, questions = locomo()
        receipts = [parse_receipt(e.turn(SESSION, q, k=8).receipt_path.read_bytes()) for q in questions[: args.turns]]
        rows: dict[str, list[float]] = {"build prefix": [], "replay": [], "as-of now": [], "live retrieve": []}
        verdicts = []
        for r in receipts:
            indexed = r.signed_body["ranking"]["indexed"]
            question = e.ledger.read_events(SESSION, [r.signed_body["query"]["event"]["seq"]])[0].text
            for _ in range(args.runs):
                with tempfile.TemporaryDirectory(dir=work) as tmp:
                    copy = Ledger(Path(tmp), record_tails=False)
                    path = copy.log_path(SESSION)
                    path.parent.mkdir(parents=True)
                    with e.ledger.stored_lines(SESSION, indexed) as (_n, chunks), open(path, "wb") as out:
                        for c in chunks:
                            out.write(c)
                    idx = Index(tmp, copy)
                    took, _ = ms(lambda idx=idx: idx.index_session(SESSION))  # type: ignore[misc]
                    idx.close()
                    copy.close()
                rows["build prefix"].append(took)
                took, got = ms(lambda r=r: replay(e.stores, Cites(e.stores), r))  # type: ignore[misc]
                rows["replay"].append(took)
                verdicts.append(got.verdict)  # type: ignore[attr-defined]
                now = e.ledger.head(SESSION)[0]
                rows["as-of now"].append(ms(lambda q=question, now=now: search_as_of(e.stores, Cites(e.stores), SESSION, q, 8, now))[0])  # type: ignore[misc]
                state = current(e.ledger, SESSION)
                rows["live retrieve"].append(ms(lambda q=question, st=state: retrieve(e.index, e.cites, st, SESSION, q, 8, []))[0])  # type: ignore[misc]
        e.close()
        load = os.getloadavg()
        print(f"\n{args.size:,} events, {len(receipts)} receipts × {args.runs} runs; verdicts: "
              f"{sum(v == REPLAYED for v in verdicts)}/{len(verdicts)} replayed; load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
        print(f"machine: {machine()}\n")
        print("| step | min ms | median ms | max ms |\n|---|---:|---:|---:|")
        for name, xs in rows.items():
            print(f"| {name} | {min(xs):,.1f} | {statistics.median(xs):,.1f} | {max(xs):,.1f} |")
        ratio = [a / b for a, b in zip(rows["replay"], rows["build prefix"], strict=True)]
        print(f"\nreplay ÷ build prefix (same run, pairwise): min {min(ratio):.2f}×, median {statistics.median(ratio):.2f}×, max {max(ratio):.2f}×")
        return 0 if all(v == REPLAYED for v in verdicts) else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
