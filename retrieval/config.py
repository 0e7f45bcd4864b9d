"""Index and ranking settings (plain values). A change to the indexed ones forces a rebuild."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from retrieval.scoring import COLLAPSE_WEIGHT, CONTEXT, ECHO


@dataclass(frozen=True, slots=True)
class IndexConfig:
    # What goes into the FTS `context` column of an event: the text of this many
    # neighbouring turns before and after it (docs/RETRIEVAL.md, "Context").
    context_before: int = 2
    context_after: int = 2
    # bm25() column weights: the event's own text, and its neighbours' text.
    text_weight: float = 1.0
    context_weight: float = 0.3
    # Ranking: how far the collapse score may move BM25 (0 = pure BM25).
    collapse_weight: float = COLLAPSE_WEIGHT
    # Large sessions: query terms held by more than this share of the session's
    # events are dropped (when another term remains), because their doclists cost
    # the most and their idf is the lowest. Applies from prune_min_events events on.
    prune_share: float = 0.05
    prune_min_events: int = 50_000
    # From prune_min_events on: rank by the exact bound (retrieval.bounded: the same answer as the query with every
    # term, bm25() run over the rows holding a rare term) rather than drop the common terms (False: recall lost).
    # prune_share then only picks the first split. At 1M events it was faster than dropping them at p50 and p95
    # (131 / 438 ms against 185 / 467, exhaustive 485 / 797; bench/search.py, 2026-12-05).
    exact_prune: bool = True
    # Which tiers rank below the ones above them (retrieval.scoring): CONTEXT (matched only
    # through neighbours) and ECHO (assistant replies that only repeat memories).
    tiers: tuple[int, ...] = (CONTEXT, ECHO)
    # CONTEXT ranks below OWN only in sessions of fewer events than this: in a long
    # conversation a turn matched through its neighbours is often the answer ("Yes, twice
    # last summer"), and ranking all of them last cost 0.8-1.8 points of dev recall.
    context_tier_max_events: int = 100
    # Query rules (scoring.query_boost): dates the query names, speakers it names.
    date_rule: bool = True
    speaker_rule: bool = True

    def __post_init__(self) -> None:
        for name in ("context_before", "context_after", "prune_min_events", "context_tier_max_events"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} {value!r}: must be a non-negative integer")
        if self.context_before > 8 or self.context_after > 8:
            raise ValueError("context_before/context_after: at most 8 turns")
        for name in ("text_weight", "context_weight", "collapse_weight", "prune_share"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} {value!r}: must be a finite non-negative number")
        if not isinstance(self.tiers, tuple) or not set(self.tiers) <= {CONTEXT, ECHO}:
            raise ValueError(f"tiers {self.tiers!r}: a tuple of retrieval.scoring.CONTEXT and ECHO")
        if self.collapse_weight > 1:
            raise ValueError(f"collapse_weight {self.collapse_weight}: must be within [0, 1]")

    def indexed_part(self) -> dict[str, int]:
        """The settings baked into stored rows; the rest apply at query time."""
        return {"context_before": self.context_before, "context_after": self.context_after}

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


RANKING_CONFIG = "mre-ranking/v1"  # the name of ranking_config's shape (docs/FORMAT.md §24); a new shape is a new name


def ranking_config(cfg: IndexConfig, *, method: str, tokenizer: str) -> dict[str, object]:
    """What decides a ranking besides the ledger, the control state and the question (docs/FORMAT.md §24), as a
    value in the canonical domain (no floats: each number as its shortest repr): the method, the FTS5 tokenizer and
    every setting of `cfg`. A receipt commits to its hash; a replay ranks only under the same one."""

    def value(v: object) -> object:
        if isinstance(v, bool) or isinstance(v, int) or isinstance(v, str):
            return v
        if isinstance(v, float):
            return repr(v)
        if isinstance(v, tuple):
            return [value(x) for x in v]
        raise TypeError(f"ranking config: {type(v).__name__} is not a config value")

    return {"name": RANKING_CONFIG, "method": method, "tokenizer": tokenizer, "index": {k: value(v) for k, v in cfg.as_dict().items()}}
