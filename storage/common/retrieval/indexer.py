"""Writing the index: bringing sessions up to date with their ledgers (catch_up, index_session, rebuild).

indexing.py plans the rows (pure); this module reads the ledger, keeps each
session's watermark (the last indexed seq and its chain hash) and writes the
rows, their FTS5 entries and the terms table, CHUNK events per transaction.
An erasure record met on the way forgets rows (housekeeping.py).
"""

from __future__ import annotations

import gc
import logging
import random
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import islice

import orjson

from ledger import GENESIS, Event, validate_session_id
from ledger.corrupted import LedgerCorrupted
from retrieval import sql
from retrieval.indexing import Plan, Planner, plan_rows
from retrieval.model import Forgotten, IndexUnavailable
from retrieval.text import content_terms
from storage.common.retrieval.connection import ZEROED, IndexFile, batched, is_corruption

log = logging.getLogger("retrieval")
CHUNK = 20_000  # events per write transaction while indexing
TAIL_BY_OFFSET = 5_000  # up to this many new events are read by byte offset, not by a full pass
GENESIS_HEX = GENESIS.hex()
# FTS5 merges a table's segments AUTOMERGE at a time as it grows (and must, once a level holds CRISISMERGE):
# right for a turn's few rows, but a session indexed from scratch then rewrites its FTS5 data about
# log4(segments) times. While one is built, segments are merged BUILD_MERGE at a time (measured at 1M events:
# 24% less CPU in FTS5); the defaults are set back after. Rows, terms and every search result are the same:
# only how FTS5 lays its data out in segments differs.
AUTOMERGE, CRISISMERGE = 4, 16  # FTS5's defaults
BUILD_MERGE = (16, 64)  # (automerge, crisismerge) while a session is indexed from scratch
# The page cache while a session is indexed from scratch (SQLite's default is 2 MB): FTS5's merges and the inserts
# into events_event_id (random keys) re-read pages a small cache has evicted; set back after. Pages, not results.
BUILD_CACHE_KIB = 256 * 1024
RACE_ATTEMPTS = 10  # re-reads of a watermark another writer moved, before giving up
Progress = Callable[[str, int], None]  # (session, events just indexed)


class _Raced(Exception):
    """Another process moved a session's watermark while we were indexing it."""


@dataclass(slots=True)
class _Step:
    """One chunk of a session's new events, planned: what _index_stream writes in one transaction."""

    expected: tuple[int, str]  # the watermark (seq, chain) the chunk continues
    last: tuple[int, str]  # the watermark after it
    size: int  # events read (skipped ones included)
    plan: Plan
    event_rows: Sequence[tuple[object, ...]]
    fts_rows: list[tuple[int, str, str]]


@dataclass(slots=True)
class _Chunks:
    """Reads a session's new events CHUNK at a time and plans their rows, in order.

    Holds what planning carries from one chunk to the next: the watermark, the content terms seen so
    far (`seen`; with `fresh` False, loaded from the terms table as needed through `load_seen`) and the
    texts of the last indexed rows (`prior`). _index_stream resets them after a forget.
    """

    session: str
    num: int
    stream: Iterator[Event]
    last: tuple[int, str]
    before: int
    after: int
    fresh: bool
    prior: list[tuple[int, str]]
    load_seen: Callable[[Sequence[Event], set[str]], None]
    plan: Planner  # indexing.plan_rows
    seen: set[str] = field(default_factory=set)

    def next(self) -> _Step | None:
        chunk = list(islice(self.stream, CHUNK))
        if not chunk:
            return None
        expected = last_seq, last_chain = self.last
        for ev in chunk:
            if ev.seq != last_seq + 1 or ev.prev != last_chain:
                raise IndexUnavailable(
                    f"session {self.session}: ledger event at seq {ev.seq} does not continue seq {last_seq} "
                    f"(prev {ev.prev}, expected {last_chain})"
                )
            last_seq, last_chain = ev.seq, ev.chain
        self.last = (last_seq, last_chain)
        if not self.fresh:
            self.load_seen(chunk, self.seen)
        plan = self.plan(
            num=self.num, events=chunk, seen=self.seen, prior=self.prior, before=self.before, after=self.after
        )
        if self.before or self.after:
            self.prior = (self.prior + [(r.seq, r.text) for r in plan.rows])[-(self.before + self.after) :]
        return _Step(
            expected, self.last, len(chunk), plan,
            plan.rows, [(r.id, r.text, r.context) for r in plan.rows],  # a Row is the events row's tuple
        )


