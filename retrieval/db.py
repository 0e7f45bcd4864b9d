"""The search index: the only module in `retrieval/` that speaks SQL or touches index files.

DATA_DIR/index.sqlite is derived data: every row can be rebuilt from the
ledgers, so a corrupted or vanished file is moved aside and rebuilt, never fatal.

Threads: each thread reads through its own connection (WAL readers never wait
for the writer); every write goes through one connection under one lock.

Forgetting (forget_events, purge_session, and indexing an erasure record):
every connection runs with `secure_delete` on, so SQLite zeroes what it
frees; a forget rewrites the neighbours' context, merges the session's FTS5
segments, and empties the WAL, so no byte of the forgotten words is left in
index.sqlite, -wal or -shm (docs/RETRIEVAL.md, "Forgetting").
"""

from __future__ import annotations

import functools
import logging
import os
import random
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from itertools import islice
from pathlib import Path
from typing import Any, TypeVar

import orjson
import sqlite_utils

from ledger import GENESIS, Event, EventError, Ledger, LedgerCorrupted, validate_session_id
from ledger.fsmode import open_private, private_dir

from . import sql
from .config import IndexConfig
from .dates import DateSpan, best_match, query_dates
from .explain import TermMatch, explain_hit, idf, marked_words
from .indexing import CONTEXT_SEP, Plan, novelty_gains, plan_rows, regained_novelty, skipped
from .model import (
    Candidate,
    ForgetError,
    Forgotten,
    Hit,
    IndexUnavailable,
    PurgeIncomplete,
    SearchError,
    SearchResponse,
    check_k,
)
from .scoring import CONTEXT, collapse_score, is_echo, query_boost, rank, relative
from .text import MAX_QUERY_TERMS, Query, build_query, content_terms, or_query, quote, stem, term_batches, tokens

log = logging.getLogger("retrieval")
INDEX_FILE = "index.sqlite"
CHUNK = 20_000  # events per write transaction while indexing
TAIL_BY_OFFSET = 5_000  # up to this many new events are read by byte offset, not by a full pass
GENESIS_HEX = GENESIS.hex()
BUSY_MS = 30_000
PURGE_WAIT_S = 10.0  # how long a purge waits for readers to let go of an old snapshot before giving up
SCAN_BATCH = 2_000  # rows read per query while re-judging novelty after a forget
T = TypeVar("T")
Progress = Callable[[str, int], None]  # (session, events just indexed)


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


def _is_corruption(exc: BaseException) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in (11, 26)  # SQLITE_CORRUPT (incl. _VTAB), SQLITE_NOTADB
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text or "corrupt" in text


def _batched(it: Iterable[T], n: int) -> Iterator[list[T]]:
    iterator = iter(it)
    while batch := list(islice(iterator, n)):
        yield batch


class _Raced(Exception):
    """Another process moved a session's watermark while we were indexing it."""


@dataclass(slots=True)
class _Step:
    """One chunk of a session's new events, planned: what _index_stream writes in one transaction."""

    expected: tuple[int, str]  # the watermark (seq, chain) the chunk continues
    last: tuple[int, str]  # the watermark after it
    size: int  # events read (skipped ones included)
    plan: Plan
    event_rows: list[tuple[object, ...]]
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
        plan = plan_rows(
            num=self.num, events=chunk, seen=self.seen, prior=self.prior, before=self.before, after=self.after
        )
        if self.before or self.after:
            self.prior = (self.prior + [(r.seq, r.text) for r in plan.rows])[-(self.before + self.after) :]
        return _Step(
            expected, self.last, len(chunk), plan,
            [r.values() for r in plan.rows], [(r.id, r.text, r.context) for r in plan.rows],
        )


# retrieval_meta key, "1" when every free byte of the file is known to be zero (written with secure_delete
# since it was created, or vacuumed since): otherwise the first purge runs VACUUM
ZEROED = "zeroed"
RACE_ATTEMPTS = 10  # re-reads of a watermark another writer moved, before giving up


