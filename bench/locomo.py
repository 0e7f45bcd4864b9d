"""LoCoMo evidence recall through the project's search, beside a raw FTS5 baseline.

    python bench/locomo.py [--split dev|test|both] [--context-before N] ...

Each conversation is imported as one session through the ledger's import path
(the issue's mapping), indexed, and every question is searched at K = 5, 10,
25, 50. Prints markdown tables on stdout. Tune on dev only.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import LOCOMO, RawBaseline, import_lines, load, machine, questions, recall, turns  # noqa: E402
from retrieval import IndexConfig  # noqa: E402
from retrieval.scoring import CONTEXT, ECHO  # noqa: E402
from storage.files.ledger.store import Ledger  # noqa: E402
from storage.files.retrieval.db import Index

KS = (5, 10, 25, 50)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
SPLITS = {"dev": range(0, 5), "test": range(5, 10)}


def table(title: str, scores: dict[str, dict[tuple[str, int], list[float]]]) -> str:
    """scores[system][(category label, k)] -> per-question recalls."""
    lines = [f"**{title}**", "", "| system | category | n | " + " | ".join(f"R@{k}" for k in KS) + " |"]
    lines.append("|---|---|---:|" + "---:|" * len(KS))
    labels = ["all"] + [f"{c} {name}" for c, name in CATEGORIES.items()]
    for system, by in scores.items():
        for label in labels:
            vals = [by.get((label, k), []) for k in KS]
            if not vals[0]:
                continue
            cells = " | ".join(f"{100 * sum(v) / len(v):.1f}" for v in vals)
            lines.append(f"| {system} | {label} | {len(vals[0])} | {cells} |")
    return "\n".join(lines)


def superseded_by_detector(ledger: Ledger, index: Index, session: str) -> tuple[set[int], int, int]:
    """The seqs the offline engine's supersession step (chat.supersede, issue 12) would have marked superseded,
    run over the session's user events in order (each sees only earlier statements), how many it proposed, and
    how many user events it ran on: the deterministic detector (facts.rules.detect) over the same lexical
    shortlist a turn searches (chat.supersede.SHORTLIST_K), as bench/changing_facts.py runs it."""
    from chat.supersede import SHORTLIST_K
    from facts.rules import detect, shortlist_query

    dead: set[int] = set()
    proposed = users = 0
    for ev in ledger.events(session):
        if ev.role != "user":
            continue
        users += 1
        query = shortlist_query(ev.text)
        if query is None:
            continue
        hits = index.search(session, query, k=SHORTLIST_K, exclude_seqs=[ev.seq]).results
        proposals = detect(ev.text, [(h.seq, h.text) for h in hits if h.role == "user" and h.seq < ev.seq], new_seq=ev.seq)
        proposed += len(proposals)
        dead.update(p.older_seq for p in proposals)
    return dead, proposed, users


def evaluate(data_dir: Path, convs: list[int], cfg: IndexConfig, data: list[dict], *, supersede: bool = False) -> dict[str, dict]:
    from chat.supersede import newest_statement, resolved_for_now, with_newest
    from facts import asks_about_past
    from facts.rules import topic_query

    ledger = Ledger(data_dir)
    index = Index(data_dir, ledger, config=cfg)
    scores: dict[str, dict[tuple[str, int], list[float]]] = {
        "raw FTS5 baseline": defaultdict(list),
        "project": defaultdict(list),
    }
    if supersede:
        scores["project + supersession"] = defaultdict(list)
        scores["project + supersession + newest"] = defaultdict(list)  # chat.supersede.with_newest: what a turn is handed
        scores["project + supersession + resolved"] = defaultdict(list)  # chat.supersede.resolved_for_now: a turn now (issue 32)
        scores["project + supersession + topic words"] = defaultdict(list)  # facts.rules.topic_query
    for i in convs:
        conv = data[i]
        ts = turns(conv)
        session = f"locomo-{i}"
        if not ledger.exists(session):
            ledger.import_jsonl(session, import_lines(ts))
        index.index_session(session)
        raw = RawBaseline([t.text for t in ts])
        dead: set[int] = set()
        if supersede:
            dead, proposed, users = superseded_by_detector(ledger, index, session)
            print(f"_{session}: over {users} user turns the detector proposed {proposed} supersessions, {len(dead)} events superseded_")
        seq_to_dia = [t.dia_id for t in ts]
        for q in questions(conv, i):
            labels = ("all", f"{q.category} {CATEGORIES[q.category]}")
            for k in KS:
                raw_ids = [seq_to_dia[s] for s in raw.search(q.question, k)]
                ours = [seq_to_dia[h.seq] for h in index.search(session, q.question, k=k).results]
                for label in labels:
                    scores["raw FTS5 baseline"][(label, k)].append(recall(q.gold, raw_ids))
                    scores["project"][(label, k)].append(recall(q.gold, ours))
                if supersede:  # what a turn would be handed: superseded events left out unless it asks about the past
                    exclude = [] if asks_about_past(q.question) else sorted(dead)
                    kept_hits = index.search(session, q.question, k=k, exclude_seqs=exclude).results
                    kept = [seq_to_dia[h.seq] for h in kept_hits]
                    if not asks_about_past(q.question):
                        kept_hits = with_newest(kept_hits, newest_statement(index, session, q.question, exclude), k)
                    newest = [seq_to_dia[h.seq] for h in kept_hits]
                    if not asks_about_past(q.question):
                        kept_hits = resolved_for_now(index, session, q.question, k, exclude)[0]
                    resolved = [seq_to_dia[h.seq] for h in kept_hits]
                    topical = [seq_to_dia[h.seq] for h in index.search(session, topic_query(q.question) or q.question, k=k, exclude_seqs=exclude).results]
                    for label in labels:
                        scores["project + supersession"][(label, k)].append(recall(q.gold, kept))
                        scores["project + supersession + newest"][(label, k)].append(recall(q.gold, newest))
                        scores["project + supersession + resolved"][(label, k)].append(recall(q.gold, resolved))
                        scores["project + supersession + topic words"][(label, k)].append(recall(q.gold, topical))
    index.close()
    return scores


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=LOCOMO, help="locomo10.json (default: ../shared/data)")
    p.add_argument("--split", choices=["dev", "test", "both"], default="both")
    p.add_argument("--context-before", type=int, default=None)
    p.add_argument("--context-after", type=int, default=None)
    p.add_argument("--context-weight", type=float, default=None)
    p.add_argument("--collapse-weight", type=float, default=None)
    p.add_argument("--prune-share", type=float, default=None)
    p.add_argument("--prune-min-events", type=int, default=None)
    p.add_argument("--no-date-rule", action="store_true", help="turn the query date rule off")
    p.add_argument("--no-speaker-rule", action="store_true", help="turn the query speaker rule off")
    p.add_argument("--context-tier-max-events", type=int, default=None)
    p.add_argument(
        "--supersede",
        action="store_true",
        help="also run the offline supersession detector over each conversation's user turns (issue 12) and score "
        "the search with the superseded turns left out, as a turn would (kept for questions about the past)",
    )
    p.add_argument(
        "--tiers",
        default=None,
        help="which rules rank lower tiers below: 'context,echo' (default), 'echo', 'context' or 'none'",
    )
    p.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="keep the imported ledgers and index in DIR/<split> and reuse them (faster re-runs; "
        "an index built with other indexed settings is rebuilt by Index itself)",
    )
    args = p.parse_args(argv)
    overrides = {
        name: getattr(args, name)
        for name in (
            "context_before",
            "context_after",
            "context_weight",
            "collapse_weight",
            "prune_share",
            "prune_min_events",
            "context_tier_max_events",
        )
        if getattr(args, name) is not None
    }
    if args.no_date_rule:
        overrides["date_rule"] = False
    if args.no_speaker_rule:
        overrides["speaker_rule"] = False
    if args.tiers is not None:
        names = {"context": CONTEXT, "echo": ECHO}
        wanted = [] if args.tiers == "none" else args.tiers.split(",")
        if not set(wanted) <= set(names):
            p.error(f"--tiers {args.tiers!r}: use context, echo, both comma-separated, or none")
        overrides["tiers"] = tuple(names[w] for w in wanted)
    defaults = IndexConfig()
    cfg = IndexConfig(**{**{f: getattr(defaults, f) for f in defaults.__slots__}, **overrides})
    data = load(args.data)
    started = time.perf_counter()
    print(f"LoCoMo evidence recall (%) — {machine()}")
    print(f"\nconfig: {cfg.as_dict()}\n")
    splits = ["dev", "test"] if args.split == "both" else [args.split]
    with tempfile.TemporaryDirectory(prefix="locomo-") as tmp:
        base = args.cache if args.cache is not None else Path(tmp)
        for split in splits:
            # One data dir per split, so one split's turns never enter the other's BM25 statistics.
            scores = evaluate(base / split, list(SPLITS[split]), cfg, data, supersede=args.supersede)
            print(table(f"{split} split (conversations {SPLITS[split].start}-{SPLITS[split].stop - 1})", scores))
            print()
    print(f"_{time.perf_counter() - started:.1f}s_")
    return 0


if __name__ == "__main__":
    sys.exit(main())