@contextmanager
def _build_settings(conn: sqlite3.Connection) -> Iterator[None]:
    """What a from-scratch build of many chunks runs under: BUILD_CACHE_KIB of page cache, and no cyclic garbage
    collection (the build makes millions of short-lived objects, all freed by their reference counts: the collector's
    passes over them found nothing and took 5% of the build's samples). Both are set back after."""
    cache = conn.execute("PRAGMA cache_size").fetchone()[0]
    collecting = gc.isenabled()
    conn.execute(f"PRAGMA cache_size = -{BUILD_CACHE_KIB}")
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
        conn.execute(f"PRAGMA cache_size = {int(cache)}")


class Indexing(IndexFile):
    """catch_up, index_session, rebuild: the index follows the ledgers."""

    def _plan(
        self,
        *,
        num: int,
        events: Sequence[Event],
        seen: set[str],
        prior: Sequence[tuple[int, str]],
        before: int = 0,
        after: int = 0,
    ) -> Plan:
        return plan_rows(num=num, events=events, seen=seen, prior=prior, before=before, after=after)

    def catch_up(self, progress: Progress | None = None) -> list[str]:
        """Bring every session up to date with its ledger; return the warnings (also logged)."""
        self._check_file()
        try:
            return self._catch_up(progress)
        except sqlite3.DatabaseError as exc:
            if not is_corruption(exc):
                raise
            return self._recover(exc)

    def _catch_up(self, progress: Progress | None) -> list[str]:
        with self._lock:
            warnings: list[str] = []
            in_ledger = set(self.ledger.sessions())
            indexed = dict(self._w().execute("SELECT session, num FROM watermarks").fetchall())
            dropped = sorted(set(indexed) - in_ledger)
            for session in dropped:
                warnings.append(f"session {session}: no longer in the ledger; dropped from the index")
                with self._tx():
                    self._drop_session(indexed[session], remove=True)
            if dropped:
                warnings.extend(self._purge_quietly([]))
            for session in sorted(in_ledger):
                warnings.extend(self._index_session(session, None, progress))
            for w in warnings:
                log.warning("%s", w)
            return warnings

    def index_session(
        self, session: str, new_events: Sequence[Event] | None = None, *, progress: Progress | None = None
    ) -> list[str]:
        """Index what the session's ledger holds beyond the watermark; return warnings.

        `new_events` (what Ledger.append/append_many just returned) saves
        re-reading the ledger when they continue the watermark's chain exactly.
        `progress(session, n)` is called after each chunk of n events is written.
        """
        validate_session_id(session)
        return self._guarded(lambda: self._index_session(session, new_events, progress))

    def _index_session(self, session: str, new_events: Sequence[Event] | None, progress: Progress | None) -> list[str]:
        for attempt in range(RACE_ATTEMPTS):
            try:
                return self._index_session_once(session, new_events, progress)
            except _Raced:
                new_events = None  # another process moved the watermark: start again from it
                # a short, jittered pause so two writers do not keep colliding in lockstep
                time.sleep(random.uniform(0, 0.005 * (attempt + 1)))
        raise IndexUnavailable(f"session {session}: the watermark keeps moving under us (another writer?)")

    def _index_session_once(
        self, session: str, new_events: Sequence[Event] | None, progress: Progress | None
    ) -> list[str]:
        with self._lock:
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
                with self._tx():
                    self._drop_session(num)
                last_seq, last_chain = -1, GENESIS_HEX
            if new_events is not None and not isinstance(new_events, (list, tuple)):
                # A lazy sequence (an import's ledger.importer.Imported reads each event by its offset: ~100 µs an
                # event, 25x one streaming pass of the ledger): read the ledger below instead, the same events.
                new_events = None
            if new_events and self._continues(new_events, last_seq, last_chain, count, head):
                warnings.extend(self._index_stream(session, num, iter(new_events), last_seq, last_chain, progress))
                return warnings
            if last_seq >= 0:
                at = self.ledger.read_events(session, [last_seq])[0]  # by byte offset: O(1)
                if at.chain != last_chain:
                    warnings.append(
                        f"session {session}: ledger does not match the index at seq {last_seq}: "
                        f"expected chain {last_chain}, found {at.chain}; re-indexed from scratch"
                    )
                    with self._tx():
                        self._drop_session(num)
                    last_seq, last_chain = -1, GENESIS_HEX
            stream = self._read_from(session, last_seq + 1, count)
            warnings.extend(self._index_stream(session, num, stream, last_seq, last_chain, progress))
            return warnings

    def _read_from(self, session: str, start: int, count: int) -> Iterator[Event]:
        """The session's events from seq `start`: by offset for a short tail, else one streaming pass."""
        if count - start <= TAIL_BY_OFFSET:
            return iter(self.ledger.read_events(session, range(start, count)))
        return self.ledger.events(session, start_seq=start)

    @staticmethod
    def _continues(events: Sequence[Event], last_seq: int, last_chain: str, count: int, head: str) -> bool:
        """True when `events` are exactly the ledger's events after the watermark."""
        prev_seq, prev_chain = last_seq, last_chain
        for ev in events:
            if ev.seq != prev_seq + 1 or ev.prev != prev_chain:
                return False
            prev_seq, prev_chain = ev.seq, ev.chain
        return prev_seq + 1 == count and prev_chain == head

    def _watermark(self, session: str) -> tuple[int, int, str]:
        conn = self._w()
        row = conn.execute("SELECT num, last_seq, last_chain FROM watermarks WHERE session = ?", (session,)).fetchone()
        if row is not None:
            return int(row[0]), int(row[1]), str(row[2])
        with self._tx():
            top = conn.execute("SELECT coalesce(max(num), 0) FROM watermarks").fetchone()[0]
            if top >= sql.MAX_SESSION_NUM:
                raise IndexUnavailable(f"{self.path}: too many sessions ({top})")
            conn.execute(
                "INSERT OR IGNORE INTO watermarks (num, session, last_seq, last_chain) VALUES (?, ?, -1, ?)",
                (top + 1, session, GENESIS_HEX),
            )
            row = conn.execute(
                "SELECT num, last_seq, last_chain FROM watermarks WHERE session = ?", (session,)
            ).fetchone()
            conn.execute(sql.create_fts(int(row[0])))
        return int(row[0]), int(row[1]), str(row[2])

    def _drop_session(self, num: int, *, remove: bool = False) -> None:
        """Forget a session's rows (and with `remove`, the session itself)."""
        conn = self._w()
        lo, hi = sql.session_range(num)
        conn.execute(f"DROP TABLE IF EXISTS {sql.fts_table(num)}")
        conn.execute("DELETE FROM events WHERE id BETWEEN ? AND ?", (lo, hi))
        conn.execute(sql.VECTORS_DROP, (lo, hi))  # the semantic extra's vectors go with the rows
        self.__dict__.setdefault("_vec_cache", {}).pop(num, None)
        self.__dict__["_query_cache"] = OrderedDict()  # vectors.drop_held_queries (which imports this module)
        conn.execute("DELETE FROM terms WHERE num = ?", (num,))
        if remove:
            conn.execute("DELETE FROM watermarks WHERE num = ?", (num,))
            conn.execute("DELETE FROM retrieval_meta WHERE key = ?", (self._forgets_key(num),))
            self._mark_purge(0)  # its table is dropped (zeroed); the WAL and a file not yet zeroed are owed a purge
        else:
            conn.execute(sql.create_fts(num))
            conn.execute("UPDATE watermarks SET last_seq = -1, last_chain = ? WHERE num = ?", (GENESIS_HEX, num))

    def _index_stream(
        self,
        session: str,
        num: int,
        stream: Iterator[Event],
        last_seq: int,
        last_chain: str,
        progress: Progress | None,
    ) -> list[str]:
        """Index `stream` (the events after the watermark); return warnings.

        An erasure record met on the way forgets the rows of the seqs it lists
        (a ledger erased by another process, or before a crash, is caught up here).

        A session indexed from scratch is planned one chunk ahead on a second thread: reading the
        ledger and planning rows (Python) overlap with the FTS5 inserts (SQLite, which lets go of the
        GIL). The plans are the same as one after the other: only `_Chunks` touches `seen` and `prior`,
        and it never runs ahead past a chunk that forgets rows or while the terms table is read.
        """
        before, after = self.config.context_before, self.config.context_after
        # Read before `prior` and `seen`: a forget by another process after this point (it may have taken
        # rows out of them) makes the chunk's transaction start again from the watermark.
        forgets = self._forgets(num)
        chunks = _Chunks(
            session=session, num=num, stream=stream, last=(last_seq, last_chain), before=before, after=after,
            fresh=last_seq < 0,  # nothing of this session is in the terms table
            prior=self._tail_rows(num, last_seq, before + after) if (before or after) else [],
            load_seen=lambda chunk, seen: self._load_seen(num, chunk, seen),
            plan=self._plan,
        )
        first = chunks.next()
        bulk = chunks.fresh and first is not None and first.size >= CHUNK  # a from-scratch build of many chunks
        if not bulk:
            return self._write_chunks(session, num, chunks, first, forgets, progress)
        self._merge_options(num, *BUILD_MERGE)
        try:
            with _build_settings(self._w()):
                return self._write_chunks(session, num, chunks, first, forgets, progress)
        finally:
            try:
                self._merge_options(num, AUTOMERGE, CRISISMERGE)
            except sqlite3.Error as exc:  # the build's own error matters more; the options only cost time
                log.warning("%s: FTS5 merge options of session %s not set back (%s)", self.path, session, exc)

    def _merge_options(self, num: int, automerge: int, crisismerge: int) -> None:
        with self._tx() as conn:
            conn.execute(sql.fts_option(num, "automerge"), (automerge,))
            conn.execute(sql.fts_option(num, "crisismerge"), (crisismerge,))

    def _write_chunks(
        self, session: str, num: int, chunks: _Chunks, step: _Step | None, forgets: int, progress: Progress | None
    ) -> list[str]:
        """Write `step` and each chunk after it in its own transaction (see _index_stream); return warnings."""
        conn = self._w()
        warnings: list[str] = []
        before, after = self.config.context_before, self.config.context_after
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="index-plan") as ahead:
            while step is not None:
                pending = ahead.submit(chunks.next) if chunks.fresh and not step.plan.erased else None
                plan = step.plan
                with self._tx():
                    now = conn.execute("SELECT last_seq, last_chain FROM watermarks WHERE num = ?", (num,)).fetchone()
                    if now is None or (now[0], now[1]) != step.expected or self._forgets(num) != forgets:
                        raise _Raced()
                    for seq, context in plan.context_updates:
                        rid = sql.row_id(num, seq)
                        old = conn.execute("SELECT text, context FROM events WHERE id = ?", (rid,)).fetchone()
                        if old is None:
                            continue
                        conn.execute(sql.delete_fts_one(num), (rid, old[0], old[1]))
                        conn.execute("UPDATE events SET context = ? WHERE id = ?", (context, rid))
                        conn.execute(sql.insert_fts(num), (rid, old[0], context))
                    conn.executemany(sql.INSERT_EVENT, step.event_rows)
                    conn.executemany(sql.insert_fts(num), step.fts_rows)
                    conn.executemany(sql.UPSERT_TERMS, ((num, t, n) for t, n in plan.df.items()))
                    conn.execute("UPDATE watermarks SET last_seq = ?, last_chain = ? WHERE num = ?", (*step.last, num))
                if plan.erased:
                    with self._tx():
                        gone = self._forget_rows(session, num, plan.erased)
                        now_forgets = self._forgets(num)
                    if gone.removed:
                        warnings.extend(self._purge_quietly([num]))
                    if now_forgets != forgets:  # this forget, or another process's: `prior` and `seen` may hold its words
                        chunks.seen.clear()
                        chunks.fresh = False
                        chunks.prior = self._tail_rows(num, step.last[0], before + after) if (before or after) else []
                        forgets = now_forgets
                if progress is not None:
                    progress(session, step.size)
                step = pending.result() if pending is not None else chunks.next()
        return warnings

    @staticmethod
    def _forgets_key(num: int) -> str:
        return f"forgets:{num}"

    def _forgets(self, num: int) -> int:
        """How many times rows of session `num` were forgotten (a change tells a concurrent indexer to start again)."""
        row = self._w().execute("SELECT value FROM retrieval_meta WHERE key = ?", (self._forgets_key(num),)).fetchone()
        return 0 if row is None else int(row[0])

    def _tail_rows(self, num: int, last_seq: int, n: int) -> list[tuple[int, str]]:
        """(seq, text) of the session's last `n` indexed rows up to `last_seq`, oldest first."""
        if last_seq < 0 or n == 0:
            return []
        lo = sql.row_id(num, 0)
        rows = (
            self._w()
            .execute(
                "SELECT seq, text FROM events WHERE id BETWEEN ? AND ? ORDER BY id DESC LIMIT ?",
                (lo, sql.row_id(num, last_seq), n),
            )
            .fetchall()
        )
        return [(int(r[0]), str(r[1])) for r in reversed(rows)]

    def _load_seen(self, num: int, chunk: Sequence[Event], seen: set[str]) -> None:

        wanted = {t for ev in chunk for t in content_terms(ev.text)} - seen
        for part in batched(sorted(wanted), 500):
            rows = self._w().execute(sql.terms_df_sql(len(part)), (num, *part)).fetchall()
            seen.update(r[0] for r in rows)

    def rebuild(self, progress: Progress | None = None) -> list[str]:
        """Drop this package's tables and index every ledger from scratch."""
        self._check_file()
        with self._lock:
            conn = self._w()
            zeroed = conn.execute("SELECT value FROM retrieval_meta WHERE key = ?", (ZEROED,)).fetchone()
            with self._tx():
                self._drop_own_tables(conn)  # secure_delete: the dropped pages are zeroed
            meta = {
                "schema_version": str(sql.SCHEMA_VERSION),
                "indexed": orjson.dumps(self.config.indexed_part()).decode(),
            }
            if zeroed is not None and zeroed[0] == "1":
                meta[ZEROED] = "1"
            self._create_tables(meta)
            warnings = self._catch_up(progress)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return warnings

    # -- what housekeeping.Housekeeping provides -----------------------------------------------------------
    def _forget_rows(self, session: str, num: int, seqs: Sequence[int]) -> Forgotten:
        raise NotImplementedError

    def _purge_quietly(self, nums: Iterable[int]) -> list[str]:
        raise NotImplementedError

    def _mark_purge(self, num: int) -> None:
        raise NotImplementedError
