"""Why a hit ranked where it did (pure: searcher.py gathers the figures, this module states them).

`Index.search(..., explain=True)` fills `Hit.explain` with what `explain_hit` returns:
the query terms the event matched (in its own text, in its neighbours' context, or
both) with their idf in the session, the words FTS5 marked in the text, the raw
BM25 figures, the collapse score's parts, the tier, and every rule that fired.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from retrieval.config import IndexConfig
from retrieval.model import Hit
from retrieval.scoring import (
    CONTEXT,
    DATE_BOOST,
    ECHO,
    NOVELTY_FLOOR,
    SPEAKER_BOOST,
    STAND_IN_WEIGHT,
    TIER_NAMES,
    role_weight,
)

_MARKED = re.compile("\x02(.*?)\x03", re.S)
IDF_FLOOR = 1e-6  # FTS5's bm25 clamps a term's idf to this when the term is in half the rows or more


@dataclass(frozen=True, slots=True)
class TermMatch:
    term: str
    rows: int  # how many of the session's rows match it (text or context)
    idf: float
    columns: list[str]  # "text", "context"


def idf(n_rows: int, n_matching: int) -> float:
    """FTS5's bm25 idf: log((N - n + 0.5) / (n + 0.5)), never below IDF_FLOOR."""
    value = math.log((n_rows - n_matching + 0.5) / (n_matching + 0.5)) if n_rows > 0 else 0.0
    return value if value > 0 else IDF_FLOOR


def marked_words(highlighted: str) -> list[str]:
    """The distinct words FTS5's highlight() marked with \\x02 ... \\x03, in order."""
    return list(dict.fromkeys(w for w in _MARKED.findall(highlighted)))


def rules_fired(
    hit: Hit,
    *,
    own_bm25: float,
    n_rows: int,
    terms: Sequence[TermMatch],
    config: IndexConfig,
    context_tier: bool,
    date_match: str | None = None,
    speaker_named: bool = False,
) -> list[str]:
    """The ranking rules that applied to this hit, in words."""
    out = []
    if date_match is not None:
        level = "day" if date_match[:1].isdigit() else "year" if date_match.isdigit() else "month"
        out.append(f"date: its time falls on {date_match}, which the query names: score x {1 + DATE_BOOST[level]:g}")
    if speaker_named:
        out.append(f"speaker: the query names its speaker ({hit.meta.get('speaker')}): score x {1 + SPEAKER_BOOST:g}")
    if hit.meta.get("provider") == "offline" and hit.role == "assistant":
        out.append(f"offline stand-in reply: role weight {STAND_IN_WEIGHT}")
    if hit.echo and ECHO in config.tiers:
        out.append("echo (an assistant reply that only repeats memories): ranked below every other match")
    if hit.context_only and context_tier and not hit.echo:
        out.append("matched only through its neighbours' context: ranked below every hit matching in its own text")
    elif own_bm25 == 0.0:
        out.append("matched only through its neighbours' context")
    if terms and all(t.idf <= IDF_FLOOR for t in terms):
        out.append(
            f"every matched term is held by about half of the session's {n_rows} events or more: its idf is floored at "
            f"{IDF_FLOOR:g}, so BM25 hardly separates the hits and the collapse score decides"
        )
    return out


def explain_hit(
    *,
    hit: Hit,
    novelty: float,
    own_bm25: float,
    terms: Sequence[TermMatch],
    words: Sequence[str],
    n_rows: int,
    config: IndexConfig,
    context_tier: bool,
    boost: float = 1.0,
    date_match: str | None = None,
    speaker_named: bool = False,
) -> dict[str, Any]:
    weight = config.collapse_weight
    rw = role_weight(hit.role, hit.meta)
    return {
        "tier": TIER_NAMES[hit.echo and ECHO or (CONTEXT if hit.context_only else 0)],
        "terms": [{"term": t.term, "idf": t.idf, "rows": t.rows, "in": list(t.columns)} for t in terms],
        "words_in_text": list(words),
        "bm25": {
            "value": hit.bm25,
            "own_text_only": own_bm25,
            "weights": {"text": config.text_weight, "context": config.context_weight},
            "rows": n_rows,
        },
        "collapse": {
            "value": hit.collapse,
            "role_weight": rw,
            "novelty": novelty,
            "novelty_floor": NOVELTY_FLOOR,
            "formula": "role_weight * (floor + (1 - floor) * novelty)",
        },
        "score": {
            "value": hit.score,
            "formula": "-bm25 * (1 - w + w * collapse) * rules",
            "collapse_weight": weight,
            "factor": 1.0 - weight + weight * hit.collapse,
            "rules_factor": boost,
            "relative": hit.relative,
        },
        "rules": rules_fired(
            hit,
            own_bm25=own_bm25,
            n_rows=n_rows,
            terms=terms,
            config=config,
            context_tier=context_tier,
            date_match=date_match,
            speaker_named=speaker_named,
        ),
    }


