"""The index file: opening it, its schema, recovery from corruption, connections and transactions.

DATA_DIR/index.sqlite is derived data: every row can be rebuilt from the
ledgers, so a corrupted or vanished file is moved aside and rebuilt, never fatal.

Threads: each thread reads through its own connection (WAL readers never wait
for the writer); every write goes through one connection under one lock.
Every connection runs with `secure_delete` on, so SQLite zeroes what it frees
(housekeeping.py relies on it when forgetting).

IndexFile is the base of storage.files.retrieval.db.Index; the other rooms (indexer.py,
searcher.py, housekeeping.py) add to it what their names say.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from retrieval import sql
from retrieval.config import IndexConfig
from retrieval.model import IndexUnavailable
from retrieval.sql import INDEX_FILE as INDEX_FILE
from storage.common.fsmode import open_private, private_dir

if TYPE_CHECKING:
    import sqlite_utils

    from storage.common.retrieval.indexer import Progress
    from storage.files.ledger.store import Ledger

log = logging.getLogger("retrieval")
BUSY_MS = 30_000
# retrieval_meta key, "1" when every free byte of the file is known to be zero (written with secure_delete
# since it was created, or vacuumed since): otherwise the first purge runs VACUUM
ZEROED = "zeroed"
T = TypeVar("T")


def is_corruption(exc: BaseException) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in (11, 26)  # SQLITE_CORRUPT (incl. _VTAB), SQLITE_NOTADB
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text or "corrupt" in text


def batched(it: Iterable[T], n: int) -> Iterator[list[T]]:
    iterator = iter(it)
    while batch := list(islice(iterator, n)):
        yield batch


class _Local(threading.local):
    conn: sqlite3.Connection | None = None
    generation: int = -1


class IndexFile:
    """DATA_DIR/index.sqlite, open: its writer connection, each thread's reader, the write lock.

    Constructing it opens (or creates) the file and checks its schema.
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
        self.ledger = ledger if ledger is not None else self._default_ledger(self.data_dir)
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

    def _default_ledger(self, data_dir: Path) -> Ledger:
        """The ledger indexed when none is given: the backend's own (storage.files' Index opens DATA_DIR's)."""
        raise TypeError("IndexFile: give the ledger it indexes")

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
            if not is_corruption(exc):
                raise IndexUnavailable(f"{self.path}: {exc}") from None
            self._move_aside(str(exc))
            self._open_writer()
            self._ensure_schema()

    def _open_writer(self) -> None:
        self._close_writer()
        self._writer = self._connect(writer=True)
        self._db = None  # made by write(): sqlite_utils imports pandas when it is installed (~0.5 s), a search needs neither
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
            counted = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'vector_state'").fetchone() is not None
            for stmt in sql.DDL.split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            for trigger in sql.VECTOR_TRIGGERS:
                conn.execute(trigger)
            if not counted:  # an index made before vector_state (or none): its vectors counted once, here
                conn.execute(sql.VECTOR_STATE_FILL)
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
            if not is_corruption(exc):
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
            if self._db is None:
                import sqlite_utils

                self._db = sqlite_utils.Database(self._w(), execute_plugins=False)
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

    # -- what the other rooms provide (indexer.Indexing, housekeeping.Housekeeping) -----------------------
    def _catch_up(self, progress: Progress | None) -> list[str]:
        raise NotImplementedError

    def _owed_purge(self) -> None:
        raise NotImplementedError
