"""Searching one session: the FTS5 query, the collapse re-ranking, explanations (Index.search).

text.py builds the query, sql.py the statement, scoring.py ranks (all pure);
this module runs the statement on the calling thread's read connection.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import orjson

from ledger import EventError, validate_session_id
from retrieval import bounded, sql
from retrieval.config import IndexConfig
from retrieval.dates import DateSpan, best_match, query_dates
from retrieval.explain import TermMatch, explain_hit, idf, marked_words
from retrieval.model import Candidate, Hit, SearchError, SearchResponse, check_k
from retrieval.scoring import CONTEXT, is_echo, query_boost, rank, relative
from retrieval.semantic import FUSION, HYBRID, LEXICAL_POOL, gate_overlap
from retrieval.text import MAX_QUERY_TERMS, Query, build_query, or_query, quote, stem, term_batches, tokens
from storage.common.retrieval.connection import batched
from storage.common.retrieval.vectors import Vectoring


def candidates_for(k: int) -> int:
    """How many BM25 matches the collapse score may re-rank for a top-k answer."""
    return min(max(4 * k, 40), 200)


@functools.lru_cache(maxsize=1024)
def _speaker_tokens(speaker: str) -> tuple[str, ...]:
    return tuple(tokens(speaker))


def candidate(row: Sequence[Any], spans: list[DateSpan], terms: Sequence[str], *, speaker_rule: bool) -> Candidate:
    """One row of sql.search_sql as a Candidate, with its echo flag and what the query rules give it."""
    meta = orjson.loads(row[5])
    novelty = float(row[11])
    when = best_match(spans, row[3]) if spans else None
    speaker = meta.get("speaker") if speaker_rule else None
    named = isinstance(speaker, str) and any(t in terms for t in _speaker_tokens(speaker))
    return Candidate(
        seq=row[0],
        event_id=row[1],
        role=row[2],
        ts=row[3],
        text=row[4],
        meta=meta,
        digest=row[6],
        chain=row[7],
        bm25=float(row[8]),
        collapse=float(row[9]),
        own_bm25=float(row[10]),
        echo=is_echo(row[2], novelty, meta, row[4]),
        novelty=novelty,
        boost=query_boost(date_level=None if when is None else when.level, speaker_named=named),
        date_match=None if when is None else when.describe(),
        speaker_named=named,
    )


def ranked_hits(
    session: str, q: Query, rows: Sequence[Sequence[Any]], *, n_events: int, k: int, config: IndexConfig
) -> tuple[list[tuple[Candidate, float]], list[Hit], bool]:
    """The top k of `rows` (sql.search_sql's columns) as Hits, with what explain needs (pure; both backends).

    Returns (ranked candidates with their scores, hits, whether the CONTEXT tier ranked below OWN).
    """
    spans = query_dates(q.text) if config.date_rule else []
    cands = [candidate(r, spans, q.terms, speaker_rule=config.speaker_rule) for r in rows]
    tiers = tuple(t for t in config.tiers if t != CONTEXT or n_events < config.context_tier_max_events)
    if not cands:
        return [], [], CONTEXT in tiers
    ranked = rank(cands, k, config.collapse_weight, tiers=tiers)
    shares = relative([score for _, score in ranked])
    hits = [
        c.hit(session, score=score, rank=i, relative=share, context_only=c.context_only)
        for i, ((c, score), share) in enumerate(zip(ranked, shares, strict=True), start=1)
    ]
    return ranked, hits, CONTEXT in tiers


class Searching(Vectoring):
    """search(): the top k events of one session for a free-text query."""

    def search(
        self,
        session: str,
        query: str,
        k: int = 8,
        exclude_seqs: Iterable[int] = (),
        *,
        explain: bool = False,
    ) -> SearchResponse:
        """The top min(k, matches) events of one session for a free-text query, best first.

        `explain`: each hit carries `explain` (matched terms and their weights, the
        collapse score's parts, the rules that fired; retrieval.explain).
        """
        k = check_k(k)
        try:
            validate_session_id(session)
        except EventError as exc:
            raise SearchError(str(exc)) from None
        if not isinstance(query, str):
            raise SearchError(f"query: must be a string, not {type(query).__name__}")
        exclude = self._exclude_list(exclude_seqs)
        q = build_query(query, max_terms=None)  # every term; _term_batches keeps the rarest
        if q.fts is None:
            return SearchResponse(session, query, k, [], q.reason)
        return self._guarded(lambda: self._search(session, q, k, exclude, explain))

    @staticmethod
    def _exclude_list(exclude_seqs: Iterable[int]) -> list[int]:
        """The seqs as a sorted list without repeats. No cap: they travel as one JSON array that SQLite reads once
        per query into a temporary b-tree, and the FTS match is filtered before its LIMIT (sql.search_sql)."""
        out = set()
        for s in exclude_seqs:
            if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= sql.MAX_SEQ:
                raise SearchError(f"exclude_seqs: {s!r} is not a seq")
            out.add(s)
        return sorted(out)

    def non_user_seqs(self, session: str, after_seq: int) -> list[int]:
        """The seqs of the session's indexed events after `after_seq` that are not the person's own (every role but
        'user': assistant, system, tool), ascending (chat.withheld asks which of them no turn's cites account for).
        Nothing indexed: []."""
        validate_session_id(session)  # a path-like id is refused before any file or row is touched
        row = self._reader().execute("SELECT num FROM watermarks WHERE session = ?", (session,)).fetchone()
        if row is None:
            return []
        num = int(row[0])
        lo, hi = (num << sql.SEQ_BITS) | (max(after_seq, -1) + 1), (num + 1) << sql.SEQ_BITS
        rows = self._reader().execute(
            "SELECT seq FROM events WHERE id >= ? AND id < ? AND role <> 'user' ORDER BY id", (lo, hi)
        ).fetchall()
        return [int(r[0]) for r in rows]

    def _session_row(self, session: str) -> tuple[int, int] | None:
        row = self._reader().execute("SELECT num, last_seq FROM watermarks WHERE session = ?", (session,)).fetchone()
        if row is None and self.ledger.exists(session):
            self._index_session(session, None, None)
            row = (
                self._reader().execute("SELECT num, last_seq FROM watermarks WHERE session = ?", (session,)).fetchone()
            )
        return None if row is None else (int(row[0]), int(row[1]))

    def _search(self, session: str, q: Query, k: int, exclude: list[int], explain: bool) -> SearchResponse:
        found = self._session_row(session)
        if found is None or found[1] < 0:
            return SearchResponse(session, q.text, k, [], f"session {session}: no events indexed")
        num, last_seq = found
        if last_seq + 1 <= len(exclude) and set(range(last_seq + 1)) <= set(exclude):
            # nothing left to find (a new session's first turn): no FTS query on a table
            # that was created a moment ago
            return SearchResponse(session, q.text, k, [], f"session {session}: no other events yet")
        # the session's document frequencies matter only to choose among more than MAX_QUERY_TERMS
        # terms or to prune a large session: otherwise one query with every term, no lookup
        cfg = self.config
        large = last_seq + 1 >= cfg.prune_min_events
        exact = large and cfg.exact_prune
        needs_df = len(q.terms) > MAX_QUERY_TERMS or (large and not exact)
        df = self._term_df(num, q.terms) if needs_df else {}
        batches = term_batches(
            q.terms, df, n_events=last_seq + 1, prune_share=cfg.prune_share,
            prune_min_events=sql.MAX_SEQ + 2 if exact else cfg.prune_min_events,
        )
        stmt = sql.search_sql(
            num, text_weight=cfg.text_weight, context_weight=cfg.context_weight, exclude=bool(exclude)
        )
        # the same pool with or without exclusions: they are filtered out before the LIMIT, so a turn's search and
        # the one without its revocations (chat.engine._retrieve) re-rank the same number of best matches
        hybrid = self._embedder is not None
        params: dict[str, Any] = {"limit": max(candidates_for(k), LEXICAL_POOL) if hybrid else candidates_for(k)}
        if exclude:
            params["exclude"] = orjson.dumps([sql.row_id(num, s) for s in exclude]).decode()
        rows: list[Any] = []
        used: list[str] = []
        # The first batch holds the rarest terms; the others run only when it matches nothing,
        # so a query never answers "no event matches" while one of its terms does.
        for used in batches:
            params["match"] = or_query(used)
            rows = self._bounded_rows(num, last_seq, stmt, params, used) if exact and len(used) > 1 else self._read_fresh(stmt, params)
            if rows:
                break
        match = params["match"]
        unused = [t for t in q.terms if t not in set(used)]
        if hybrid:
            return self._hybrid(session, num, last_seq, q, k, exclude, rows, explain, match, unused)
        ranked, hits, context_tier = ranked_hits(session, q, rows, n_events=last_seq + 1, k=k, config=cfg)
        if not hits:
            return SearchResponse(session, q.text, k, [], f"session {session}: no event matches", match, unused)
        if explain:
            hits = self._explained(num, used, match, ranked, hits, context_tier=context_tier)
        return SearchResponse(session, q.text, k, hits, None, match, unused)

    def _hybrid(
        self, session: str, num: int, last_seq: int, q: Query, k: int, exclude: list[int], rows: list[Any],
        explain: bool, match: str, unused: list[str],
    ) -> SearchResponse:
        """The semantic extra's search: the lexical rows and the session's nearest events, fused (hybrid.py)."""
        from storage.common.retrieval.hybrid import dense_cosines, hybrid_hits  # hybrid.py reads candidate() from here

        assert self._embedder is not None
        self._embed_at_search(session)  # the background thread's work, or the newest AT_SEARCH events here
        seqs, matrix = self._session_vectors(num)
        cos = dense_cosines(self._query_embedder(), q.text, seqs, matrix, exclude)
        lexical = {int(r[0]) for r in rows}
        dense = [s for s in cos.nearest if s not in lexical]
        overlap = gate_overlap(self._term_df(num, q.terms)) if FUSION.gate > 0 else 1.0
        hits = hybrid_hits(
            session, q, rows, self._dense_rows(num, dense), cos.of(lexical | set(cos.nearest)),
            n_events=last_seq + 1, k=k, config=self.config, overlap=overlap, explain=explain,
        )
        if not hits:
            return SearchResponse(session, q.text, k, [], f"session {session}: no event matches", match, unused, mode=HYBRID)
        return SearchResponse(session, q.text, k, hits, None, match, unused, mode=HYBRID)

    def _bounded_rows(self, num: int, last_seq: int, stmt: str, params: dict[str, Any], terms: Sequence[str]) -> list[Any]:
        """What `stmt` gives for the OR of `terms`, found with the score bound of retrieval.bounded (exact)."""
        conn = self._reader()
        fts = sql.fts_table(num)
        block = conn.execute(f"SELECT block FROM {fts}_data WHERE id = 1").fetchone()  # noqa: S608 - a table name from an int
        if block is None:
            return self._read_fresh(stmt, params)
        n_rows = bounded.varints(bytes(block[0]))[0]
        hits = {t: self._hits(num, last_seq, n_rows, t) for t in terms}
        order = bounded.rarest_first(terms, hits)
        limit = int(params["limit"])
        m = bounded.first_split(order, hits, n_rows, self.config.prune_share)
        while True:
            both = bounded.split_matches(order, m)
            if both is None:
                return self._read_fresh(stmt, params)
            rows = bounded.merged(
                self._read_fresh(stmt, {**params, "match": both[0]}), self._read_fresh(stmt, {**params, "match": both[1]}), limit
            )
            if bounded.settled(rows, limit, n_rows, hits, order[m:]):
                return [list(r) for r in rows]
            m = bounded.next_split(order, hits, n_rows, m, rows, limit)

    def _hits(self, num: int, last_seq: int, n_rows: int, term: str) -> int:
        """How many of the session's rows hold `term` (FTS5's count, as bm25() counts it for the idf), cached per
        state of the session's table (its last seq and row count: an append or a forget changes one of them)."""
        cache: dict[tuple[int, int, int, str], int] = self.__dict__.setdefault("_hits_cache", {})
        key = (num, last_seq, n_rows, term)
        found = cache.get(key)
        if found is None:
            if len(cache) > 100_000:
                cache.clear()
            found = cache[key] = int(self._reader().execute(sql.count_sql(num), (quote(term),)).fetchone()[0])
        return found

    def _term_df(self, num: int, terms: Sequence[str]) -> dict[str, int]:
        """Each query term's document frequency in the session (by its content-term stem; 0 = no event holds it)."""
        stems = {t: stem(t) for t in terms}
        df: dict[str, int] = {}
        for part in batched(sorted(set(stems.values())), 500):
            df.update(self._reader().execute(sql.terms_df_sql(len(part)), (num, *part)).fetchall())
        return {t: int(df.get(s, 0)) for t, s in stems.items()}

    def _explained(
        self,
        num: int,
        terms: list[str],
        match: str,
        ranked: list[tuple[Candidate, float]],
        hits: list[Hit],
        *,
        context_tier: bool,
    ) -> list[Hit]:
        """`hits` with `explain` filled in: a few more FTS5 queries over the hits' rows only."""
        conn = self._reader()
        lo, hi = sql.session_range(num)
        n_rows = int(conn.execute("SELECT count(*) FROM events WHERE id BETWEEN ? AND ?", (lo, hi)).fetchone()[0])
        rids = [sql.row_id(num, h.seq) for h in hits]
        per_term: dict[str, tuple[int, set[int], set[int]]] = {}
        in_rows = sql.match_in_rows_sql(num, len(rids))
        for t in terms:
            n = int(conn.execute(sql.count_sql(num), (quote(t),)).fetchone()[0])
            own = {int(r[0]) for r in conn.execute(in_rows, (f"text : {quote(t)}", *rids))}
            ctx = {int(r[0]) for r in conn.execute(in_rows, (f"context : {quote(t)}", *rids))}
            per_term[t] = (n, own, ctx)
        marked = {int(r[0]): (str(r[1]), str(r[2])) for r in conn.execute(sql.highlight_sql(num, len(rids)), (match, *rids))}
        out = []
        for h, rid, (c, _) in zip(hits, rids, ranked, strict=True):
            matched = [
                TermMatch(t, n, idf(n_rows, n), [col for col, rows in (("text", own), ("context", ctx)) if rid in rows])
                for t, (n, own, ctx) in per_term.items()
                if rid in own or rid in ctx
            ]
            text_hl, _ctx_hl = marked.get(rid, ("", ""))
            info = explain_hit(
                hit=h, novelty=c.novelty, own_bm25=c.own_bm25, terms=matched, words=marked_words(text_hl),
                n_rows=n_rows, config=self.config, context_tier=context_tier, boost=c.boost,
                date_match=c.date_match, speaker_named=c.speaker_named,
            )
            out.append(replace(h, explain=info))
        return out
