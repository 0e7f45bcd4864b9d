"""The semantic extra's ranking, shared by both backends: the lexical pool and the dense pool fused (pure over rows).

The lexical rows (retrieval.sql.search_sql's columns) are ranked as a lexical search ranks them (collapse score, query
rules, tiers), keeping the fusion's top N (retrieval.semantic.FUSION); the session's M events nearest the query join
the pool; retrieval.semantic.fuse scores each, the cosine's weight gated by the share of the query's terms found in
the session; the pool is ordered by tier (echoes last; an event matched lexically only
through its neighbours stays in the CONTEXT tier in a short session, as lexically), then by the fused score.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval.config import IndexConfig
from retrieval.dates import query_dates
from retrieval.model import Candidate, Hit
from retrieval.scoring import CONTEXT, ECHO, OWN, rank, relative
from retrieval.semantic import DENSE_POOL, FUSION, Fused, Fusion, TextEmbedder, cosines, fuse, nearest
from retrieval.text import Query
from storage.common.retrieval.searcher import candidate


@dataclass(frozen=True, slots=True)
class Dense:
    """The query's cosine with each of the session's vectors, and the seqs of the nearest (best first)."""

    seqs: np.ndarray  # ascending
    cos: np.ndarray
    nearest: list[int]

    def of(self, wanted: Iterable[int]) -> dict[int, float]:
        """The cosine of each wanted seq that has a vector."""
        out: dict[int, float] = {}
        for s in wanted:
            i = int(np.searchsorted(self.seqs, s))
            if i < self.seqs.size and int(self.seqs[i]) == s:
                out[s] = float(self.cos[i])
        return out


def dense_cosines(
    embedder: TextEmbedder, text: str, seqs: np.ndarray, matrix: np.ndarray, exclude: Iterable[int], m: int = DENSE_POOL
) -> Dense:
    """The query embedded and compared with the session's vectors; excluded seqs never among the nearest."""
    if seqs.size == 0:
        return Dense(seqs, np.zeros(0, dtype=np.float32), [])
    cos = cosines(matrix, embedder.embed([text])[0])
    masked = cos.copy()
    gone = np.isin(seqs, np.fromiter(exclude, dtype=np.int64))
    masked[gone] = -np.inf
    top = [i for i in nearest(masked, m) if not gone[i]]
    return Dense(seqs, cos, [int(seqs[i]) for i in top])


def hybrid_hits(
    session: str,
    q: Query,
    lexical_rows: Sequence[Sequence[Any]],
    dense_rows: Sequence[Sequence[Any]],
    cosine: Mapping[int, float],
    *,
    n_events: int,
    k: int,
    config: IndexConfig,
    fusion: Fusion = FUSION,
    overlap: float = 1.0,
    explain: bool = False,
) -> list[Hit]:
    """The top k of the fused pool as Hits; with `explain`, each hit's `explain` gives the parts of its fused score.
    `overlap`: the share of the query's terms that occur anywhere in the session (the fusion's gate reads it)."""
    spans = query_dates(q.text) if config.date_rule else []
    tiers = tuple(t for t in config.tiers if t != CONTEXT or n_events < config.context_tier_max_events)
    lexical = [candidate(r, spans, q.terms, speaker_rule=config.speaker_rule) for r in lexical_rows]
    ranked = rank(lexical, fusion.lexical_pool, config.collapse_weight, tiers=tiers) if lexical else []
    pool: dict[int, Candidate] = {c.seq: c for c, _ in ranked}
    for r in dense_rows:
        c = candidate(r, spans, q.terms, speaker_rule=config.speaker_rule)
        pool.setdefault(c.seq, c)
    weight = fusion.weight_at(overlap)
    scores = fuse(
        [(c.seq, s) for c, s in ranked], {s: cos for s, cos in cosine.items() if s in pool}, weight,
        lexical_norm=fusion.lexical_norm, cosine_norm=fusion.cosine_norm,
    )
    lexical_seqs = {c.seq for c, _ in ranked}

    def tier_of(c: Candidate) -> int:
        if c.echo and ECHO in tiers:
            return ECHO
        if c.seq in lexical_seqs and c.context_only and CONTEXT in tiers:
            return CONTEXT
        return OWN

    order = sorted(pool.values(), key=lambda c: (tier_of(c), -scores[c.seq].score, c.seq))[:k]
    shares = relative([scores[c.seq].score for c in order])
    return [
        c.hit(
            session, score=scores[c.seq].score, rank=i, relative=share, context_only=c.context_only and c.seq in lexical_seqs,
            explain=_parts(scores[c.seq], c.seq in lexical_seqs, tier_of(c), fusion, weight, overlap) if explain else None,
        )
        for i, (c, share) in enumerate(zip(order, shares, strict=True), start=1)
    ]


def _parts(f: Fused, lexical: bool, tier: int, fusion: Fusion, weight: float, overlap: float) -> dict[str, Any]:
    """What --explain shows of a hybrid hit: how it entered the pool and each part of its score
    (fused = lexical_share + weight x cosine_part)."""
    return {
        "mode": "hybrid",
        "method": fusion.method,
        "found_by": ("lexical and dense" if f.cosine is not None else "lexical") if lexical else "dense",
        "lexical_score": f.lexical_raw,  # the lexical ranking's score (collapse and rules); None: not matched
        "lexical_norm": fusion.lexical_norm,
        "lexical_share": f.lexical,  # the lexical part, scaled
        "cosine": f.cosine,
        "cosine_norm": fusion.cosine_norm,
        "cosine_part": f.cosine_part,  # the cosine, scaled
        "weight": weight,
        "base_weight": fusion.weight,
        "overlap": overlap,  # the share of the query's terms found in the session
        "gate": fusion.gate,  # below it, the weight is base_weight x gate_weight
        "gate_weight": fusion.gate_weight,
        "fused": f.score,
        "tier": {OWN: "own", CONTEXT: "context", ECHO: "echo"}.get(tier, str(tier)),
    }
