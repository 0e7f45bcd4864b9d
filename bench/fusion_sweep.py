"""Tuning the semantic extra's fusion (issue 35) on LoCoMo dev and our own implicit-recall pairs, offline.

    python bench/fusion_sweep.py capture --split dev|test [--cache DIR]     # search once per question, keep the pools
    python bench/fusion_sweep.py sweep --split dev [--gate] [--cache DIR]   # every configuration over the kept pools
    python bench/fusion_sweep.py ceiling --split dev|test [--cache DIR]     # pool recall and the oracle re-ranking

`capture` runs the real hybrid search (storage/common/retrieval/searcher.py, the extra's model) once per question
with a lexical pool of CAPTURE_POOL rows and the cosine of the question with every event of the session, and keeps
what the fusion is handed: the lexical rows ranked by the lexical search's own ranking (collapse score, query rules,
tiers: retrieval.scoring.rank over storage.common.retrieval.searcher.candidate) and the cosines. `sweep` then fuses
those pools under each configuration in numpy (pool sizes, dense top-M, normalisation, weight, the overlap gate) and
prints evidence recall for LoCoMo (all, adversarial, implicit) and the stitched pairs (bench/implicit_pairs.py).
Tune on dev (conversations 0-4) only; bench/semantic.py measures a shipped configuration through the real search.
"""

from __future__ import annotations

import argparse
import itertools
import pickle
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import LOCOMO, Question, Turn, import_lines, load, machine, questions, turns  # noqa: E402
from bench.implicit_pairs import check, stitched  # noqa: E402
from bench.locomo import KS, SPLITS  # noqa: E402
from retrieval.dates import query_dates  # noqa: E402
from retrieval.scoring import CONTEXT, rank  # noqa: E402
from retrieval.text import content_terms  # noqa: E402
from storage.common import semantic  # noqa: E402
from storage.common.retrieval import hybrid as hybrid_mod  # noqa: E402
from storage.common.retrieval import searcher as searcher_mod  # noqa: E402
from storage.files.ledger.store import Ledger  # noqa: E402
from storage.files.retrieval.db import Index  # noqa: E402

CAPTURE_POOL = 500


@dataclass
class Record:
    """One question's pools: the lexical ranking (seq, score, echo) and the cosine with every event."""

    conv: int
    category: str  # "1".."5" (LoCoMo), "pair" (ours)
    implicit: bool
    gold: tuple[int, ...]  # seqs
    lexical: list[tuple[int, float, bool]]
    seqs: np.ndarray
    cos: np.ndarray
    overlap: float  # share of the question's content terms found in some event of the session
    extra: dict[str, Any] = field(default_factory=dict)


def _own_words(text: str) -> str:
    head, sep, rest = text.partition(": ")
    return rest if sep and " " not in head.strip() else text


def capture_session(index: Index, session: str, ts: list[Turn], qs: list[Question], conv: int, category_of: Any) -> list[Record]:
    """Search each question once in hybrid mode, keeping what hybrid_hits was handed."""
    seen: dict[str, Any] = {}
    real_dense, real_hits = hybrid_mod.dense_cosines, hybrid_mod.hybrid_hits

    def dense(embedder: Any, text: str, seqs: Any, matrix: Any, exclude: Any, m: int = 0) -> Any:
        d = real_dense(embedder, text, seqs, matrix, exclude, m=CAPTURE_POOL)
        seen["dense"] = d
        return d

    def hits(session: str, q: Any, lexical_rows: Any, dense_rows: Any, cosine: Any, **kw: Any) -> list[Any]:
        cfg = kw["config"]
        spans = query_dates(q.text) if cfg.date_rule else []
        tiers = tuple(t for t in cfg.tiers if t != CONTEXT or kw["n_events"] < cfg.context_tier_max_events)
        cands = [searcher_mod.candidate(r, spans, q.terms, speaker_rule=cfg.speaker_rule) for r in lexical_rows]
        ranked = rank(cands, CAPTURE_POOL, cfg.collapse_weight, tiers=tiers) if cands else []
        seen["lexical"] = [(int(c.seq), float(s), bool(c.echo)) for c, s in ranked]
        seen["bm25"] = [float(c.bm25) for c, _ in ranked]
        return []

    dia_seq = {t.dia_id: n for n, t in enumerate(ts)}
    vocab: set[str] = set()
    for t in ts:
        vocab.update(content_terms(_own_words(t.text)))
    words = {t.dia_id: set(content_terms(_own_words(t.text))) for t in ts}
    out = []
    hybrid_mod.dense_cosines, hybrid_mod.hybrid_hits = dense, hits  # type: ignore[assignment]
    saved_pool = searcher_mod.LEXICAL_POOL
    searcher_mod.LEXICAL_POOL = CAPTURE_POOL  # type: ignore[misc]
    try:
        for q in qs:
            seen.clear()
            index.search(session, q.question, k=10)
            qterms = set(content_terms(q.question))
            implicit = bool(q.gold) and all(w not in qterms for g in q.gold for w in words.get(g, set()))
            d = seen.get("dense")
            out.append(Record(
                conv, category_of(q), implicit, tuple(dia_seq[g] for g in q.gold if g in dia_seq),
                seen.get("lexical", []), np.array(d.seqs) if d is not None else np.zeros(0, dtype=np.int64),
                np.array(d.cos) if d is not None else np.zeros(0, dtype=np.float32),
                len(qterms & vocab) / max(len(qterms), 1),
                {"bm25": seen.get("bm25", [])},
            ))
    finally:
        hybrid_mod.dense_cosines, hybrid_mod.hybrid_hits = real_dense, real_hits  # type: ignore[assignment]
        searcher_mod.LEXICAL_POOL = saved_pool  # type: ignore[misc]
    return out


