"""Exact top-n BM25 with a score bound (MaxScore), for large sessions (pure; searcher.py runs the SQL).

FTS5's bm25() is a sum over the query's phrases: idf(t) * w(k1 + 1) / (w + k1(1 - b + b|D|/avgdl)), where w is the
row's column-weighted count of t. Each term's part is below idf(t) * (k1 + 1) whatever the row. So split the terms,
rarest first, into E and N: a row that holds no E term scores below bound(N) = (k1 + 1) * sum of N's idf. Two
queries over the rows holding an E term — `(E) AND (N)` and `(E) NOT (N)`, each with every phrase of the query, so
bm25() gives each row its full score, the same as the plain OR query gives it — find the best n of those rows; when
the n-th of them scores above bound(N), no other row can enter: the answer is the exhaustive one. Otherwise a term
moves from N to E (as many as the n-th score shows are needed) and the queries run again; with N empty it is the
plain query. bm25() then runs over the rows holding a rare term, not over every row holding a common one.

Measured at 1M events (bench/HISTORY.md, issue 15): the same top 40 as the exhaustive query for every question, at
about a third of its p50; the p95 stays high for questions made of common words only (the bound, (k1 + 1) * idf,
is far above what a common word adds to a real row, so most of their rows must be scored).

What it costs (bench/HISTORY.md, issue 30, `python bench/search_bound.py`): about 1.3 µs per row a statement scores
(every row holding an E term) plus about 43 ns per row of every phrase's doclist (bm25() counts them once per
statement for the idf), two statements per split. At 1M the rows to score are 66k / 268k at p50 / p95 for the
scale bar's rare-term questions, 1.2x what the bound allows at best (the 40th score known in advance).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from retrieval.text import or_query

K1 = 1.2  # FTS5's bm25() constants (fts5_aux.c)
SLACK = 1e-9  # relative margin for float rounding: a bound a hair too high costs a term, never a wrong answer


def varints(data: bytes) -> list[int]:
    """SQLite's varints (big-endian 7-bit groups, a 9th byte of 8 bits), as FTS5 stores its 'averages' record."""
    out: list[int] = []
    i = 0
    while i < len(data):
        v = 0
        for j in range(9):
            if i >= len(data):
                raise ValueError("a varint runs past the end of the record")
            c = data[i]
            i += 1
            if j == 8:
                v = (v << 8) | c
                break
            v = (v << 7) | (c & 0x7F)
            if not c & 0x80:
                break
        out.append(v)
    return out


def idf(n_rows: int, n_hits: int) -> float:
    """FTS5's idf of a phrase held by `n_hits` of `n_rows` rows (1e-6 where the log is not positive)."""
    value = math.log((n_rows - n_hits + 0.5) / (n_hits + 0.5))
    return value if value > 0.0 else 1e-6


def bound(n_rows: int, hits: Mapping[str, int], terms: Sequence[str]) -> float:
    """An upper bound (strict, with SLACK) on what `terms` add together to any row's bm25 relevance."""
    total = sum((K1 + 1.0) * idf(n_rows, hits[t]) for t in terms)
    return total * (1.0 + SLACK) + SLACK


def rarest_first(terms: Sequence[str], hits: Mapping[str, int]) -> list[str]:
    """Terms by ascending row count; ties keep the query's order."""
    return [t for _, _, t in sorted((hits[t], i, t) for i, t in enumerate(terms))]


def first_split(order: Sequence[str], hits: Mapping[str, int], n_rows: int, share: float) -> int:
    """How many of the rarest terms form E at first: those held by at most `share` of the rows (at least one)."""
    return max(1, sum(1 for t in order if hits[t] <= share * n_rows))


def split_matches(order: Sequence[str], m: int) -> tuple[str, str] | None:
    """The two FTS5 expressions for E = order[:m], N = the rest; None when N is empty (run the plain query)."""
    e, n = list(order[:m]), list(order[m:])
    if not n:
        return None
    return f"({or_query(e)}) AND ({or_query(n)})", f"({or_query(e)}) NOT ({or_query(n)})"


def merged(a: Sequence[Sequence[Any]], b: Sequence[Sequence[Any]], limit: int) -> list[Sequence[Any]]:
    """The best `limit` of two disjoint row sets of sql.search_sql (column 8 is bm25, lower is better; then seq)."""
    return sorted([*a, *b], key=lambda r: (float(r[8]), int(r[0])))[:limit]


def settled(rows: Sequence[Sequence[Any]], limit: int, n_rows: int, hits: Mapping[str, int], rest: Sequence[str]) -> bool:
    """Whether `rows` (the best of the rows holding an E term) is the exact answer: `limit` of them, the last scoring
    above what the `rest` terms could give a row holding none of E."""
    return len(rows) == limit and -float(rows[-1][8]) > bound(n_rows, hits, rest)


def next_split(order: Sequence[str], hits: Mapping[str, int], n_rows: int, m: int, rows: Sequence[Sequence[Any]], limit: int) -> int:
    """The next size of E after a split that did not settle: the smallest larger one whose bound is below the n-th
    score found (a lower bound of the final n-th score). When fewer than `limit` rows were found there is no such
    score yet: E takes the next rarest terms until their row counts could add up to `limit` (at least one more
    term), not every term at once (a question whose rarest word is in no row ran the whole query: 2.5 s at 1M)."""
    if len(rows) < limit:
        m2, total = m + 1, sum(hits[t] for t in order[: m + 1])
        while m2 < len(order) and total < limit:
            total += hits[order[m2]]
            m2 += 1
        return m2
    theta = -float(rows[-1][8])
    m2 = m + 1
    while m2 < len(order) and bound(n_rows, hits, order[m2:]) >= theta:
        m2 += 1
    return m2
