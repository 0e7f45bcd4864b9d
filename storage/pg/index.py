"""The search index on PostgreSQL: `PgIndex`, with the surface of `retrieval.Index` the engine uses.

search, index_session, catch_up, rebuild, forget_events, purge_session, close. The rows are planned
by the SQLite index's own pure code (retrieval.indexing.plan_rows: the same rows, context, novelty
and collapse score, the same skipped events), the terms are FTS5's (storage/pg/terms.py), the
match is a GIN-indexed tsvector, the relevance FTS5's bm25 computed from stored term counts, and
the ranking storage.common.retrieval.searcher.ranked_hits: the same hits as the SQLite index (docs/RETRIEVAL.md,
"PostgreSQL", says where they can differ). Forgetting is storage/pg/index_forget.py.

Several replicas may index and search at once: each chunk's transaction locks the session's row
(SELECT ... FOR UPDATE) and checks the watermark it continues; one that moved (another replica got
there first) starts again from it.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import islice
from typing import Any, Protocol

import orjson
import psycopg

from ledger import Event, EventError, validate_session_id
from ledger.corrupted import LedgerCorrupted
from retrieval.config import IndexConfig
from retrieval.indexing import Plan, plan_rows
from retrieval.model import IndexUnavailable, SearchError, SearchResponse, check_k
from retrieval.semantic import FUSION, HYBRID, LEXICAL_POOL, gate_overlap
from retrieval.sql import MAX_SEQ
from retrieval.text import MAX_QUERY_TERMS, Query, build_query, content_terms, or_query, term_batches
from storage.common.retrieval.hybrid import dense_cosines, hybrid_hits
from storage.common.retrieval.indexer import CHUNK, GENESIS_HEX, RACE_ATTEMPTS, TAIL_BY_OFFSET, Indexing
from storage.common.retrieval.searcher import Searching, candidates_for, ranked_hits
from storage.pg import sql
from storage.pg.connect import Database
from storage.pg.index_forget import Forgetting
from storage.pg.search_rows import Scan, Stats, explained, scan_rows
from storage.pg.terms import key, packed_counts, phrase_terms, term_counts, tsvector_literal, unpack
from storage.pg.vectors import PgVectoring

log = logging.getLogger("storage.pg")
Progress = Callable[[str, int], None]


class LedgerSource(Protocol):
    """What the index reads from a ledger (ledger.Ledger, or the PostgreSQL ledger)."""

    def events(self, session: str, start_seq: int = 0) -> Iterator[Event]: ...
    def read_events(self, session: str, seqs: Iterable[int]) -> list[Event]: ...
    def head(self, session: str) -> tuple[int, str]: ...
    def exists(self, session: str) -> bool: ...
    def sessions(self) -> list[str]: ...


class _Raced(Exception):
    """Another process moved a session's watermark (or forgot rows) while we indexed it."""


def _counts_of(texts: Sequence[Counter[str]], i: int, before: int, after: int) -> Counter[str]:
    """The term counts of indexing.context_of(texts, i, ...): the neighbours' text counts added up
    (CONTEXT_SEP holds no token, so the joined context's tokens are the neighbours' tokens)."""
    out: Counter[str] = Counter()
    for c in list(texts[max(0, i - before) : i]) + list(texts[i + 1 : i + 1 + after]):
        out.update(c)
    return out