class _Local(threading.local):
    conn: sqlite3.Connection | None = None
    generation: int = -1


class Index:
    """The FTS5 index over every session of one data directory.

    Constructing it opens (or creates) DATA_DIR/index.sqlite; call catch_up()
    at start-up and index_session() after appends. search() indexes a session
    it has never seen on first use.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        ledger: Ledger | None = None,
        *,
        config: IndexConfig | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.path = self.data_dir / INDEX_FILE
        self._own_ledger = ledger is None
        self.ledger = ledger if ledger is not None else Ledger(self.data_dir)
        self.config = config if config is not None else IndexConfig()
        self.warnings: list[str] = []  # what opening and recovering had to do
        self._lock = threading.RLock()
        self._local = _Local()
        self._generation = 0
        self._writer: sqlite3.Connection | None = None
        self._db: sqlite_utils.Database | None = None
        self._inode: tuple[int, int] | None = None
        self._hooks: dict[str, str] = {}
        with self._lock:
            self._open()
        self._owed_purge()

    # -- opening, recovery ------------------------------------------------
    def _connect(self, *, writer: bool) -> sqlite3.Connection:
        if not os.path.lexists(self.path):
            # SQLite gives -wal and -shm the main file's mode: a 0600 database keeps all three private.
            os.close(open_private(self.path, os.O_RDWR | os.O_CREAT))
        conn = sqlite3.connect(self.path, timeout=BUSY_MS / 1000, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
            # What SQLite frees (deleted cells, dropped tables, merged FTS5 segments) is overwritten with zeros.
            if conn.execute("PRAGMA secure_delete = ON").fetchone()[0] != 1:
                raise IndexUnavailable(f"{self.path}: cannot turn secure_delete on")
            if writer:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if mode.lower() != "wal":
                    raise IndexUnavailable(f"{self.path}: cannot switch to WAL mode (got {mode})")
                conn.execute("PRAGMA synchronous = NORMAL")
            else:
                conn.execute("PRAGMA query_only = 1")
        except BaseException:
            conn.close()
            raise
        return conn

    def _open(self) -> None:
        """Open the file, create or check the schema; move a corrupted file aside."""
        try:
            private_dir(self.data_dir)
        except OSError as exc:
            raise IndexUnavailable(f"{self.data_dir}: cannot create the data directory: {exc}") from None
        try:
            self._open_writer()
            self._ensure_schema()
        except sqlite3.DatabaseError as exc:
            if not _is_corruption(exc):
                raise IndexUnavailable(f"{self.path}: {exc}") from None
            self._move_aside(str(exc))
            self._open_writer()
            self._ensure_schema()

    def _open_writer(self) -> None:
        self._close_writer()
        self._writer = self._connect(writer=True)
        self._db = sqlite_utils.Database(self._writer, execute_plugins=False)
        st = os.stat(self.path)
        self._inode = (st.st_dev, st.st_ino)
        self._generation += 1

    def _close_writer(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            except sqlite3.Error:
                pass
        self._writer = None
        self._db = None

    def _ensure_schema(self) -> None:
        conn = self._w()
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        wanted = {
            "schema_version": str(sql.SCHEMA_VERSION),
            "indexed": orjson.dumps(self.config.indexed_part()).decode(),
        }
        if not conn.execute("SELECT 1 FROM sqlite_master").fetchone() and not self._freelist(conn):
            # a new file, written with secure_delete from its first page: no old bytes in free space
            wanted[ZEROED] = "1"
        if "retrieval_meta" in tables:
            have = dict(conn.execute("SELECT key, value FROM retrieval_meta").fetchall())
            if have.get("schema_version") != wanted["schema_version"]:
                self._reset_tables(f"schema version {have.get('schema_version')} is not {sql.SCHEMA_VERSION}")
            elif have.get("indexed") != wanted["indexed"]:
                self._reset_tables(f"index settings changed from {have.get('indexed')} to {wanted['indexed']}")
        self._create_tables(wanted)

    def _create_tables(self, meta: dict[str, str]) -> None:
        conn = self._w()
        with self._tx():
            for stmt in sql.DDL.split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            conn.executemany("INSERT OR REPLACE INTO retrieval_meta (key, value) VALUES (?, ?)", meta.items())
            for ddl in self._hooks.values():
                self._run_ddl(conn, ddl)

    @staticmethod
    def _freelist(conn: sqlite3.Connection) -> int:
        return int(conn.execute("PRAGMA freelist_count").fetchone()[0])

    @staticmethod
    def _run_ddl(conn: sqlite3.Connection, ddl: str) -> None:
        for stmt in ddl.split(";"):
            if stmt.strip():
                conn.execute(stmt)

    def _reset_tables(self, why: str) -> None:
        self._warn(f"{self.path}: {why}; the index is rebuilt from the ledgers")
        conn = self._w()
        with self._tx():
            self._drop_own_tables(conn)

    @staticmethod
    def _drop_own_tables(conn: sqlite3.Connection) -> None:
        for (name,) in conn.execute(sql.FTS_TABLES).fetchall():
            conn.execute(f'DROP TABLE IF EXISTS "{name}"')
        for table in sql.OWN_TABLES:
            conn.execute(f"DROP TABLE IF EXISTS {table}")

    def _move_aside(self, why: str) -> None:
        self._close_writer()
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + f"-{time.time_ns() % 1_000_000_000:09d}"
        target = self.path.with_name(f"{INDEX_FILE}.corrupt-{stamp}")
        for suffix in ("", "-wal", "-shm"):
            src = Path(str(self.path) + suffix)
            if src.exists():
                os.replace(src, Path(str(target) + suffix))
        self._warn(f"{self.path}: unreadable ({why}); moved aside to {target.name} and rebuilt from the ledgers")

    def _warn(self, message: str) -> None:
        log.warning("%s", message)
        self.warnings.append(message)

    def _w(self) -> sqlite3.Connection:
        if self._writer is None:
            raise IndexUnavailable(f"{self.path}: the index is not open")
        return self._writer

    def _check_file(self) -> bool:
        """Reopen when index.sqlite vanished or was replaced under us; True if it did."""
        try:
            st = os.stat(self.path)
            same = (st.st_dev, st.st_ino) == self._inode
        except FileNotFoundError:
            same = False
        if same:
            return False
        with self._lock:
            try:
                st = os.stat(self.path)
                if (st.st_dev, st.st_ino) == self._inode:
                    return False
            except FileNotFoundError:
                pass
            self._warn(f"{self.path}: the file vanished or was replaced; reopened (sessions are re-indexed on use)")
            self._close_writer()
            self._open()
            return True

    def _recover(self, exc: BaseException) -> list[str]:
        """A query hit corruption: move the file aside, rebuild everything, carry on."""
        with self._lock:
            self._move_aside(str(exc))
            self._open()
            return self._catch_up(None)

    def _guarded(self, fn: Callable[[], T]) -> T:
        self._check_file()
        try:
            return fn()
        except sqlite3.DatabaseError as exc:
            if not _is_corruption(exc):
                raise
            self._recover(exc)
            return fn()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE), or a savepoint inside one."""
        with self._lock:
            conn = self._w()
            if conn.in_transaction:
                name = f"sp_{threading.get_ident()}_{time.time_ns()}"
                conn.execute(f"SAVEPOINT {name}")
                try:
                    yield conn
                except BaseException:
                    conn.execute(f"ROLLBACK TO SAVEPOINT {name}")
                    conn.execute(f"RELEASE SAVEPOINT {name}")
                    raise
                conn.execute(f"RELEASE SAVEPOINT {name}")
                return
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.rollback()
                raise
            conn.commit()

    # -- for other packages ------------------------------------------------
    @property
    def generation(self) -> int:
        """Changes whenever the file was opened anew (moved aside, vanished or replaced): a table another package
        derives from its own files (receipts) is empty then, and must be filled again."""
        self._check_file()
        return self._generation

    @contextmanager
    def write(self) -> Iterator[sqlite_utils.Database]:
        """A sqlite-utils Database inside one write transaction, under the write lock.

        Committed when the block ends, rolled back if it raises. sqlite-utils
        methods called inside use savepoints, so they do not commit early.
        """
        self._check_file()
        with self._lock, self._tx():
            assert self._db is not None
            yield self._db

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """This thread's read-only connection (WAL: it never waits for the writer)."""
        self._check_file()
        yield self._reader()

    def ensure_schema(self, name: str, ddl: str) -> None:
        """Run idempotent DDL (CREATE ... IF NOT EXISTS) now and after every rebuild of the file.

        How another package (receipts) adds its tables to index.sqlite. Note that
        a corrupted file is moved aside whole: tables that cannot be derived from
        the ledgers must be able to live with that.
        """
        with self._lock:
            self._hooks[name] = ddl
            with self._tx() as conn:
                self._run_ddl(conn, ddl)

    def _reader(self) -> sqlite3.Connection:
        local = self._local
        if local.conn is None or local.generation != self._generation:
            if local.conn is not None:
                try:
                    local.conn.close()
                except sqlite3.Error:
                    pass
            local.conn = self._connect(writer=False)
            local.generation = self._generation
        return local.conn

    def _read_fresh(self, stmt: str, params: dict[str, Any]) -> list[Any]:
        """Run a read on this thread's connection; reopen it once if its schema view is stale.

        Under concurrent writers (new sessions' FTS5 tables being created, WAL
        checkpoints), FTS5's table constructor occasionally fails on a reader
        ("vtable constructor failed": its internal read of the table's config hit a
        transient state). It is transient: a new connection, after a short pause,
        succeeds. Other errors propagate at once.
        """
        attempts = 6
        for attempt in range(attempts):
            try:
                return self._reader().execute(stmt, params).fetchall()
            except sqlite3.OperationalError as exc:
                if "vtable constructor failed" not in str(exc) or attempt == attempts - 1:
                    raise
                local = self._local
                if local.conn is not None:
                    try:
                        local.conn.close()
                    except sqlite3.Error:
                        pass
                local.conn = None
                time.sleep(0.02 * (attempt + 1))
        raise AssertionError("unreachable")

    def close(self) -> None:
        with self._lock:
            self._close_writer()
            self._generation += 1
            if self._local.conn is not None:
                self._local.conn.close()
                self._local.conn = None
            if self._own_ledger:
                self.ledger.close()

    # -- indexing ------------------------------------------------------------
    def catch_up(self, progress: Progress | None = None) -> list[str]:
        """Bring every session up to date with its ledger; return the warnings (also logged)."""
        self._check_file()
        try:
            return self._catch_up(progress)
        except sqlite3.DatabaseError as exc:
            if not _is_corruption(exc):
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

    def index_session(self, session: str, new_events: Sequence[Event] | None = None) -> list[str]:
        """Index what the session's ledger holds beyond the watermark; return warnings.

        `new_events` (what Ledger.append/append_many just returned) saves
        re-reading the ledger when they continue the watermark's chain exactly.
        """
        validate_session_id(session)
        return self._guarded(lambda: self._index_session(session, new_events, None))

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
        conn = self._w()
        warnings: list[str] = []
        before, after = self.config.context_before, self.config.context_after
        # Read before `prior` and `seen`: a forget by another process after this point (it may have taken
        # rows out of them) makes the chunk's transaction start again from the watermark.
        forgets = self._forgets(num)
        chunks = _Chunks(
            session=session, num=num, stream=stream, last=(last_seq, last_chain), before=before, after=after,
            fresh=last_seq < 0,  # nothing of this session is in the terms table
            prior=self._tail_rows(num, last_seq, before + after) if (before or after) else [],
            load_seen=lambda chunk, seen: self._load_seen(num, chunk, seen),
        )
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="index-plan") as ahead:
            step = chunks.next()
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
        from .text import content_terms

        wanted = {t for ev in chunk for t in content_terms(ev.text)} - seen
        for part in _batched(sorted(wanted), 500):
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

    # -- searching -------------------------------------------------------------
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
        needs_df = len(q.terms) > MAX_QUERY_TERMS or last_seq + 1 >= self.config.prune_min_events
        df = self._term_df(num, q.terms) if needs_df else {}
        cfg = self.config
        batches = term_batches(
            q.terms, df, n_events=last_seq + 1, prune_share=cfg.prune_share, prune_min_events=cfg.prune_min_events
        )
        stmt = sql.search_sql(
            num, text_weight=cfg.text_weight, context_weight=cfg.context_weight, exclude=bool(exclude)
        )
        # the same pool with or without exclusions: they are filtered out before the LIMIT, so a turn's search and
        # the one without its revocations (chat.engine._retrieve) re-rank the same number of best matches
        params: dict[str, Any] = {"limit": candidates_for(k)}
        if exclude:
            params["exclude"] = orjson.dumps([sql.row_id(num, s) for s in exclude]).decode()
        rows: list[Any] = []
        used: list[str] = []
        # The first batch holds the rarest terms; the others run only when it matches nothing,
        # so a query never answers "no event matches" while one of its terms does.
        for used in batches:
            params["match"] = or_query(used)
            rows = self._read_fresh(stmt, params)
            if rows:
                break
        match = params["match"]
        unused = [t for t in q.terms if t not in set(used)]
        spans = query_dates(q.text) if cfg.date_rule else []
        cands = [candidate(r, spans, q.terms, speaker_rule=cfg.speaker_rule) for r in rows]
        if not cands:
            return SearchResponse(session, q.text, k, [], f"session {session}: no event matches", match, unused)
        tiers = tuple(t for t in cfg.tiers if t != CONTEXT or last_seq + 1 < cfg.context_tier_max_events)
        ranked = rank(cands, k, cfg.collapse_weight, tiers=tiers)
        shares = relative([score for _, score in ranked])
        hits = [
            Hit(
                session=session,
                event_id=c.event_id,
                seq=c.seq,
                role=c.role,
                text=c.text,
                meta=c.meta,
                digest=c.digest,
                chain=c.chain,
                ts=c.ts,
                bm25=c.bm25,
                collapse=c.collapse,
                score=score,
                rank=i,
                context_only=c.context_only,
                echo=c.echo,
                relative=share,
            )
            for i, ((c, score), share) in enumerate(zip(ranked, shares, strict=True), start=1)
        ]
        if explain:
            hits = self._explained(num, used, match, ranked, hits, context_tier=CONTEXT in tiers)
        return SearchResponse(session, q.text, k, hits, None, match, unused)

    def _term_df(self, num: int, terms: Sequence[str]) -> dict[str, int]:
        """Each query term's document frequency in the session (by its content-term stem; 0 = no event holds it)."""
        stems = {t: stem(t) for t in terms}
        df: dict[str, int] = {}
        for part in _batched(sorted(set(stems.values())), 500):
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

    # -- forgetting ------------------------------------------------------------
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
        for part in _batched(sorted(first_gone), 500):
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
        conn.execute(f"PRAGMA busy_timeout = {int(PURGE_WAIT_S * 1000)}")
        try:
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        finally:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
        if busy:
            raise PurgeIncomplete(
                f"{self.path}: a reader kept an old snapshot open for {PURGE_WAIT_S:g} s, so the WAL still holds "
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