def hybrid_line(parts: dict[str, Any]) -> str:
    """A hybrid hit's score in words (the semantic extra; storage/common/retrieval/hybrid.py): how it entered the
    pool, its lexical part, its cosine, the weight (and the gate that set it), the fused score."""
    cos = parts.get("cosine")
    if "cosine_part" not in parts:  # linear-fusion-v1's explanation: the cosine itself is the part
        shown = "none (not embedded yet)" if cos is None else f"{cos:.3f}"
        return (
            f"found by {parts.get('found_by')}: lexical share {parts.get('lexical_share', 0.0):.3f} + "
            f"{parts.get('weight', 1.0):g} x cosine {shown} = {parts.get('fused', 0.0):.3f} ({parts.get('tier')} tier)"
        )
    raw = parts.get("lexical_score")
    lex = f"lexical {parts.get('lexical_share', 0.0):.3f}" + (
        " (no lexical match)" if raw is None else f" (score {raw:.3f}, {parts.get('lexical_norm')})"
    )
    cos_shown = "none (not embedded yet)" if cos is None else f"{parts['cosine_part']:.3f} (cosine {cos:.3f}, {parts.get('cosine_norm')})"
    gate = float(parts.get("gate", 0.0))
    overlap = float(parts.get("overlap", 1.0))
    why = ""
    if gate > 0:
        below = overlap < gate
        why = (
            f"; {overlap:.0%} of the query's terms are in the session, "
            + (f"under {gate:.0%}: weight {parts.get('base_weight', 0.0):g} x {parts.get('gate_weight', 1.0):g}" if below else f"not under {gate:.0%}")
        )
    return (
        f"found by {parts.get('found_by')}: {lex} + {parts.get('weight', 1.0):g} x {cos_shown} = "
        f"{parts.get('fused', 0.0):.3f} ({parts.get('tier')} tier{why}; {parts.get('method')})"
    )


def explain_lines(info: dict[str, Any]) -> list[str]:
    """`Hit.explain` as lines a person reads (the CLI prints them under each row; a UI can too)."""
    if info.get("mode") == "hybrid":
        return [hybrid_line(info)]
    terms = ", ".join(
        f"{t['term']} (idf {t['idf']:.3g}, in {'+'.join(t['in'])})" for t in info["terms"]
    ) or "none of the query's terms"
    b, c, s = info["bm25"], info["collapse"], info["score"]
    out = [
        f"matched: {terms}" + (f"; words in its text: {', '.join(info['words_in_text'])}" if info["words_in_text"] else ""),
        f"bm25 {b['value']:.6g} (own text alone {b['own_text_only'] + 0.0:.6g}; weights text {b['weights']['text']:g}, "  # + 0.0: a context-only hit's -0.0 reads 0
        f"context {b['weights']['context']:g}; {b['rows']} events)",
        f"collapse {c['value']:.3f} = role weight {c['role_weight']:g} x ({c['novelty_floor']:g} + "
        f"{1 - c['novelty_floor']:g} x novelty {c['novelty']:.3f})",
        f"score {s['value']:.6g} = -bm25 x (1 - {s['collapse_weight']:g} + {s['collapse_weight']:g} x collapse) "
        f"x rules = -bm25 x {s['factor']:.3f} x {s['rules_factor']:g}; {info['tier']}",
    ]
    out.extend(f"rule: {r}" for r in info["rules"])
    return out