@contextmanager
def _autocommit(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """A search's statements each in a transaction of its own: no BEGIN and COMMIT round trips. Nothing is lost: in
    a READ COMMITTED transaction every statement takes a new snapshot anyway. The pool's connections are handed out
    with autocommit off, so it is set back (a connection left busy or broken is discarded by the pool)."""
    conn.autocommit = True
    try:
        yield
    finally:
        if conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            conn.autocommit = False


class PgIndex(Forgetting, PgVectoring):
    """The index over every session of one ledger, in `database` (which the caller owns and closes)."""

    def __init__(self, database: Database, ledger: LedgerSource, *, config: IndexConfig | None = None) -> None:
        self.db = database
        self.ledger = ledger
        self.config = config if config is not None else IndexConfig()
        self.warnings: list[str] = []

    # -- searching -----------------------------------------------------------------------------------------
    def search(
        self,
        session: str,
        query: str,
        k: int = 8,
        exclude_seqs: Iterable[int] = (),
        *,
        explain: bool = False,
    ) -> SearchResponse:
        """The top min(k, matches) events of one session for a free-text query, best first (as Index.search)."""
        k = check_k(k)
        try:
            validate_session_id(session)
        except EventError as exc:
            raise SearchError(str(exc)) from None
        if not isinstance(query, str):
            raise SearchError(f"query: must be a string, not {type(query).__name__}")
        exclude = Searching._exclude_list(exclude_seqs)
        q = build_query(query, max_terms=None)
        if q.fts is None:
            return SearchResponse(session, query, k, [], q.reason)
        return self._search(session, q, k, exclude, explain)

    def non_user_seqs(self, session: str, after_seq: int) -> list[int]:
        """The seqs of the session's indexed events after `after_seq` whose role is not 'user', ascending (as
        Index.non_user_seqs)."""
        validate_session_id(session)  # a path-like id is refused before any file or row is touched
        with self.db.connection() as conn:
            return [int(r[0]) for r in conn.execute(sql.SEARCH_NON_USER_SEQS, (session, after_seq)).fetchall()]

    def _search(self, session: str, q: Query, k: int, exclude: list[int], explain: bool) -> SearchResponse:
        if self._embedder is not None:
            self._embed_at_search(session)  # the background thread's work, or the newest AT_SEARCH events here
        found = self._search_indexed(session, q, k, exclude, explain)
        if found is None and self.ledger.exists(session):
            # Not indexed yet (a session's first turn searches before its first message is indexed): index it with no
            # connection held here. Indexing takes connections of its own; holding one meanwhile, as many first
            # searches at once as the pool has connections waited on each other until the pool's timeout.
            self.index_session(session)
            found = self._search_indexed(session, q, k, exclude, explain)
        return found if found is not None else SearchResponse(session, q.text, k, [], f"session {session}: no events indexed")

    def _search_indexed(self, session: str, q: Query, k: int, exclude: list[int], explain: bool) -> SearchResponse | None:
        """The search over the session's index rows; None when the session has none."""
        cfg = self.config
        # The lexemes the query's one batch will score (a query of more terms is cut in batches by their document
        # frequency, read below: scan_rows reads those batches' row counts itself), so that one statement reads the
        # session's row, its statistics and their row counts (a phrase FTS5 splits is read by search_rows._scan_all).
        few = len(q.terms) <= MAX_QUERY_TERMS
        lex = sorted({ph[0] for t in q.terms if len(ph := phrase_terms(t)) == 1}) if few else []
        with self.db.connection() as conn, _autocommit(conn):
            found = conn.execute(sql.SEARCH_OPEN, (lex, session)).fetchone()
            if found is None:
                return None
            num, last_seq = int(found[0]), int(found[1])
            if last_seq < 0:
                return SearchResponse(session, q.text, k, [], f"session {session}: no events indexed")
            if last_seq + 1 <= len(exclude) and set(range(last_seq + 1)) <= set(exclude):
                return SearchResponse(session, q.text, k, [], f"session {session}: no other events yet")
            held = dict(zip(found[4] or [], map(int, found[5] or []), strict=True))
            stats = Stats(int(found[2]), int(found[3]), held, frozenset(lex))
            # as storage.common.retrieval.searcher: a large session keeps every term when the exact bound is on (scan_rows's MaxScore
            # proof makes the answer exhaustive's); share pruning drops the commonest only when it is off
            large = last_seq + 1 >= cfg.prune_min_events
            exact = large and cfg.exact_prune
            needs_df = len(q.terms) > MAX_QUERY_TERMS or (large and not exact)
            df = self._term_df(conn, num, q.terms) if needs_df else {}
            batches = term_batches(
                q.terms, df, n_events=last_seq + 1, prune_share=cfg.prune_share,
                prune_min_events=MAX_SEQ + 2 if exact else cfg.prune_min_events,
            )
            scan: Scan | None = None
            used: list[str] = []
            hybrid = self._embedder is not None
            pool = max(candidates_for(k), LEXICAL_POOL) if hybrid else candidates_for(k)
            for used in batches:
                scan = scan_rows(conn, num, used, set(exclude), pool, cfg, stats)
                if scan.rows:
                    break
            match = or_query(used)
            unused = [t for t in q.terms if t not in set(used)]
            rows = [] if scan is None else scan.rows
            if hybrid:
                return self._hybrid(conn, session, num, last_seq, q, k, exclude, rows, explain, match, unused)
            ranked, hits, context_tier = ranked_hits(session, q, rows, n_events=last_seq + 1, k=k, config=cfg)
            if not hits:
                return SearchResponse(session, q.text, k, [], f"session {session}: no event matches", match, unused)
            if explain and scan is not None:
                hits = explained(scan, ranked, hits, cfg, context_tier=context_tier)
            return SearchResponse(session, q.text, k, hits, None, match, unused)

    def _hybrid(
        self, conn: psycopg.Connection[Any], session: str, num: int, last_seq: int, q: Query, k: int,
        exclude: list[int], rows: list[Any], explain: bool, match: str, unused: list[str],
    ) -> SearchResponse:
        """The semantic extra's search: the lexical rows and the session's nearest events, fused (as Index._hybrid)."""
        assert self._embedder is not None
        seqs, matrix = self._session_vectors(conn, num)
        cos = dense_cosines(self._query_embedder(), q.text, seqs, matrix, exclude)
        lexical = {int(r[0]) for r in rows}
        dense = [s for s in cos.nearest if s not in lexical]
        overlap = gate_overlap(self._term_df(conn, num, q.terms)) if FUSION.gate > 0 else 1.0
        hits = hybrid_hits(
            session, q, rows, self._dense_rows(conn, num, dense), cos.of(lexical | set(cos.nearest)),
            n_events=last_seq + 1, k=k, config=self.config, overlap=overlap, explain=explain,
        )
        if not hits:
            return SearchResponse(session, q.text, k, [], f"session {session}: no event matches", match, unused, mode=HYBRID)
        return SearchResponse(session, q.text, k, hits, None, match, unused, mode=HYBRID)

    @staticmethod
    def _term_df(conn: psycopg.Connection[Any], num: int, terms: Sequence[str]) -> dict[str, int]:
        """As Index._term_df: each query term's document frequency by its content-term stem."""
        from retrieval.text import stem

        stems = {t: key(stem(t)) for t in terms}
        df = dict(conn.execute(sql.SEARCH_TERMS_DF, (num, sorted(set(stems.values())))).fetchall())
        return {t: int(df.get(s, 0)) for t, s in stems.items()}

    # -- indexing ------------------------------------------------------------------------------------------
    def catch_up(self, progress: Progress | None = None) -> list[str]:
        """Bring every session up to date with its ledger; drop sessions it no longer holds; return warnings."""
        warnings: list[str] = []
        in_ledger = set(self.ledger.sessions())
        with self.db.connection() as conn:
            indexed = {str(s): int(n) for s, n in conn.execute(sql.SEARCH_SESSIONS).fetchall()}
        dropped = sorted(set(indexed) - in_ledger)
        for session in dropped:
            warnings.append(f"session {session}: no longer in the ledger; dropped from the index")
            with self.db.transaction() as conn:
                conn.execute(sql.SEARCH_DROP_SESSION, (indexed[session],))
        if dropped:
            self._vacuum()
        for session in sorted(in_ledger):
            warnings.extend(self._index_session(session, None, progress))
        for w in warnings:
            log.warning("%s", w)
        return warnings

    def scrub_copies(self) -> tuple[str, ...]:
        """Nothing: no copy of an index is moved aside here (storage.api.SearchIndex)."""
        return ()

    def drop_session(self, session: str) -> None:
        """Drop a deleted session's rows (idempotent), then VACUUM the search tables."""
        validate_session_id(session)
        with self.db.transaction() as conn:
            row = conn.execute(sql.SEARCH_SESSION, (session,)).fetchone()
            if row is None:
                return
            conn.execute(sql.SEARCH_DROP_SESSION, (int(row[0]),))
        self.__dict__.get("_query_cache", {}).clear()  # the semantic extra's last queries' vectors
        self._vacuum()

    def rebuild(self, progress: Progress | None = None) -> list[str]:
        """Empty the index and index every ledger from scratch."""
        with self.db.transaction() as conn:
            conn.execute(sql.SEARCH_TRUNCATE)
        return self.catch_up(progress)

    def index_session(
        self, session: str, new_events: Sequence[Event] | None = None, *, progress: Progress | None = None
    ) -> list[str]:
        """Index what the session's ledger holds beyond the watermark; return warnings (as Index.index_session)."""
        validate_session_id(session)
        warnings = self._index_session(session, new_events, progress)
        self._wake(session)  # the semantic extra's background embedding, when it runs
        return warnings

    def _index_session(
        self, session: str, new_events: Sequence[Event] | None, progress: Progress | None
    ) -> list[str]:
        for attempt in range(RACE_ATTEMPTS):
            try:
                return self._index_once(session, new_events, progress)
            except _Raced:
                new_events = None
                time.sleep(random.uniform(0, 0.005 * (attempt + 1)))
        raise IndexUnavailable(f"session {session}: the watermark keeps moving under us (another writer?)")

    def _index_once(self, session: str, new_events: Sequence[Event] | None, progress: Progress | None) -> list[str]:
        if not self.ledger.exists(session):
            return []
        try:
            count, head = self.ledger.head(session)
        except LedgerCorrupted as exc:
            return [f"session {session}: {exc}; its index is left as it was"]
        num, last_seq, last_chain = self._watermark(session)
        if last_seq + 1 == count and last_chain == head:
            return []
        warnings: list[str] = []
        if count < last_seq + 1:
            warnings.append(
                f"session {session}: the ledger holds {count} events but {last_seq + 1} were indexed; re-indexed from scratch"
            )
            self._reset(num, last_seq, last_chain)
            last_seq, last_chain = -1, GENESIS_HEX
        if new_events is not None and not isinstance(new_events, (list, tuple)):
            new_events = None  # a lazy sequence (an import's Imported: a query per event): the ledger's one pass below
        if new_events and Indexing._continues(new_events, last_seq, last_chain, count, head):
            return warnings + self._index_stream(session, num, iter(new_events), (last_seq, last_chain), progress)
        if last_seq >= 0:
            at = self.ledger.read_events(session, [last_seq])[0]
            if at.chain != last_chain:
                warnings.append(
                    f"session {session}: ledger does not match the index at seq {last_seq}: "
                    f"expected chain {last_chain}, found {at.chain}; re-indexed from scratch"
                )
                self._reset(num, last_seq, last_chain)
                last_seq, last_chain = -1, GENESIS_HEX
        if count - (last_seq + 1) <= TAIL_BY_OFFSET:
            stream = iter(self.ledger.read_events(session, range(last_seq + 1, count)))
        else:
            stream = self.ledger.events(session, start_seq=last_seq + 1)
        return warnings + self._index_stream(session, num, stream, (last_seq, last_chain), progress)

    def _watermark(self, session: str) -> tuple[int, int, str]:
        with self.db.transaction() as conn:
            row = conn.execute(sql.SEARCH_SESSION, (session,)).fetchone()
            if row is None:
                conn.execute(sql.SEARCH_NEW_SESSION, (session, GENESIS_HEX))
                row = conn.execute(sql.SEARCH_SESSION, (session,)).fetchone()
        assert row is not None
        return int(row[0]), int(row[1]), str(row[2])

    def _reset(self, num: int, last_seq: int, last_chain: str) -> None:
        """Forget every row of a session (to index it from scratch), if its watermark is still where we read it."""
        with self.db.transaction() as conn:
            now = conn.execute(sql.SEARCH_LOCK_SESSION, (num,)).fetchone()
            if now is None or (int(now[0]), str(now[1])) != (last_seq, last_chain):
                raise _Raced()
            conn.execute(sql.SEARCH_DROP_ROWS, (num,))
            conn.execute(sql.SEARCH_DROP_TERMS, (num,))
            conn.execute(sql.SEARCH_DROP_DF, (num,))
            conn.execute(sql.SEARCH_RESET, (GENESIS_HEX, num))

    def _index_stream(
        self, session: str, num: int, stream: Iterator[Event], last: tuple[int, str], progress: Progress | None
    ) -> list[str]:
        """Index `stream` (the events after the watermark `last`), CHUNK events per transaction."""
        before, after = self.config.context_before, self.config.context_after
        width = before + after
        forgets = self._forgets(num)
        fresh = last[0] < 0
        prior = self._tail_rows(num, last[0], width) if width else []
        seen: set[str] = set()
        warnings: list[str] = []
        while chunk := list(islice(stream, CHUNK)):
            expected = last
            last_seq, last_chain = last
            for ev in chunk:
                if ev.seq != last_seq + 1 or ev.prev != last_chain:
                    raise IndexUnavailable(
                        f"session {session}: ledger event at seq {ev.seq} does not continue seq {last_seq} "
                        f"(prev {ev.prev}, expected {last_chain})"
                    )
                last_seq, last_chain = ev.seq, ev.chain
            last = (last_seq, last_chain)
            if not fresh:
                self._load_seen(num, chunk, seen)
            plan = plan_rows(num=num, events=chunk, seen=seen, prior=prior, before=before, after=after)
            self._write(num, plan, prior, expected, last, forgets)
            if width:
                prior = (prior + [(r.seq, r.text) for r in plan.rows])[-width:]
            if plan.erased:
                self._forget(session, num, plan.erased)
                forgets = self._forgets(num)
                seen.clear()
                fresh = False
                prior = self._tail_rows(num, last[0], width) if width else []
            if progress is not None:
                progress(session, len(chunk))
        return warnings

    def _write(
        self,
        num: int,
        plan: Plan,
        prior: Sequence[tuple[int, str]],
        expected: tuple[int, str],
        last: tuple[int, str],
        forgets: int,
    ) -> None:
        """One chunk's rows, their neighbours' new context, the terms and the watermark, in one transaction."""
        before, after = self.config.context_before, self.config.context_after
        texts = term_counts([t for _, t in prior] + [r.text for r in plan.rows])
        p = len(prior)
        tokens = 0
        df: Counter[str] = Counter()  # rows holding each term, text or context: what search_df gains
        with self.db.transaction() as conn:
            now = conn.execute(sql.SEARCH_LOCK_SESSION, (num,)).fetchone()
            if now is None or (int(now[0]), str(now[1])) != expected or int(now[2]) != forgets:
                raise _Raced()
            if plan.context_updates:
                at = {seq: i for i, (seq, _) in enumerate(prior)}
                old = {
                    int(s): (tf, int(n))
                    for s, tf, n in conn.execute(sql.SEARCH_ROW_TF, (num, [s for s, _ in plan.context_updates]))
                }
                for seq, _context in plan.context_updates:
                    if seq not in old or seq not in at:
                        continue
                    tf_old, n_old = old[seq]
                    own = Counter({t: unpack(v)[0] for t, v in tf_old.items() if unpack(v)[0]})
                    ctx = _counts_of(texts, at[seq], before, after)
                    n_new = sum(ctx.values())
                    tf = packed_counts(own, ctx)
                    df.update(tf.keys() - tf_old.keys())
                    df.subtract(tf_old.keys() - tf.keys())
                    conn.execute(
                        sql.SEARCH_SET_CONTEXT,
                        (n_new, orjson.dumps(tf).decode(), tsvector_literal(num, list(tf)), num, seq),
                    )
                    tokens += n_new - n_old
            with conn.cursor().copy(sql.SEARCH_COPY_EVENTS) as copy:
                for j, r in enumerate(plan.rows):
                    own = texts[p + j]
                    ctx = _counts_of(texts, p + j, before, after) if (before or after) else Counter()
                    n_text, n_ctx = sum(own.values()), sum(ctx.values())
                    tokens += n_text + n_ctx
                    tf = packed_counts(own, ctx)
                    df.update(tf.keys())
                    copy.write_row((
                        num, r.seq, r.event_id, r.role, r.ts,
                        r.text.encode("utf-8", "surrogatepass"), r.meta.encode("utf-8", "surrogatepass"),
                        r.digest, r.chain, r.novelty, r.collapse, n_text, n_ctx,
                        orjson.dumps(tf).decode(), tsvector_literal(num, list(tf)),
                    ))  # fmt: skip
            if plan.df:
                stored = Counter({key(t): n for t, n in plan.df.items()})
                terms = sorted(stored)
                conn.execute(sql.SEARCH_UPSERT_TERMS, (num, terms, [stored[t] for t in terms]))
            changed = sorted(t for t, n in df.items() if n)
            if changed:
                conn.execute(sql.SEARCH_DF_ADD, (num, changed, [df[t] for t in changed]))
                if any(df[t] < 0 for t in changed):
                    conn.execute(sql.SEARCH_DF_GONE, (num,))
            conn.execute(sql.SEARCH_ADVANCE, (*last, len(plan.rows), tokens, num))

    def _forgets(self, num: int) -> int:
        with self.db.connection() as conn:
            row = conn.execute(sql.SEARCH_FORGETS, (num,)).fetchone()
        return 0 if row is None else int(row[0])

    def _tail_rows(self, num: int, last_seq: int, n: int) -> list[tuple[int, str]]:
        """(seq, text) of the session's last `n` rows up to `last_seq`, oldest first."""
        if last_seq < 0 or n == 0:
            return []
        with self.db.connection() as conn:
            rows = conn.execute(sql.SEARCH_ROWS_BEFORE, (num, last_seq + 1, n)).fetchall()
        return [(int(s), bytes(t).decode("utf-8", "surrogatepass")) for s, t in reversed(rows)]

    def _load_seen(self, num: int, chunk: Sequence[Event], seen: set[str]) -> None:
        wanted = {key(t): t for ev in chunk for t in content_terms(ev.text) if t not in seen}
        if not wanted:
            return
        with self.db.connection() as conn:
            rows = conn.execute(sql.SEARCH_TERMS_DF, (num, sorted(wanted))).fetchall()
        seen.update(wanted[str(r[0])] for r in rows)

    def close(self) -> None:
        """The background embedding stopped (VectorMode.stop_embedding); the Database (and the ledger) belong to the
        caller."""
        self.stop_embedding()
