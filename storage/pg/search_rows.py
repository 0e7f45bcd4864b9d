"""One search's statements on PostgreSQL: the matching rows, FTS5's bm25 over their term counts, the best kept.

A term's idf counts every row of the session that holds it, excluded seqs included (as FTS5's
bm25 does: it computes n(q) apart from the statement's WHERE): the search_df table keeps that n
per session and term. The tsquery (an OR of the terms, session-prefixed) finds the matching rows
through the GIN index; the statement (sql.search_rank_sql) scores each with the formula of FTS5's
bm25 and keeps the best `limit` (plus a few); their bm25 is then computed again here, exactly as
FTS5 does (storage/pg/terms.py), and the `limit` best kept. They come back with the columns of
retrieval.sql.search_sql, so storage.common.retrieval.searcher.ranked_hits ranks them with the SQLite index's code.

Pruning (MaxScore): a term's share of a row's bm25 is below idf * (k1 + 1), whatever the row. The
statement first scores only the rows holding one of the rarest terms (enough of them to fill
`limit`); if the `limit`-th of those scores at least the bounds of the other terms added up, no row
holding only the others can rank among the `limit`, and the answer is exact. Otherwise a row holding
none of those terms can rank only if the bounds of the terms it holds reach that score: `covers`
lists the sets of terms that do (the first terms, best bound first, whose bounds reach it), and one
more statement scores the rows that hold all of one set and none of the terms scored already (the
GIN index finds them: an OR of ANDs), which proves the answer, exact again. Past MAX_SETS sets it
scores every unscored row of the terms the score says suffice instead. A term that FTS5 would split
in several (a phrase) is scored row by row in Python (_scan_all), without pruning.

A search's round trips: sql.SEARCH_OPEN (the session, its statistics and its terms' row counts, read
by storage/pg/index.py), then one rank statement, two when pruning needs the second (each returns
the kept rows' columns for the hit as well); no transaction (each statement has a snapshot of its own,
as in a READ COMMITTED transaction).
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
from storage.pg import sql
from storage.pg.terms import K1, bm25, idf, phrase_freq, phrase_terms, tsquery_literal, tsquery_of_sets, unpack

_WORD = re.compile(r"[^\W_]+")
SLACK = 16  # rows the statement returns beyond `limit`: its sums may differ from FTS5's in the last bit
MAX_SETS = 64  # pruning: the second statement's tsquery holds at most this many sets of terms (else every row)
MARGIN = 1e-9  # pruning: a set's bounds must reach the limit-th score less this share (the sums' rounding differs)
FIRST = 3.0  # pruning: the first statement scores the rarest terms' rows until FIRST * (limit + excluded + SLACK)
Counts = list[tuple[int, int]]  # per query term: (count in the text, count in the context)
Ranked = tuple[float, int, int, Counts, tuple[Any, ...]]  # exact bm25, seq, tokens, counts, sql.SEARCH_RANK_DETAILS


@dataclass(slots=True)
class Scan:
    """What one statement found: the kept rows (search_sql's columns, best first) and the figures explain shows."""

    rows: list[tuple[Any, ...]] = field(default_factory=list)
    terms: list[str] = field(default_factory=list)  # the query terms it ran
    phrases: list[tuple[str, ...]] = field(default_factory=list)  # each term's FTS5 terms
    n_rows: int = 0
    matching: list[int] = field(default_factory=list)  # per term: the session's rows matching it
    counts: dict[int, Counts] = field(default_factory=dict)  # per kept seq
    statements: int = 0  # scoring statements run (more than 1: pruning needed more terms to prove its answer)


def _phrase_counts(cells: tuple[Any, ...], col: dict[str, int], phrases: list[tuple[str, ...]]) -> Counts:
    out: Counts = []
    for ph in phrases:
        found = [cells[col[t]] for t in ph]
        if not found or any(c is None for c in found):
            out.append((0, 0))
        else:  # one term nearly always; a token FTS5 splits in several is counted by its rarest part
            pairs = [unpack(int(c)) for c in found]
            out.append((min(t for t, _ in pairs), min(c for _, c in pairs)))
    return out


@dataclass(frozen=True, slots=True)
class Stats:
    """What a search reads of its session before any row (sql.SEARCH_OPEN, one statement with the session's row):
    bm25's N and the tokens of every row (avgdl), and how many rows hold each asked lexeme (absent: none)."""

    n_rows: int
    n_tokens: int
    held: dict[str, int]
    asked: frozenset[str]  # the lexemes `held` answers for (scan_rows reads the others' counts itself)


def scan_rows(
    conn: psycopg.Connection[Any],
    num: int,
    terms: list[str],
    exclude: set[int],
    limit: int,
    cfg: IndexConfig,
    stats: Stats,
) -> Scan:
    """The `limit` best rows of session `num` for an OR of `terms`, not in `exclude`, by `stats` (what a phrase
    FTS5 splits needs is read by _scan_all)."""
    phrases = [phrase_terms(t) for t in terms]
    if any(len(ph) != 1 for ph in phrases):
        return _scan_all(conn, num, terms, exclude, limit, cfg)
    scan = Scan(terms=list(terms), phrases=phrases, matching=[0] * len(phrases))
    if stats.n_rows <= 0:
        return scan
    n_rows, n_tokens = stats.n_rows, stats.n_tokens
    scan.n_rows = n_rows
    lex = sorted({ph[0] for ph in phrases})
    held = {t: stats.held.get(t, 0) for t in lex}
    if missing := [t for t in lex if t not in stats.asked]:
        held.update({str(t): int(n) for t, n in conn.execute(sql.SEARCH_DF, (num, missing)).fetchall()})
    scan.matching = [held[ph[0]] for ph in phrases]
    present = [t for t in lex if held[t] > 0]
    if not present:
        return scan
    idfs = [idf(n_rows, m) for m in scan.matching]
    bound = dict.fromkeys(present, 0.0)
    for ph, w in zip(phrases, idfs, strict=True):
        if ph[0] in bound:
            bound[ph[0]] += w * (K1 + 1.0)
    order = sorted(present, key=lambda t: (-bound[t], held[t], t))
    essential: list[str] = []
    for t in order:  # the terms worth most, until their rows can fill `limit` (excluded rows may be among them)
        essential.append(t)
        if sum(held[e] for e in essential) >= FIRST * (limit + len(exclude) + SLACK):
            break
    avgdl = n_tokens / n_rows
    # rest[m]: the bounds of order[m:] added up (what a row holding none of order[:m] can score at most)
    rest = [0.0] * (len(order) + 1)
    for m in range(len(order) - 1, -1, -1):
        rest[m] = rest[m + 1] + bound[order[m]]
    ranked: list[Ranked] = []
    seen: str | None = None  # the rows scored already, as a tsquery (a row holding one of its terms was scored whole)
    query = tsquery_literal(num, essential)
    while True:
        scan.statements += 1
        new = _ranked(conn, num, present, query, seen, phrases, idfs, exclude, limit, avgdl, cfg)
        ranked = sorted(ranked + new, key=lambda x: (x[0], x[1]))[: limit + SLACK]
        # the limit-th score so far; holding more terms' rows can only raise it
        theta = -ranked[limit - 1][0] if len(ranked) >= limit else 0.0
        if seen is not None:
            break  # the statement scored every unscored row that could reach the limit-th score (covers below)
        safe = next(m for m in range(len(essential), len(order) + 1) if rest[m] <= theta)
        if safe == len(essential):
            break  # no row holding only the other terms can rank among the `limit`
        # A row holding none of `essential` scores at most the bounds of the terms it holds added up: only rows holding
        # one of the sets of the other terms whose bounds reach the limit-th score can rank among the `limit`. The GIN
        # index finds just those (an OR of ANDs), so one more statement proves the answer, reading no row it can skip.
        sets = covers(order[len(essential) :], bound, theta * (1.0 - MARGIN), MAX_SETS)
        seen = tsquery_literal(num, essential)
        if sets is None:  # too many sets: every row holding one of the terms `safe` needs (that proves it too)
            query = tsquery_literal(num, order[len(essential) : safe])
        else:
            query = tsquery_of_sets(num, sets)
    for score, seq, ntok, pc, d in ranked[:limit]:
        own = bm25([phrase_freq(t, 0, 1.0, 0.0) for t, _ in pc], idfs, ntok, avgdl)
        scan.rows.append((
            seq, d[0], d[1], d[2], bytes(d[3]).decode("utf-8", "surrogatepass"), bytes(d[4]),
            d[5], d[6], score, float(d[7]), own, float(d[8]),
        ))  # fmt: skip
        scan.counts[seq] = pc
    return scan


def _ranked(
    conn: psycopg.Connection[Any],
    num: int,
    present: list[str],
    query: str,
    seen: str | None,
    phrases: list[tuple[str, ...]],
    idfs: list[float],
    exclude: set[int],
    limit: int,
    avgdl: float,
    cfg: IndexConfig,
) -> list[Ranked]:
    """The best rows matching the tsquery `query` and not `seen` by exact bm25, at most limit + SLACK."""
    col = {t: j for j, t in enumerate(present)}
    scored = [(i, col[ph[0]]) for i, ph in enumerate(phrases) if ph[0] in col]
    params: dict[str, Any] = {f"t{j}": t for j, t in enumerate(present)}
    params.update({f"w{k}": idfs[i] for k, (i, _) in enumerate(scored)})
    params.update(
        num=num, q=query, tw=cfg.text_weight, cw=cfg.context_weight, avgdl=avgdl, limit=limit + SLACK,
    )  # fmt: skip
    if seen is not None:
        params["seen"] = seen
    if exclude:
        params["exclude"] = sorted(exclude)
    statement = sql.search_rank_sql(len(present), [j for _, j in scored], exclude=bool(exclude), seen=seen is not None)
    rows = conn.execute(statement, params).fetchall()
    out: list[Ranked] = []
    tw, cw = cfg.text_weight, cfg.context_weight
    n = len(present)
    for r in rows:
        cells = r[2 : 2 + n]
        pc: Counts = [unpack(int(cells[col[ph[0]]])) if ph[0] in col and cells[col[ph[0]]] is not None else (0, 0)
                      for ph in phrases]  # fmt: skip
        score = bm25([phrase_freq(t, c, tw, cw) for t, c in pc], idfs, int(r[1]), avgdl)
        out.append((score, int(r[0]), int(r[1]), pc, tuple(r[2 + n :])))
    out.sort(key=lambda x: (x[0], x[1]))
    return out


def covers(terms: list[str], bound: dict[str, float], need: float, cap: int) -> list[tuple[str, ...]] | None:
    """Sets of `terms` such that any set whose bounds add up to `need` or more holds one of them; None past `cap`
    sets (or steps). `terms` best bound first: each set is the first terms, in that order, whose bounds reach `need`."""
    rest = [0.0] * (len(terms) + 1)
    for i in range(len(terms) - 1, -1, -1):
        rest[i] = rest[i + 1] + bound[terms[i]]
    out: list[tuple[str, ...]] = []
    steps = 0
    stack: list[tuple[int, tuple[str, ...], float]] = [(0, (), 0.0)]
    while stack:
        i, chosen, total = stack.pop()
        steps += 1
        if len(out) > cap or steps > 64 * cap:
            return None
        if chosen and total >= need:
            out.append(chosen)
        elif i < len(terms) and total + rest[i] >= need:
            stack.append((i + 1, chosen, total))  # without terms[i]
            stack.append((i + 1, (*chosen, terms[i]), total + bound[terms[i]]))  # with it (explored first)
    return out


def _scan_all(
    conn: psycopg.Connection[Any], num: int, terms: list[str], exclude: set[int], limit: int, cfg: IndexConfig
) -> Scan:
    """scan_rows row by row in Python: every matching row read, its counts matched phrase by phrase."""
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
