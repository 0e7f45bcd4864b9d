"""The first turn after a start (issue 30): a fresh process, the offline stand-in, a session of N events.

    python bench/first_turn.py --events 100000 [--every 8] [--data DIR] [--runs 3] [--tree PATH ...]

Prepares once (kept in --data, reused when it is there: a prepared state) a session of N events through the ledger's
import path and its index: user statements, and one event in `--every` a reply the offline stand-in wrote (its meta:
kind chat, a receipt id, provider offline), quoting four words of a statement (short, so they rank near the top), as an offline app's session holds them
(--every 8: a pile, more than two searches' worth match a question; --every 2000: a few, as in a session a model
mostly answered).
Then per run and per tree (alternating, same sitting) a fresh `python` process opens an Engine on the data directory and
times its first turn and its second, and inside each the stand-in rule (chat.stand_ins.StandIns.left_out, the searches
it runs included) and the searches alone (Index.search). Each turn appends two events to the prepared session (a few
per run on N: noise). Prints min / median / max over the runs per tree.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parents[1]
WORDS = (
    "cat Miso Lisbon tram sister wedding Porto cello nurse hospital vacuum bed painting camping support group adoption "
    "friends mountains beach guitar novel recipe garden marathon river bakery violin bicycle museum kitchen harbour"
).split()
QUESTIONS = ["Tell me about Miso the cat", "When is the wedding in Porto?"]
K = 8


def prepare(data: Path, n: int, every: int) -> None:
    sys.path.insert(0, str(HERE))
    from chat.engine import Engine
    from chat.llm import LLM
    from storage.files.ledger.store import Ledger

    lines = []
    for i in range(n):
        t = f"turn {i}: " + " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(8 + i % 12))
        if i % 2 == 0:
            lines.append(orjson.dumps({"role": "user", "text": t, "meta": {}}))
        elif i % every == 1:
            quoted = " ".join(WORDS[(i * 5 + j) % len(WORDS)] for j in range(4))  # short: it ranks near the top
            quote = f"[Offline stand-in — no language model wrote this reply: bench]\n- (seq {i - 1}, user) {quoted}"
            meta = {"kind": "chat", "receipt_id": f"rcpt_{i:032x}", "provider": "offline", "model": "offline-stand-in"}
            lines.append(orjson.dumps({"role": "assistant", "text": quote, "meta": meta}))
        else:
            lines.append(orjson.dumps({"role": "assistant", "text": t, "meta": {}}))
    Ledger(data).import_jsonl("s", [b + b"\n" for b in lines])
    eng = Engine(data, llm=LLM(api_key=""))
    try:
        eng.index.index_session("s")
    finally:
        eng.close()
    (data / "prepared.json").write_text(json.dumps({"events": n}))


def measure(data: Path) -> dict[str, Any]:
    """In this (fresh) process: the first two turns, and inside each the stand-in rule and the searches."""
    t0 = time.perf_counter()
    from chat.engine import Engine
    from chat.llm import LLM

    eng = Engine(data, llm=LLM(api_key=""))
    opened = time.perf_counter() - t0
    spent = {"search": 0.0, "rule": 0.0, "rounds": 0}
    search, left_out = eng.index.search, eng.stand_ins.left_out

    def timed_search(*a: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        try:
            return search(*a, **kw)
        finally:
            spent["search"] += time.perf_counter() - t

    def timed_left_out(session: str, run: Any, hits: Any) -> Any:
        def counted(skip: list[int]) -> Any:
            spent["rounds"] += 1
            return run(skip)

        t = time.perf_counter()
        try:
            return left_out(session, counted, hits)
        finally:
            spent["rule"] += time.perf_counter() - t

    eng.index.search = timed_search  # type: ignore[method-assign]
    eng.stand_ins.left_out = timed_left_out  # type: ignore[method-assign, assignment]
    import chat.stand_ins

    out: dict[str, Any] = {"open_ms": opened * 1000, "module": chat.stand_ins.__file__}
    try:
        for i, q in enumerate(QUESTIONS):
            spent.update(search=0.0, rule=0.0, rounds=0)
            t = time.perf_counter()
            eng.turn("s", q, k=K)
            out[f"turn{i + 1}_ms"] = (time.perf_counter() - t) * 1000
            out[f"rule{i + 1}_ms"] = spent["rule"] * 1000
            out[f"search{i + 1}_ms"] = spent["search"] * 1000
            out[f"rounds{i + 1}"] = spent["rounds"]
    finally:
        eng.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--every", type=int, default=8, help="one stand-in reply per this many events (even)")
    ap.add_argument("--tree", type=Path, action="append", default=None, help="a worktree to measure (repeatable)")
    ap.add_argument("--measure", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.measure is not None:
        print(json.dumps(measure(args.measure)))
        return 0
    data = args.data or Path(f"/tmp/first_turn_{args.events}_{args.every}")
    if not (data / "prepared.json").exists():
        t = time.perf_counter()
        prepare(data, args.events, args.every)
        print(f"prepared {data} ({args.events:,} events) in {time.perf_counter() - t:.0f} s")
    else:
        print(f"prepared state reused: {data}")
    trees = args.tree or [HERE]
    rows: dict[Path, list[dict[str, Any]]] = {t: [] for t in trees}
    for _ in range(args.runs):
        for tree in trees:
            cmd = [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(tree)!r}); sys.argv = ['x', '--measure', {str(data)!r}];"
                   f" sys.path.append({str(HERE / 'bench')!r}); import first_turn; sys.exit(first_turn.main())"]
            got = subprocess.run(cmd, capture_output=True, text=True, cwd=tree, check=True)
            row = json.loads(got.stdout.strip().splitlines()[-1])
            assert row["module"].startswith(str(tree)), row["module"]
            rows[tree].append(row)
    keys = ["turn1_ms", "rule1_ms", "search1_ms", "rounds1", "turn2_ms", "rule2_ms", "search2_ms", "rounds2"]
    print(f"{'tree':28} " + " ".join(f"{k:>18}" for k in keys))
    for tree, rs in rows.items():
        cells = []
        for k in keys:
            xs = sorted(r[k] for r in rs)
            cells.append(f"{xs[0]:.0f}/{statistics.median(xs):.0f}/{xs[-1]:.0f}")
        print(f"{str(tree)[-28:]:28} " + " ".join(f"{c:>18}" for c in cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
