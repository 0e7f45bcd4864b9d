"""Earlier statements handed to the model marked (issue 32, FORMAT.md §20.1): what it changes in a question's K.

Runs bench/changing_facts_families.py's sessions (the same seed, families and split) and, at each probe, compares
what a turn about now was handed before (`resolved`: chat.supersede.resolved_for_now, the earlier statements left
out) with what it is handed now (`marked`: the same, then chat.supersede.with_earlier, which hands back the earlier
statements the search ranked in its K, each after its newer statement, marked); `raw` is the search alone and
`unsuperseded` the search without the statements the detector's records superseded. A question about the past compares
the search's K with the K the turn hands (chat.retrieve's past branch: the newest taking the last slot only when it
makes a mark) and counts how often the previous value is among it, marked.

Columns: live-fact recall (the current value's statement among the K); dead served as live (a statement of an older
value among the K unmarked); dead marked (one among the K, marked earlier); false marks (marked statements stating
the asked fact's current value, or no older value of any fact, over all marked). Raw baseline: the search's K, `raw`.

    python bench/earlier_marked.py [--families held-out|tune] [--sessions 60] [--seed 32]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import changing_facts_families as cff  # noqa: E402
from bench.common import machine  # noqa: E402
from chat.supersede import earlier_among, newest_statement, resolved_for_now, with_earlier, with_newest  # noqa: E402
from retrieval.model import Hit  # noqa: E402
from storage.files.ledger.store import Ledger  # noqa: E402
from storage.files.retrieval.db import Index  # noqa: E402

SYSTEMS = ("raw", "unsuperseded", "resolved", "marked")
rows: dict[tuple[str, int], dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
marks_total: dict[int, int] = defaultdict(int)
marks_false: dict[int, int] = defaultdict(int)
history: dict[tuple[str, int], list[int]] = defaultdict(list)
history_marked: dict[int, list[int]] = defaultdict(list)


def probe(session: cff.Session, turn: cff.Turn, index: Index, st: cff.State, scores: cff.Scores) -> None:
    fact = turn.fact
    live, dead = st.seqs(fact, True), st.seqs(fact, False)
    for k in cff.KS:
        exclude = sorted(st.superseded)
        if turn.probe == "before":
            if fact not in st.previous:
                continue
            before = {s for s, fs in st.stated.items() if (fact, st.previous[fact]) in fs}
            hits = list(index.search(session.name, turn.text, k, exclude_seqs=[]).results)
            history[("search", k)].append(int(bool(before & {h.seq for h in hits})))
            with_it = with_newest(hits, newest_statement(index, session.name, turn.text, exclude), k)
            named = earlier_among(turn.text, with_it)
            handed = with_it if named else hits
            history[("marked", k)].append(int(bool(before & {h.seq for h in handed})))
            history_marked[k].append(int(bool(before & set(named))))
            continue
        raw = list(index.search(session.name, turn.text, k).results)
        search = list(index.search(session.name, turn.text, k, exclude_seqs=exclude).results)
        resolved, left = resolved_for_now(index, session.name, turn.text, k, exclude, search)
        marked, named = with_earlier(turn.text, resolved, [h for h in search if h.seq in left], k)
        lists: list[tuple[str, list[Hit], dict[int, int]]] = [
            ("raw", raw, {}), ("unsuperseded", search, {}), ("resolved", resolved, {}), ("marked", marked, named)
        ]
        for system, k_list, mark in lists:
            got = {h.seq for h in k_list}
            r = rows[(system, k)]
            r["live"].append(int(bool(live & got)))
            r["dead"].append(int(bool(dead & (got - set(mark)) - live)))
            r["dead_marked"].append(int(bool(dead & set(mark) - live)))
        for s in named:
            marks_total[k] += 1
            marks_false[k] += int(s in live or not any(v != st.current[f] for f, v in st.stated.get(s, [])))


def _mean(xs: list[int]) -> str:
    return f"{sum(xs) / len(xs):.3f}" if xs else "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", choices=sorted(cff.SPLITS), default="held-out")
    ap.add_argument("--sessions", type=int, default=60)
    ap.add_argument("--seed", type=int, default=32)
    args = ap.parse_args(argv)
    cff.probe = probe  # run_session calls the module's probe: ours measures the two Ks
    rng = random.Random(args.seed)
    made = [cff.make_session(rng, n, cff.SPLITS[args.families]) for n in range(args.sessions)]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="earlier-marked-") as tmp:
        ledger = Ledger(Path(tmp))
        index = Index(Path(tmp), ledger)
        for s in made:
            cff.run_session(s, index, ledger, cff.Scores())
        index.close()
    print(f"Earlier statements marked (issue 32) — {machine()}")
    print(f"{args.families} families, seed {args.seed}, {args.sessions} sessions\n")
    print("| system | K | live-fact recall | dead served as live | dead handed marked | false marks |")
    print("|---|---:|---:|---:|---:|---:|")
    for system in SYSTEMS:
        for k in cff.KS:
            r = rows[(system, k)]
            false = f"{marks_false[k]} / {marks_total[k]}" if system == "marked" else "-"
            print(f"| {system} | {k} | {_mean(r['live'])} | {_mean(r['dead'])} | {_mean(r['dead_marked'])} | {false} |")
    print("\n| question about the past | K | previous value among the K | ... of it marked |")
    print("|---|---:|---:|---:|")
    for k in cff.KS:
        print(f"| search | {k} | {_mean(history[('search', k)])} | - |")
        print(f"| marked | {k} | {_mean(history[('marked', k)])} | {_mean(history_marked[k])} |")
    print(f"\n_{time.perf_counter() - started:.1f}s_")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