def capture(split: str, base: Path, data: list[dict[str, Any]], model: semantic.Embedder) -> list[Record]:
    ledger = Ledger(base)
    index = Index(base, ledger)
    index.use_semantic(model)
    records: list[Record] = []
    for i in SPLITS[split]:
        conv = data[i]
        for session, ts, qs, cat in (
            (f"locomo-{i}", turns(conv), questions(conv, i), lambda q: str(q.category)),
            *([(f"pairs-{i}", *stitched(turns(conv), i), lambda q: "pair")] if split == "dev" else []),
        ):
            if not ledger.exists(session):
                ledger.import_jsonl(session, import_lines(ts))
            index.index_session(session)
            t0 = time.perf_counter()
            n = index.embed_pending(session)
            print(f"{session}: {len(ts)} events, {n} embedded in {time.perf_counter() - t0:.0f}s; {len(qs)} questions", flush=True)
            records += capture_session(index, session, ts, qs, i, cat)
    index.close()
    return records


# ---------------------------------------------------------------------------------------------------- the fusion


@dataclass(frozen=True)
class Config:
    pool: int = 200  # lexical top-N
    dense: int = 25  # dense top-M
    norm: str = "max"  # lexical score normalisation: max (score / best), minmax, z, rank (1 / (60 + rank))
    cnorm: str = "raw"  # cosine: raw, minmax (over the pool), z
    weight: float = 1.0  # x the cosine part
    gate: float = 0.0  # when the question's terms found in the session are below this share ...
    gate_weight: float = 1.0  # ... the weight is multiplied by this
    score: str = "final"  # the lexical score fused: "final" (collapse score and rules, as ranked) or "bm25" (alone)

    def name(self) -> str:
        g = f" gate<{self.gate:g}x{self.gate_weight:g}" if self.gate > 0 else ""
        b = " bm25" if self.score == "bm25" else ""
        return f"N{self.pool} M{self.dense} {self.norm}/{self.cnorm} w{self.weight:g}{g}{b}"


def _norm(x: np.ndarray, how: str, present: np.ndarray | None = None) -> np.ndarray:
    if x.size == 0:
        return x
    if how == "raw":
        return x
    if how == "max":
        best = x.max()
        return x / best if best > 0 else np.zeros_like(x)
    if how == "minmax":
        lo, hi = x.min(), x.max()
        return (x - lo) / (hi - lo) if hi > lo else np.ones_like(x)
    if how == "z":
        sd = x.std()
        return (x - x.mean()) / sd if sd > 0 else np.zeros_like(x)
    raise ValueError(how)


def fused_order(r: Record, c: Config) -> list[int]:
    lex = r.lexical[: c.pool]
    cos_of = dict(zip(r.seqs.tolist(), r.cos.tolist(), strict=True))
    pool: dict[int, bool] = {s: e for s, _, e in lex}
    if c.dense and r.cos.size:
        top = np.argsort(-r.cos, kind="stable")[: c.dense]
        for i in top:
            pool.setdefault(int(r.seqs[i]), False)
    seqs = list(pool)
    if not seqs:
        return []
    lexs = np.zeros(len(seqs))
    if lex:
        # FTS5's bm25() is lower for a better match (negative): negated, higher is better as for the final score
        raw = -np.array(r.extra["bm25"][: len(lex)]) if c.score == "bm25" else np.array([s for _, s, _ in lex])
        if c.norm == "rank":
            normed = 1.0 / (60 + np.arange(1, len(lex) + 1))
            normed = normed / normed[0]
        elif c.norm == "minmax":
            lo, hi = raw.min(), raw.max()
            normed = (raw - lo) / (hi - lo) if hi > lo else np.ones_like(raw)
        else:
            normed = _norm(raw, c.norm)
        lexs[: len(lex)] = normed  # the lexical seqs come first in `pool`
        if c.norm == "z":
            lexs[len(lex):] = normed.min() if normed.size else 0.0  # an event the words missed: the pool's floor
    coss = np.array([cos_of.get(s, 0.0) for s in seqs])
    coss = _norm(coss, c.cnorm)
    w = c.weight * (c.gate_weight if c.gate > 0 and r.overlap < c.gate else 1.0)
    score = lexs + w * coss
    echo = np.array([pool[s] for s in seqs])
    order = np.lexsort((np.array(seqs), -score, echo))
    return [seqs[i] for i in order[: max(KS)]]


