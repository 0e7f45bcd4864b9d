"""`python -m retrieval search` on a large session, beyond the start-up of the same CLI on a 10-event one (issue 30).

    python bench/cli_search.py --data DIR [--session s] [--runs 20] [--seed 7] [--code CHECKOUT]

DIR is a data directory whose session is already indexed (bench/search_rare.py's or bench/index_build.py's; nothing is
built here but the 10-event floor). Each run, in fresh processes, alternated so load changes hit both the same:

  big        `python -m retrieval search DIR s QUESTION` (one of the seeded LoCoMo questions bench/search.py times)
  floor      the same command on a 10-event session indexed the same way (the issue's "start-up of the same CLI")
  imports    `python -c "import cli.prog_retrieval"`: the interpreter and the CLI's top-level imports only

Beyond start-up = big - floor, run by run (p50 / p95 over the runs). Also printed: the in-process search of the same
questions on the big session (Index.search, warm), so what the CLI adds beside its search is on the table.
A writer's control-state.json is left in both sessions first (as the app or a turn leaves it), so the CLI reads it.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[0] = str(ROOT)

from bench._machine import machine_line  # noqa: E402
from bench.common import LOCOMO, load, questions  # noqa: E402
from bench.search import pct  # noqa: E402

SAVE_CONTROL = "import sys; from storage.files.ledger.store import Ledger; from control.revocation import current; current(Ledger(sys.argv[1]), sys.argv[2], save=True)"


CODE = [ROOT]


def run(args: list[str]) -> float:
    env = dict(os.environ, PYTHONPATH=str(CODE[0]))
    t = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True, capture_output=True, cwd="/", env=env)
    return (time.perf_counter() - t) * 1000


def small_session(where: Path, session: str) -> Path:
    from ledger.messages import Message
    from storage.files.ledger.store import Ledger
    from storage.files.retrieval.db import Index

    led = Ledger(where)
    led.append_many(session, [Message("user" if i % 2 == 0 else "assistant", f"We went camping by the lake, day {i}.", {}) for i in range(10)])
    Index(where, Ledger(where)).index_session(session)
    return where


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--session", default="s")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--code", type=Path, default=ROOT, help="the checkout the CLI runs from (an older one for a before figure)")
    args = ap.parse_args(argv)
    CODE[0] = args.code
    data = load(LOCOMO)
    all_q = [q for i, c in enumerate(data) for q in questions(c, i)]
    qs = [q.question for q in random.Random(args.seed).sample(all_q, args.runs)]
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        small = small_session(Path(tmp), args.session)
        for d in (args.data, small):
            run(["-c", SAVE_CONTROL, str(d), args.session])
        big, floor, imports = [], [], []
        for q in qs:
            big.append(run(["-m", "retrieval", "search", str(args.data), args.session, q]))
            floor.append(run(["-m", "retrieval", "search", str(small), args.session, q]))
            imports.append(run(["-c", "import cli.prog_retrieval"]))
    from storage.files.ledger.store import Ledger
    from storage.files.retrieval.db import Index

    index = Index(args.data, Ledger(args.data, record_tails=False))
    index.search(args.session, qs[0], 8)
    inproc = []
    for q in qs:
        t = time.perf_counter()
        index.search(args.session, q, 8)
        inproc.append((time.perf_counter() - t) * 1000)
    index.close()
    beyond = [b - f for b, f in zip(big, floor, strict=True)]
    print(machine_line())
    print(f"load {load0:.2f} -> {os.getloadavg()[0]:.2f}; {args.runs} runs; {args.data}")
    print()
    print("| what | p50 ms | p95 ms |")
    print("|---|---:|---:|")
    for name, xs in (("CLI search, big session", big), ("CLI search, 10-event session (floor)", floor),
                     ("`import cli.prog_retrieval`", imports), ("**beyond start-up** (big - floor, run by run)", beyond),
                     ("in-process Index.search, big session, warm", inproc)):
        print(f"| {name} | {statistics.median(xs):,.1f} | {pct(xs, 0.95):,.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
