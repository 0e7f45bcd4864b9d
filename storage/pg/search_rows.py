"""One search's statement on PostgreSQL: the matching rows, FTS5's bm25 over their term counts, the best kept.

The tsquery (an OR of the query terms' FTS5 terms, session-prefixed) finds every matching row of the
session through the GIN index; each row brings its token count and the counts of the query's terms.
As FTS5 does, a term's idf counts every row of the session that matches it, excluded seqs included
(FTS5 computes it apart from the statement's WHERE), and the excluded rows are dropped before the
`limit` best are kept. The kept rows come back with the columns of retrieval.sql.search_sql, so
retrieval.searcher.ranked_hits ranks them with the SQLite index's own code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

import psycopg

from retrieval.config import IndexConfig
from retrieval.explain import TermMatch, explain_hit
from retrieval.model import Candidate, Hit
from retrieval.text import fold

from . import sql
from .terms import bm25, idf, phrase_freq, phrase_terms, tsquery_literal

_WORD = re.compile(r"[^\W_]+")
Counts = list[tuple[int, int]]  # per query term: (count in the text, count in the context)


@dataclass(slots=True)
class Scan:
    """What one statement found: the kept rows (search_sql's columns, best first) and the figures explain shows."""

    rows: list[tuple[Any, ...]] = field(default_factory=list)
    terms: list[str] = field(default_factory=list)  # the query terms it ran
    phrases: list[tuple[str, ...]] = field(default_factory=list)  # each term's FTS5 terms
    n_rows: int = 0
    matching: list[int] = field(default_factory=list)  # per term: the session's rows matching it
    counts: dict[int, Counts] = field(default_factory=dict)  # per kept seq


def _phrase_counts(cells: tuple[Any, ...], col: dict[str, int], phrases: list[tuple[str, ...]]) -> Counts:
    out: Counts = []
    for ph in phrases:
        found = [cells[col[t]] for t in ph]
        if not found or any(c is None for c in found):
            out.append((0, 0))
        else:  # one term nearly always; a token FTS5 splits in several is counted by its rarest part
            out.append((min(int(c[0]) for c in found), min(int(c[1]) for c in found)))
    return out


def scan_rows(
    conn: psycopg.Connection[Any], num: int, terms: list[str], exclude: set[int], limit: int, cfg: IndexConfig
) -> Scan:
    """The `limit` best rows of session `num` for an OR of `terms`, not in `exclude`."""
    phrases = [phrase_terms(t) for t in terms]
    lex = sorted({x for ph in phrases for x in ph})
    scan = Scan(terms=list(terms), phrases=phrases, matching=[0] * len(phrases))
    if not lex:
        return scan
    found = conn.execute(sql.search_scan_sql(len(lex)), (*lex, tsquery_literal(num, lex), num)).fetchall()
    if not found:
        return scan
    stats = conn.execute(sql.SEARCH_STATS, (num,)).fetchone()
    if stats is None or int(stats[0]) <= 0:
        return scan
    n_rows, n_tokens = int(stats[0]), int(stats[1])
    scan.n_rows = n_rows
    col = {t: i for i, t in enumerate(lex)}
    counted: list[tuple[int, int, Counts]] = []
    for r in found:
        pc = _phrase_counts(tuple(r[2:]), col, phrases)
        hit = False
        for i, (t, c) in enumerate(pc):
            if t or c:
                scan.matching[i] += 1
                hit = True
        if hit:
            counted.append((int(r[0]), int(r[1]), pc))
    avgdl = n_tokens / n_rows
    idfs = [idf(n_rows, m) for m in scan.matching]
    tw, cw = cfg.text_weight, cfg.context_weight
    scored = [
        (bm25([phrase_freq(t, c, tw, cw) for t, c in pc], idfs, ntok, avgdl), seq, ntok, pc)
        for seq, ntok, pc in counted
        if seq not in exclude
    ]
    scored.sort(key=lambda s: (s[0], s[1]))
    kept = scored[:limit]
    if not kept:
        return scan
    details = {int(d[0]): d for d in conn.execute(sql.SEARCH_HITS, (num, [s for _, s, _, _ in kept])).fetchall()}
    for score, seq, ntok, pc in kept:
        d = details.get(seq)
        if d is None:  # forgotten between the two statements
            continue
        own = bm25([phrase_freq(t, 0, 1.0, 0.0) for t, _ in pc], idfs, ntok, avgdl)
        scan.rows.append((
            seq, d[1], d[2], d[3], bytes(d[4]).decode("utf-8", "surrogatepass"), bytes(d[5]),
            d[6], d[7], score, float(d[8]), own, float(d[9]),
        ))  # fmt: skip
        scan.counts[seq] = pc
    return scan


def _words(text: str, terms: set[str]) -> list[str]:
    """The distinct words of `text` whose FTS5 term is among `terms` (what FTS5's highlight() marks)."""
    out: dict[str, None] = {}
    for w in _WORD.findall(text):
        if set(phrase_terms(fold(w))) & terms:
            out.setdefault(w, None)
    return list(out)


def explained(
    scan: Scan, ranked: list[tuple[Candidate, float]], hits: list[Hit], cfg: IndexConfig, *, context_tier: bool
) -> list[Hit]:
    """`hits` with `explain` filled in, from the figures the scan already holds (no more queries)."""
    out = []
    for h, (c, _) in zip(hits, ranked, strict=True):
        pc = scan.counts.get(h.seq, [(0, 0)] * len(scan.terms))
        matched = []
        in_text: set[str] = set()
        for term, ph, n, (t, x) in zip(scan.terms, scan.phrases, scan.matching, pc, strict=True):
            if t or x:
                cols = [name for name, k in (("text", t), ("context", x)) if k]
                matched.append(TermMatch(term, n, idf(scan.n_rows, n), cols))
            if t:
                in_text.update(ph)
        info = explain_hit(
            hit=h, novelty=c.novelty, own_bm25=c.own_bm25, terms=matched, words=_words(h.text, in_text),
            n_rows=scan.n_rows, config=cfg, context_tier=context_tier, boost=c.boost,
            date_match=c.date_match, speaker_named=c.speaker_named,
        )  # fmt: skip
        out.append(replace(h, explain=info))
    return out