def lexical_order(r: Record) -> list[int]:
    return [s for s, _, _ in r.lexical[: max(KS)]]


def recalls(records: list[Record], order_of: Any) -> dict[str, list[float]]:
    """Mean R@K per group: all LoCoMo, adversarial (5), implicit LoCoMo, pairs."""
    groups: dict[str, list[list[float]]] = {}
    for r in records:
        got = order_of(r)
        row = [(sum(1 for g in r.gold if g in set(got[:k])) / len(r.gold)) if r.gold else 1.0 for k in KS]
        names = ["pairs"] if r.category == "pair" else ["all"] + (["adversarial"] if r.category == "5" else []) + (["implicit"] if r.implicit else [])
        for n in names:
            groups.setdefault(n, []).append(row)
    return {n: [100 * float(np.mean([row[j] for row in rows])) for j in range(len(KS))] for n, rows in groups.items()}


def fmt(res: dict[str, list[float]]) -> str:
    return " | ".join(" / ".join(f"{v:.1f}" for v in res.get(n, [])) for n in ("all", "adversarial", "implicit", "pairs"))


def sweep(records: list[Record], configs: list[Config]) -> list[tuple[Config, dict[str, list[float]]]]:
    return [(c, recalls(records, lambda r, c=c: fused_order(r, c))) for c in configs]


def grid() -> list[Config]:
    """Weights per cosine normalisation: a raw cosine spans ~0.1-0.7, a min-max one 0-1, a z-score ~-2..4."""
    weights = {"raw": (1.0, 1.5, 2.0, 3.0), "minmax": (0.25, 0.5, 0.75, 1.0), "z": (0.1, 0.25, 0.5, 1.0)}
    out = [Config()]
    for pool, dense, norm, cnorm in itertools.product((200, 500), (25, 100), ("max", "minmax", "z"), ("raw", "minmax", "z")):
        out += [Config(pool, dense, norm, cnorm, w) for w in weights[cnorm]]
    return out


def gate_grid() -> list[Config]:
    """The gate over the leading scalings of grid(): the weight x g when under a share t of the query's terms occur
    in the session (t 0.5 / 0.75 / 0.9, g 2 / 4 / 8), and a few neighbours of the one shipped (linear-fusion-v2)."""
    out = []
    for base in ((200, 25, "minmax", "minmax", 0.25), (200, 25, "minmax", "minmax", 0.5), (200, 25, "max", "raw", 1.0),
                 (200, 25, "minmax", "z", 0.1), (200, 25, "minmax", "minmax", 0.35)):
        out.append(Config(*base))
        out += [Config(*base, t, g) for t in (0.5, 0.75, 0.9) for g in (2.0, 4.0, 8.0)]
    out += [Config(200, 25, "minmax", "minmax", 0.3, 0.5, 4.0), Config(200, 25, "minmax", "minmax", 0.25, 0.6, 4.0),
            Config(200, 25, "minmax", "minmax", 0.3, 0.6, 3.0), Config(200, 25, "minmax", "minmax", 0.25, 0.6, 3.0),
            Config(200, 50, "minmax", "minmax", 0.25, 0.5, 4.0), Config(500, 25, "minmax", "minmax", 0.25, 0.5, 4.0)]
    out += [Config(200, 25, "rank", cn, w) for cn, w in (("raw", 0.5), ("raw", 1.0), ("minmax", 0.25), ("minmax", 0.5))]
    return out


def collapse_grid() -> list[Config]:
    """The collapse score's interplay: the same pools fused with the lexical ranking's final score or its BM25 alone."""
    out = []
    for base in ((200, 25, "max", "raw", 1.0), (200, 25, "minmax", "minmax", 0.25, 0.5, 4.0), (200, 25, "minmax", "minmax", 0.5)):
        out += [Config(*base), Config(*base, score="bm25")]
    return out


