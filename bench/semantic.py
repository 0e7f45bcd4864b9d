"""The semantic extra on LoCoMo (issue 35): evidence recall, latency and index cost, with and without it.

    python bench/semantic.py [--split dev|test|both] [--cache DIR]

Each conversation is imported as one session (bench/common.py's mapping, as bench/locomo.py), indexed, then embedded
with the extra's model (all-MiniLM-L6-v2 int8 ONNX, requirements-semantic.txt). Every question is searched at
K = 5, 10, 25, 50 by: the raw FTS5 baseline (same run), the project's lexical search (the default install), and the
hybrid search (retrieval/semantic.py's FUSION, the method a receipt names: linear-fusion-v2, tuned by
bench/fusion_sweep.py). "implicit" is the subset of questions none of whose content words is in any of their gold
turns (speaker prefix left out): what only the meaning can find. On dev, "pairs" are our own 65 later/earlier
messages sharing no content word (bench/implicit_pairs.py), stitched into the dev conversations as sessions of their
own, so the LoCoMo figures are not changed by them. Latency is each search call's wall time at K = 10 (the hybrid's includes embedding the query);
index cost is the lexical indexing and the embedding of every turn, per event. Tune on dev (conversations 0-4) only.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import LOCOMO, RawBaseline, import_lines, load, machine, questions, recall, turns  # noqa: E402
from bench.implicit_pairs import stitched  # noqa: E402
from bench.locomo import CATEGORIES, KS, SPLITS, table  # noqa: E402
from retrieval.semantic import BLOB_BYTES, FUSION  # noqa: E402
from retrieval.text import content_terms  # noqa: E402
from storage.common import semantic  # noqa: E402
from storage.files.ledger.store import Ledger  # noqa: E402
from storage.files.retrieval.db import Index  # noqa: E402


def _own_words(text: str) -> str:
    """A turn's text without its "Speaker: " prefix (bench/common.turns adds it)."""
    head, sep, rest = text.partition(": ")
    return rest if sep and " " not in head.strip() else text


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def evaluate(
    data_dir: Path, convs: list[int], data: list[dict], model: semantic.Embedder, *, pairs: bool = False
) -> tuple[dict, dict]:
    ledger = Ledger(data_dir)
    index = Index(data_dir, ledger)  # lexical: the default install
    hybrid = Index(data_dir, ledger)  # the same file, with the extra (its vector cache stays warm between searches)
    hybrid.use_semantic(model)
    systems = ("raw FTS5 baseline", "project (lexical)", "project + semantic (hybrid)")
    scores: dict[str, dict[tuple[str, int], list[float]]] = {s: defaultdict(list) for s in systems}
    cost = {"events": 0, "index_s": 0.0, "embed_s": 0.0, "lex_ms": [], "hyb_ms": [], "bytes_before": 0, "bytes_after": 0}
    runs = [(f"locomo-{i}", turns(data[i]), questions(data[i], i)) for i in convs]
    if pairs:  # our own implicit-recall pairs, each conversation with its 13 earlier messages stitched in (dev only)
        runs += [(f"pairs-{i}", *stitched(turns(data[i]), i)) for i in convs]
    for session, ts, qs in runs:
        if not ledger.exists(session):
            ledger.import_jsonl(session, import_lines(ts))
        t0 = time.perf_counter()
        index.index_session(session)
        cost["index_s"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        embedded = hybrid.embed_pending(session)
        if embedded:
            cost["embed_s"] += time.perf_counter() - t0
            cost["events"] += embedded
        assert len(hybrid.vector_seqs(session)) == len(ts), "every turn embedded"
        raw = RawBaseline([t.text for t in ts])
        words = {t.dia_id: set(content_terms(_own_words(t.text))) for t in ts}
        seq_to_dia = [t.dia_id for t in ts]
        for q in qs:
            implicit = bool(q.gold) and all(w not in set(content_terms(q.question)) for g in q.gold for w in words.get(g, set()))
            if session.startswith("pairs-"):
                labels = ["pairs"]
            else:
                labels = ["all", f"{q.category} {CATEGORIES[q.category]}"] + (["implicit"] if implicit else [])
            for k in KS:
                raw_ids = [seq_to_dia[s] for s in raw.search(q.question, k)]
                t0 = time.perf_counter()
                lex = index.search(session, q.question, k=k)
                lex_ms = 1000 * (time.perf_counter() - t0)
                t0 = time.perf_counter()
                hyb = hybrid.search(session, q.question, k=k)
                hyb_ms = 1000 * (time.perf_counter() - t0)
                if k == 10:
                    cost["lex_ms"].append(lex_ms)
                    cost["hyb_ms"].append(hyb_ms)
                for label in labels:
                    scores[systems[0]][(label, k)].append(recall(q.gold, raw_ids))
                    scores[systems[1]][(label, k)].append(recall(q.gold, [seq_to_dia[h.seq] for h in lex.results]))
                    scores[systems[2]][(label, k)].append(recall(q.gold, [seq_to_dia[h.seq] for h in hyb.results]))
    index.close()
    hybrid.close()
    return scores, cost


def cost_run(data: list[dict], model: semantic.Embedder, n_queries: int) -> str:
    """Index cost per event and search latency over one session holding every LoCoMo turn (5,882 events), beside a
    raw FTS5 table of the same texts: each step timed alone, in this run."""
    ts = [t for conv in data for t in turns(conv)]
    qs = [q.question for i, conv in enumerate(data) for q in questions(conv, i)][:n_queries]
    with tempfile.TemporaryDirectory(prefix="semantic-cost-") as tmp:
        ledger = Ledger(Path(tmp))
        ledger.import_jsonl("all", import_lines(ts))
        index = Index(Path(tmp), ledger)
        t0 = time.perf_counter()
        index.index_session("all")
        lexical_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        raw = RawBaseline([t.text for t in ts])
        raw_s = time.perf_counter() - t0
        hybrid = Index(Path(tmp), ledger)
        hybrid.use_semantic(model)
        t0 = time.perf_counter()
        n = hybrid.embed_pending("all")
        embed_s = time.perf_counter() - t0
        times: dict[str, list[float]] = {"raw FTS5": [], "lexical": [], "hybrid": []}
        for q in qs:
            for name, run in (("raw FTS5", lambda q=q: raw.search(q, 10)), ("lexical", lambda q=q: index.search("all", q, k=10)),
                              ("hybrid", lambda q=q: hybrid.search("all", q, k=10))):
                t0 = time.perf_counter()
                run()
                times[name].append(1000 * (time.perf_counter() - t0))
        index.close()
        hybrid.close()
    lines = [
        f"one session of {len(ts)} events, {len(qs)} queries at K=10",
        "",
        "| step | raw FTS5 | lexical (default) | semantic extra |",
        "|---|---:|---:|---:|",
        f"| index, per event (ms) | {1000 * raw_s / len(ts):.3f} | {1000 * lexical_s / len(ts):.3f} | "
        f"+ {1000 * embed_s / max(n, 1):.2f} embedding ({n / max(embed_s, 1e-9):.0f} events/s) |",
    ]
    for p in (50, 95):
        lines.append(
            f"| search p{p} (ms) | {_pct(times['raw FTS5'], p):.2f} | {_pct(times['lexical'], p):.2f} | {_pct(times['hybrid'], p):.2f} |"
        )
    return "\n".join(lines)


def cost_table(cost: dict) -> str:
    n = max(cost["events"], 1)
    lines = [
        "| figure | lexical (default) | with the semantic extra |",
        "|---|---:|---:|",
        f"| search p50 / p95, K=10 (ms) | {statistics.median(cost['lex_ms']):.1f} / {_pct(cost['lex_ms'], 95):.1f} | "
        f"{statistics.median(cost['hyb_ms']):.1f} / {_pct(cost['hyb_ms'], 95):.1f} |",
        f"| embedding per event (ms), events/s | — | {1000 * cost['embed_s'] / n:.2f}, {n / max(cost['embed_s'], 1e-9):.0f}/s |"
        if cost["events"] else "| embedding per event | — | (every event was embedded already: run without --cache to time it) |",
        f"| vector per event (bytes, stored) | 0 | {BLOB_BYTES} |",
        f"| events embedded | — | {cost['events']} |",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=LOCOMO, help="locomo10.json (default: ../shared/data)")
    p.add_argument("--split", choices=["dev", "test", "both"], default="dev")
    p.add_argument("--cache", type=Path, default=None, help="keep the ledgers, index and vectors in DIR/<split>")
    p.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads (default 1, as the app)")
    p.add_argument("--cost", type=int, default=None, metavar="QUERIES",
                   help="only the cost run: every LoCoMo turn in one session, index cost per event and search latency")
    args = p.parse_args(argv)
    try:
        model = semantic.load(threads=args.threads)
    except semantic.SemanticUnavailable as exc:
        print(exc, file=sys.stderr)
        return 2
    data = load(args.data)
    started = time.perf_counter()
    if args.cost is not None:
        print(f"The semantic extra's cost — {machine()}\n")
        print(cost_run(data, model, args.cost))
        print(f"\n_{time.perf_counter() - started:.1f}s_")
        return 0
    print(f"LoCoMo evidence recall (%), with and without the semantic extra — {machine()}")
    print(f"\nmodel: {model.describe()}; fusion: {FUSION}\n")
    splits = ["dev", "test"] if args.split == "both" else [args.split]
    with tempfile.TemporaryDirectory(prefix="semantic-") as tmp:
        base = args.cache if args.cache is not None else Path(tmp)
        for split in splits:
            scores, cost = evaluate(base / split, list(SPLITS[split]), data, model, pairs=split == "dev")
            print(table(f"{split} split (conversations {SPLITS[split].start}-{SPLITS[split].stop - 1})", scores))
            for group in ("implicit", "pairs"):
                for system in scores:
                    by = scores[system]
                    if by.get((group, 5)):
                        cells = " / ".join(f"{100 * sum(by[(group, k)]) / len(by[(group, k)]):.1f}" for k in KS)
                        print(f"\n_{group} ({len(by[(group, 5)])} questions) {system}: R@5/10/25/50 = {cells}_")
            print()
            print(cost_table(cost))
            print()
    print(f"_{time.perf_counter() - started:.1f}s_")
    return 0


if __name__ == "__main__":
    sys.exit(main())
