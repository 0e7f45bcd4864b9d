"""Forgetting and purging: erased events and deleted sessions leave no byte of their words in the index.

forget_events, purge_session, and indexing an erasure record (indexer.py):
every connection runs with `secure_delete` on, so SQLite zeroes what it
frees; a forget rewrites the neighbours' context, re-judges novelty, merges
the session's FTS5 segments, and empties the WAL, so no byte of the forgotten
words is left in index.sqlite, -wal or -shm (docs/RETRIEVAL.md, "Forgetting").
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence

import orjson

from ledger import EventError, validate_session_id
from ledger.corrupted import LedgerCorrupted
from retrieval import sql
from retrieval.indexing import CONTEXT_SEP, novelty_gains, regained_novelty, skipped
from retrieval.model import ForgetError, Forgotten, PurgeIncomplete
from retrieval.scoring import collapse_score
from retrieval.text import content_terms
from storage.common.retrieval.connection import BUSY_MS, INDEX_FILE, ZEROED, batched
from storage.common.retrieval.indexer import Indexing
from storage.common.retrieval.vectors import drop_held_queries

PURGE_WAIT_S = 10.0  # how long a purge waits for readers to let go of an old snapshot before giving up
SCAN_BATCH = 2_000  # rows read per query while re-judging novelty after a forget


class Housekeeping(Indexing):
    """forget_events, purge_session, and the purge an interrupted forget still owes."""

    def _purge_wait_s(self) -> float:
        return PURGE_WAIT_S

    def forget_events(self, session: str, seqs: Iterable[int]) -> Forgotten:
        """Remove erased events from the index and purge every copy SQLite keeps of their words.

        Each seq must be erased in the ledger already (Ledger.erase): the index
        follows the ledger, and a rebuild gives the same rows. Their rows are
        deleted, the neighbours whose `context` held their text are re-indexed,
        later events whose novelty counted their words are re-judged, the terms
        table loses their terms; then the session's FTS5 segments are merged
        and the WAL emptied (see _purge). A seq already absent from the index
        (forgotten before, or erased before it was indexed) is a no-op; a seq
        the ledger does not hold, or still holds live, is a ForgetError and
        nothing changes. PurgeIncomplete: the rows are gone but a reader kept
        the WAL from being emptied; calling again finishes the purge.
        """
        try:
            validate_session_id(session)
        except EventError as exc:
            raise ForgetError(str(exc)) from None
        wanted = self._seq_list(seqs)
        return self._guarded(lambda: self._forget_events(session, wanted))

    @staticmethod
    def _seq_list(seqs: Iterable[int]) -> list[int]:
        if isinstance(seqs, (str, bytes)):
            raise ForgetError("seqs: must be a list of seqs, not a string")
        out = set()
        for s in seqs:
            if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= sql.MAX_SEQ:
                raise ForgetError(f"seqs: {s!r} is not a seq")
            out.add(s)
        if not out:
            raise ForgetError("seqs: none given")
        return sorted(out)

    def _forget_events(self, session: str, wanted: list[int]) -> Forgotten:
        with self._lock:
            if not self.ledger.exists(session):
                raise ForgetError(f"session {session}: not in the ledger")
            try:
                count, _ = self.ledger.head(session)
            except LedgerCorrupted as exc:  # its message names the session already
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
            row = self._w().execute("SELECT num FROM watermarks WHERE session = ?", (session,)).fetchone()
            if row is None:  # never indexed: nothing of it here, but free space may still hold an old copy
                self._purge([])
                return Forgotten(session, [], [], [])
            num = int(row[0])
            with self._tx():
                result = self._forget_rows(session, num, wanted)
            drop_held_queries(self)  # a query embedded before the rows went, kept after the drop above
            self._purge([num])
            return result

    def purge_session(self, session: str) -> None:
        """Drop a session the ledger no longer holds from the index, then purge as forget_events does.

        A session with no rows here is a no-op (the purge still runs); one the
        ledger still holds is a ForgetError (delete it there first).
        """
        try:
            validate_session_id(session)
        except EventError as exc:
            raise ForgetError(str(exc)) from None

        def run() -> None:
            with self._lock:
                if self.ledger.exists(session):
                    raise ForgetError(f"session {session}: still in the ledger; delete it there first")
                row = self._w().execute("SELECT num FROM watermarks WHERE session = ?", (session,)).fetchone()
                if row is not None:
                    with self._tx():
                        self._drop_session(int(row[0]), remove=True)
                self._purge([])

        self._guarded(run)

    def _forget_rows(self, session: str, num: int, seqs: Sequence[int]) -> Forgotten:
        """Delete the rows of `seqs` (those that exist) and undo what they added to others (in a transaction)."""
        conn = self._w()
        found: list[tuple[int, str, str]] = []
        for seq in sorted(set(seqs)):
            r = conn.execute("SELECT text, context FROM events WHERE id = ?", (sql.row_id(num, seq),)).fetchone()
            if r is not None:
                found.append((seq, str(r[0]), str(r[1])))
        if not found:
            return Forgotten(session, [], [], [])
        lost: Counter[str] = Counter()
        first_gone: dict[str, int] = {}
        for seq, text, context in found:
            rid = sql.row_id(num, seq)
            conn.execute(sql.delete_fts_one(num), (rid, text, context))
            conn.execute("DELETE FROM events WHERE id = ?", (rid,))
            conn.execute(sql.VECTORS_DROP_ONE, (rid,))  # the semantic extra's vector goes with its row
            for t in content_terms(text):
                lost[t] += 1
                first_gone.setdefault(t, seq)
        conn.executemany(
            "UPDATE terms SET df = df - ? WHERE num = ? AND term = ?", ((n, num, t) for t, n in lost.items())
        )
        conn.executemany("DELETE FROM terms WHERE num = ? AND term = ? AND df <= 0", ((num, t) for t in lost))
        conn.execute(
            "INSERT OR REPLACE INTO retrieval_meta (key, value) VALUES (?, ?)",
            (self._forgets_key(num), str(self._forgets(num) + 1)),
        )
        self._mark_purge(num)
        removed = [seq for seq, _, _ in found]
        self.__dict__.setdefault("_vec_cache", {}).pop(num, None)
        drop_held_queries(self)  # the semantic extra's last queries: one may be what went (and again after the commit)
        return Forgotten(session, removed, self._recontext(num, removed), self._rejudge(num, first_gone))

    def _neighbours(self, num: int, seq: int, n: int, *, later: bool) -> list[tuple[int, str]]:
        """(seq, text) of the `n` nearest indexed rows before (or after) `seq`, in seq order."""
        if n == 0:
            return []
        lo, hi = sql.session_range(num)
        rid = sql.row_id(num, seq)
        if later:
            stmt, params = "SELECT seq, text FROM events WHERE id > ? AND id <= ? ORDER BY id LIMIT ?", (rid, hi, n)
        else:
            stmt, params = (
                "SELECT seq, text FROM events WHERE id >= ? AND id < ? ORDER BY id DESC LIMIT ?",
                (lo, rid, n),
            )
        rows = [(int(r[0]), str(r[1])) for r in self._w().execute(stmt, params).fetchall()]
        return rows if later else rows[::-1]

    def _recontext(self, num: int, removed: Sequence[int]) -> list[int]:
        """Rewrite the context of every row that had a removed row among its neighbours; return their seqs."""
        before, after = self.config.context_before, self.config.context_after
        if not (before or after):
            return []
        conn = self._w()
        affected: set[int] = set()
        for seq in removed:  # the rows are gone: the nearest remaining ones are who had them as neighbour
            affected.update(s for s, _ in self._neighbours(num, seq, after, later=False))
            affected.update(s for s, _ in self._neighbours(num, seq, before, later=True))
        changed = []
        for seq in sorted(affected):
            rid = sql.row_id(num, seq)
            text, old = conn.execute("SELECT text, context FROM events WHERE id = ?", (rid,)).fetchone()
            parts = self._neighbours(num, seq, before, later=False) + self._neighbours(num, seq, after, later=True)
            new = CONTEXT_SEP.join(t for _, t in parts)
            if new == old:
                continue
            conn.execute(sql.delete_fts_one(num), (rid, text, old))
            conn.execute("UPDATE events SET context = ? WHERE id = ?", (new, rid))
            conn.execute(sql.insert_fts(num), (rid, text, new))
            changed.append(seq)
        return changed

    def _rejudge(self, num: int, first_gone: dict[str, int]) -> list[int]:
        """Re-judge the novelty of rows that counted a forgotten term as already seen (indexing.novelty_gains)."""
        conn = self._w()
        held: set[str] = set()
        for part in batched(sorted(first_gone), 500):
            held.update(r[0] for r in conn.execute(sql.terms_df_sql(len(part)), (num, *part)).fetchall())
        gains = novelty_gains(first_gone, held, self._scan_texts(num)) if held else {}
        for seq, gain in sorted(gains.items()):
            rid = sql.row_id(num, seq)
            text, nov, role, meta = conn.execute(
                "SELECT text, novelty, role, meta FROM events WHERE id = ?", (rid,)
            ).fetchone()
            new = regained_novelty(nov, len(content_terms(text)), gain)
            conn.execute(
                "UPDATE events SET novelty = ?, collapse = ? WHERE id = ?",
                (new, collapse_score(role, new, orjson.loads(meta)), rid),
            )
        return sorted(gains)

    def _scan_texts(self, num: int) -> Iterator[tuple[int, str]]:
        """(seq, text) of the session's rows in seq order, read SCAN_BATCH at a time (stops when the caller does)."""
        lo, hi = sql.session_range(num)
        while True:
            batch = (
                self._w()
                .execute(
                    "SELECT id, seq, text FROM events WHERE id BETWEEN ? AND ? ORDER BY id LIMIT ?",
                    (lo, hi, SCAN_BATCH),
                )
                .fetchall()
            )
            if not batch:
                return
            for _, seq, text in batch:
                yield int(seq), str(text)
            lo = int(batch[-1][0]) + 1

    def _purge(self, nums: Iterable[int]) -> None:
        """Leave no byte of deleted rows in the index files (caller holds the lock, no transaction open).

        1. FTS5 'optimize' on each session table in `nums`: a deleted row's tokens
           live on in old segments until they are merged; merged, they are gone,
           and secure_delete zeroes the freed segment pages.
        2. VACUUM once for a file that may hold old bytes in free space (written
           before secure_delete was on); then the file is marked zeroed.
        3. Copies of the file moved aside as corrupt are deleted (derived data).
        4. wal_checkpoint(TRUNCATE): the WAL's old page images go; it needs every
           reader off its old snapshot and waits PURGE_WAIT_S for them.
        """
        conn = self._w()
        pending = dict(
            conn.execute("SELECT key, value FROM retrieval_meta WHERE key GLOB 'purge_pending:*'").fetchall()
        )
        todo = set(nums) | {int(v) for v in pending.values() if int(v) > 0}
        with self._tx():
            have = {r[0] for r in conn.execute(sql.FTS_TABLES).fetchall()}
            for num in sorted(todo):
                if sql.fts_table(num) in have:
                    conn.execute(sql.optimize_fts(num))
        zeroed = conn.execute("SELECT value FROM retrieval_meta WHERE key = ?", (ZEROED,)).fetchone()
        if zeroed is None or zeroed[0] != "1":
            conn.execute("VACUUM")
            with self._tx():
                conn.execute("INSERT OR REPLACE INTO retrieval_meta (key, value) VALUES (?, '1')", (ZEROED,))
        for aside in self.data_dir.glob(f"{INDEX_FILE}.corrupt-*"):
            aside.unlink(missing_ok=True)
        wait_s = self._purge_wait_s()
        conn.execute(f"PRAGMA busy_timeout = {int(wait_s * 1000)}")
        try:
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        finally:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
        if busy:
            raise PurgeIncomplete(
                f"{self.path}: a reader kept an old snapshot open for {wait_s:g} s, so the WAL still holds "
                "old pages; the rows are deleted: forget again to finish the purge"
            )
        if pending:  # done: the marks go (their own WAL frames hold no words; emptied again if no one reads)
            with self._tx():
                conn.executemany("DELETE FROM retrieval_meta WHERE key = ?", ((k,) for k in pending))
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _mark_purge(self, num: int) -> None:
        """Note, in the transaction that deletes rows, that a purge is owed: a crash before it ends is caught up on open."""
        self._w().execute(
            "INSERT OR REPLACE INTO retrieval_meta (key, value) VALUES (?, ?)", (f"purge_pending:{num}", str(num))
        )

    def _owed_purge(self) -> None:
        """Finish a purge a crash interrupted (see _mark_purge); a reader in the way is a warning."""
        with self._lock:
            try:
                if self._w().execute("SELECT 1 FROM retrieval_meta WHERE key GLOB 'purge_pending:*'").fetchone():
                    for w in self._purge_quietly([]):
                        self._warn(w)
            except sqlite3.Error as exc:
                self._warn(
                    f"{self.path}: the purge an interrupted forget owes failed ({exc}); it is tried again on the next open"
                )

    def _purge_quietly(self, nums: Iterable[int]) -> list[str]:
        """_purge from inside indexing: an incomplete purge is a warning, not a failed index."""
        try:
            self._purge(nums)
        except PurgeIncomplete as exc:
            return [str(exc)]
        return []