def ceiling(records: list[Record]) -> str:
    """How much of the gold the candidate pools even hold, and the best any re-ranking of them could do."""
    lines = ["| pool | gold in pool (all) | adversarial | implicit | oracle R@5 / R@10 (all) |", "|---|---:|---:|---:|---:|"]
    for pool, dense in ((200, 0), (200, 25), (500, 0), (500, 25), (500, 100), (200, 200)):
        per: dict[str, list[float]] = {"all": [], "adversarial": [], "implicit": []}
        o5, o10 = [], []
        for r in records:
            if r.category == "pair" or not r.gold:
                continue
            cand = {s for s, _, _ in r.lexical[:pool]}
            if dense and r.cos.size:
                cand |= {int(r.seqs[i]) for i in np.argsort(-r.cos, kind="stable")[:dense]}
            share = sum(1 for g in r.gold if g in cand) / len(r.gold)
            per["all"].append(share)
            if r.category == "5":
                per["adversarial"].append(share)
            if r.implicit:
                per["implicit"].append(share)
            found = sum(1 for g in r.gold if g in cand)
            o5.append(min(found, 5) / len(r.gold))
            o10.append(min(found, 10) / len(r.gold))
        m = {n: 100 * float(np.mean(v)) if v else float("nan") for n, v in per.items()}
        lines.append(
            f"| lexical top {pool} ∪ dense top {dense} | {m['all']:.1f} | {m['adversarial']:.1f} | {m['implicit']:.1f} | "
            f"{100 * np.mean(o5):.1f} / {100 * np.mean(o10):.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["capture", "sweep", "ceiling", "one"])
    p.add_argument("--split", choices=["dev", "test"], default="dev")
    p.add_argument("--data", type=Path, default=LOCOMO)
    p.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "fusion-sweep")
    p.add_argument("--gate", action="store_true", help="sweep: the gate's grid (gate_grid) instead of grid()")
    p.add_argument("--collapse", action="store_true", help="sweep: the final score against BM25 alone (collapse_grid)")
    p.add_argument("--config", default="", help="one: pool,dense,norm,cnorm,weight[,gate,gate_weight]")
    args = p.parse_args(argv)
    pkl = args.cache / f"{args.split}.pkl"
    started = time.perf_counter()
    if args.what == "capture":
        if bad := check():
            print("pairs sharing a content term:", *bad, sep="\n", file=sys.stderr)
            return 2
        try:
            model = semantic.load()
        except semantic.SemanticUnavailable as exc:
            print(exc, file=sys.stderr)
            return 2
        args.cache.mkdir(parents=True, exist_ok=True)
        records = capture(args.split, args.cache / args.split, load(args.data), model)
        with open(pkl, "wb") as f:
            pickle.dump(records, f)
        print(f"{len(records)} questions kept in {pkl} ({time.perf_counter() - started:.0f}s)")
        return 0
    with open(pkl, "rb") as f:
        records = pickle.load(f)  # noqa: S301 - our own file, written by `capture`
    print(f"LoCoMo {args.split} and our pairs, {len(records)} questions — {machine()}\n")
    if args.what == "ceiling":
        print(ceiling(records))
        return 0
    head = "| configuration | all R@5/10/25/50 | adversarial | implicit | pairs |\n|---|---|---|---|---|"
    lex = recalls(records, lexical_order)
    print(head)
    print(f"| lexical (default) | {fmt(lex)} |")
    if args.what == "one":
        parts = args.config.split(",")
        gate = [float(x) for x in parts[5:7]] + [0.0, 1.0][len(parts[5:7]):]
        c = Config(int(parts[0]), int(parts[1]), parts[2], parts[3], float(parts[4]), gate[0], gate[1])
        print(f"| {c.name()} | {fmt(recalls(records, lambda r: fused_order(r, c)))} |")
        return 0
    if args.collapse and any("bm25" not in r.extra for r in records):
        print("these pools were captured without BM25: run capture again", file=sys.stderr)
        return 2
    results = sweep(records, collapse_grid() if args.collapse else gate_grid() if args.gate else grid())
    ordered = args.gate or args.collapse
    if not ordered:
        results.sort(key=lambda cr: -(cr[1]["all"][0] + cr[1]["all"][1]))
    for c, res in results if ordered else results[:40]:
        print(f"| {c.name()} | {fmt(res)} |")
    base = recalls(records, lambda r: fused_order(r, Config()))
    print(f"| (linear-fusion-v1: {Config().name()}) | {fmt(base)} |")
    print(f"\n_{len(results)} configurations, {time.perf_counter() - started:.0f}s_")
    return 0


if __name__ == "__main__":
    sys.exit(main())
