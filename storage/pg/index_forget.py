"""Forgetting on PostgreSQL's search index: forget_events, purge_session (the base of storage.pg.index.PgIndex).

The same steps as the SQLite index (retrieval/housekeeping.py) minus what is SQLite's own: the rows
of erased events are deleted, the neighbours whose context held their words get a new context (term
counts and tsvector), later rows whose novelty counted those words are re-judged (the pure
retrieval.indexing.novelty_gains), the terms table and the session's bm25 statistics lose their
share. Then VACUUM runs on the index's tables, so the deleted row versions' space is marked free.
What PostgreSQL keeps after that (the bytes of dead tuples until that space is reused, WAL
segments, base backups, replicas) is the operator's to handle: docs/RETRIEVAL.md, "PostgreSQL".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import orjson
import psycopg

from ledger import EventError, validate_session_id
from ledger.corrupted import LedgerCorrupted
from retrieval.config import IndexConfig
from retrieval.indexing import CONTEXT_SEP, novelty_gains, regained_novelty, skipped
from retrieval.model import ForgetError, Forgotten
from retrieval.scoring import collapse_score
from retrieval.text import content_terms
from storage.common.retrieval.housekeeping import SCAN_BATCH, Housekeeping
from storage.common.retrieval.vectors import drop_held_queries
from storage.pg import sql
from storage.pg.connect import Database
from storage.pg.terms import key, packed_counts, term_counts, tsvector_literal, unpack

if TYPE_CHECKING:
    from storage.pg.index import LedgerSource


def _text(raw: Any) -> str:
    return bytes(raw).decode("utf-8", "surrogatepass")


class Forgetting:
    db: Database
    ledger: LedgerSource
    config: IndexConfig

    def forget_events(self, session: str, seqs: Iterable[int]) -> Forgotten:
        """Remove erased events from the index (as Index.forget_events): each seq must be erased in the
        ledger already; a seq already absent is a no-op; a live one is a ForgetError and nothing changes."""
        try:
            validate_session_id(session)
        except EventError as exc:
            raise ForgetError(str(exc)) from None
        wanted = Housekeeping._seq_list(seqs)
        if not self.ledger.exists(session):
            raise ForgetError(f"session {session}: not in the ledger")
        try:
            count, _ = self.ledger.head(session)
        except LedgerCorrupted as exc:
            raise ForgetError(str(exc)) from None
        beyond = [s for s in wanted if s >= count]
        if beyond:
            raise ForgetError(f"session {session}: no event at seq {beyond[0]} (the ledger holds {count})")
        live = [ev.seq for ev in self.ledger.read_events(session, wanted) if not skipped(ev)]
        if live:
            raise ForgetError(
                f"session {session}: seq {live[0]} is not erased in the ledger; erase it there first "
                "(the index follows the ledger)"
            )
        with self.db.connection() as conn:
            row = conn.execute(sql.SEARCH_SESSION, (session,)).fetchone()
        if row is None:
            return Forgotten(session, [], [], [])
        return self._forget(session, int(row[0]), wanted)

    def purge_session(self, session: str) -> None:
        """Drop a session the ledger no longer holds (a ForgetError if it still does), then VACUUM."""
        try:
            validate_session_id(session)
        except EventError as exc:
            raise ForgetError(str(exc)) from None
        if self.ledger.exists(session):
            raise ForgetError(f"session {session}: still in the ledger; delete it there first")
        with self.db.transaction() as conn:
            row = conn.execute(sql.SEARCH_SESSION, (session,)).fetchone()
            if row is not None:
                conn.execute(sql.SEARCH_DROP_SESSION, (int(row[0]),))
        drop_held_queries(self)  # the semantic extra's last queries' vectors
        self._vacuum()

    def _forget(self, session: str, num: int, seqs: Sequence[int]) -> Forgotten:
        self.__dict__.get("_vec_cache", {}).pop(num, None)  # the semantic extra's vectors held in memory go too
        drop_held_queries(self)  # and its last queries' vectors: one may be what goes
        with self.db.transaction() as conn:
            conn.execute(sql.SEARCH_LOCK_SESSION, (num,))
            result = self._forget_rows(conn, session, num, seqs)
        drop_held_queries(self)  # and any a search embedded while the rows were going
        if result.removed:
            self._vacuum()
        return result

    def _forget_rows(self, conn: psycopg.Connection[Any], session: str, num: int, seqs: Sequence[int]) -> Forgotten:
        gone = conn.execute(sql.SEARCH_FORGET_ROWS, (num, sorted(set(seqs)))).fetchall()
        if not gone:
            return Forgotten(session, [], [], [])
        found = sorted((int(s), _text(t), int(a) + int(b)) for s, t, a, b, _ in gone)
        df: Counter[str] = Counter()
        for *_, tf in gone:
            df.subtract(tf.keys())
        lost: Counter[str] = Counter()
        first_gone: dict[str, int] = {}
        for seq, text, _ in found:
            for t in content_terms(text):
                lost[key(t)] += 1
                first_gone.setdefault(t, seq)
        if lost:
            terms = sorted(lost)
            conn.execute(sql.SEARCH_TERMS_LESS, (terms, [lost[t] for t in terms], num))
            conn.execute(sql.SEARCH_TERMS_GONE, (num,))
        conn.execute(sql.SEARCH_FORGOT, (len(found), sum(n for _, _, n in found), num))
        removed = [seq for seq, _, _ in found]
        recontexted = self._recontext(conn, num, removed, df)
        changed = sorted(t for t, n in df.items() if n)
        if changed:
            conn.execute(sql.SEARCH_DF_ADD, (num, changed, [df[t] for t in changed]))
            conn.execute(sql.SEARCH_DF_GONE, (num,))
        return Forgotten(session, removed, recontexted, self._rejudge(conn, num, first_gone))

    @staticmethod
    def _neighbours(conn: psycopg.Connection[Any], num: int, seq: int, n: int, *, later: bool) -> list[tuple[int, str]]:
        if n == 0:
            return []
        rows = conn.execute(sql.SEARCH_ROWS_AFTER if later else sql.SEARCH_ROWS_BEFORE, (num, seq, n)).fetchall()
        out = [(int(s), _text(t)) for s, t in rows]
        return out if later else out[::-1]

    def _recontext(
        self, conn: psycopg.Connection[Any], num: int, removed: Sequence[int], df: Counter[str]
    ) -> list[int]:
        """New context for every row that had a removed row among its neighbours; return the seqs that changed.
        `df` gains the change in how many rows hold each term."""
        before, after = self.config.context_before, self.config.context_after
        if not (before or after):
            return []
        affected: set[int] = set()
        for seq in removed:
            affected.update(s for s, _ in self._neighbours(conn, num, seq, after, later=False))
            affected.update(s for s, _ in self._neighbours(conn, num, seq, before, later=True))
        if not affected:
            return []
        old = {int(s): (tf, int(n)) for s, tf, n in conn.execute(sql.SEARCH_ROW_TF, (num, sorted(affected)))}
        changed = []
        delta = 0
        for seq in sorted(affected):
            parts = self._neighbours(conn, num, seq, before, later=False) + self._neighbours(
                conn, num, seq, after, later=True
            )
            ctx = term_counts([CONTEXT_SEP.join(t for _, t in parts)])[0]
            tf_old, n_old = old[seq]
            if {t: unpack(v)[1] for t, v in tf_old.items() if unpack(v)[1]} == dict(ctx):
                continue
            own = Counter({t: unpack(v)[0] for t, v in tf_old.items() if unpack(v)[0]})
            tf = packed_counts(own, ctx)
            df.update(tf.keys() - tf_old.keys())
            df.subtract(tf_old.keys() - tf.keys())
            n_new = sum(ctx.values())
            conn.execute(
                sql.SEARCH_SET_CONTEXT, (n_new, orjson.dumps(tf).decode(), tsvector_literal(num, list(tf)), num, seq)
            )
            delta += n_new - n_old
            changed.append(seq)
        if delta:
            conn.execute(sql.SEARCH_TOKENS_DELTA, (delta, num))
        return changed

    def _rejudge(self, conn: psycopg.Connection[Any], num: int, first_gone: dict[str, int]) -> list[int]:
        """Re-judge the novelty of rows that counted a forgotten term as seen (as the SQLite index does)."""
        if not first_gone:
            return []
        keys = {key(t): t for t in first_gone}
        rows = conn.execute(sql.SEARCH_TERMS_DF, (num, sorted(keys))).fetchall()
        held = {keys[str(r[0])] for r in rows}
        gains = novelty_gains(first_gone, held, self._scan_texts(conn, num)) if held else {}
        for seq, gain in sorted(gains.items()):
            row = conn.execute(sql.SEARCH_ROW_NOVELTY, (num, seq)).fetchone()
            assert row is not None
            text, nov, role, meta = _text(row[0]), float(row[1]), str(row[2]), orjson.loads(bytes(row[3]))
            new = regained_novelty(nov, len(content_terms(text)), gain)
            conn.execute(sql.SEARCH_SET_NOVELTY, (new, collapse_score(role, new, meta), num, seq))
        return sorted(gains)

    @staticmethod
    def _scan_texts(conn: psycopg.Connection[Any], num: int) -> Iterator[tuple[int, str]]:
        last = -1
        while True:
            batch = conn.execute(sql.SEARCH_ROWS_AFTER, (num, last, SCAN_BATCH)).fetchall()
            if not batch:
                return
            for seq, text in batch:
                yield int(seq), _text(text)
            last = int(batch[-1][0])

    def _vacuum(self) -> None:
        """VACUUM the index's tables (outside any transaction): deleted rows' space is freed for reuse."""
        self.db.vacuum(sql.SEARCH_VACUUM)  # a table PostgreSQL skipped (not this role's) is logged there
