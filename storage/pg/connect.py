"""The connection pool and the schema of the PostgreSQL backend.

`Database(url)` opens a psycopg-pool ConnectionPool, creates the schema on first use (under an
advisory lock, so replicas starting together do not race) and refuses a database whose schema is
newer than this code. Connections are checked when taken from the pool, so after the server
restarts the next call reconnects instead of failing forever. Every failure to reach the server is
a BackendError whose message names the server (never the password) and the cause.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from storage import BackendError, redact, scrub
from storage.pg import sql

log = logging.getLogger("storage.pg")

CONNECT_TIMEOUT_S = 10
POOL_TIMEOUT_S = 30.0
# A connection handed back less than this long ago is handed out again without a round trip to check it: a turn takes
# and returns a connection ~60 times, and the ping was a third of a turn's statements. One idle for longer (as every
# connection is once a lost server is back) is checked first, so the pool still recovers by itself after a restart; a
# server lost within this second costs the requests in flight then, which fail with a BackendError anyway.
RECHECK_AFTER_S = 1.0


class _Scrubbed(logging.Filter):
    """Takes every open Database's password, in each form libpq may quote it, out of psycopg's and the pool's log
    lines (the pool logs each failed connection attempt with libpq's message, which can quote a badly encoded one)."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if self.urls:
            text = record.getMessage()
            clean = text
            for url in list(self.urls):
                clean = scrub(clean, url)
            if clean != text:
                record.msg, record.args = clean, None
        return True


_SCRUBBED = _Scrubbed()
for _name in ("psycopg", "psycopg.pool"):
    logging.getLogger(_name).addFilter(_SCRUBBED)


class Database:
    """One PostgreSQL database: a pool of connections and the schema in it. Safe for many threads."""

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 8, timeout: float = CONNECT_TIMEOUT_S) -> None:
        self.url = url
        self.shown = redact(url)
        _SCRUBBED.urls.add(url)
        self._closed = False
        self._lock = threading.Lock()
        self._back: dict[int, float] = {}  # id(connection) -> when it was last handed back to the pool
        self.pool = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            open=False,
            timeout=POOL_TIMEOUT_S,
            check=self._check,
            reset=self._returned,
            kwargs={"connect_timeout": int(timeout), "application_name": "memory-receipt-engine"},
            name="mre",
        )
        try:
            self.pool.open(wait=True, timeout=timeout)
        except PoolTimeout as exc:
            self.pool.close(timeout=0)
            raise BackendError(f"PostgreSQL at {self.shown}: no connection within {timeout:.0f} s ({self._cause()})") from exc
        try:
            self.ensure_schema()
        except BaseException:
            self.pool.close(timeout=0)
            raise

    def _returned(self, conn: psycopg.Connection[Any]) -> None:
        self._back[id(conn)] = time.monotonic()

    def _check(self, conn: psycopg.Connection[Any]) -> None:
        """The pool's liveness check (a round trip), skipped for a connection handed back within RECHECK_AFTER_S."""
        back = self._back.pop(id(conn), None)
        if back is not None and time.monotonic() - back < RECHECK_AFTER_S and not conn.closed:
            return
        ConnectionPool.check_connection(conn)

    def _cause(self) -> str:
        """Why a direct connection fails (the pool only says it timed out)."""
        try:
            with psycopg.connect(self.url, connect_timeout=3):
                return "the server answers now"
        except psycopg.Error as exc:
            return self.said(exc)

    def said(self, exc: BaseException) -> str:
        """The first line of a psycopg error, without the password in any form."""
        text = str(exc).strip()
        return scrub(text.splitlines()[0], self.url) if text else type(exc).__name__

    def _version(self, conn: psycopg.Connection[Any]) -> int | None:
        """The schema version the database records, None when it has none; BackendError when newer than ours."""
        if conn.execute(sql.HAS_META_TABLE).fetchone() == (None,):
            return None
        row = conn.execute(sql.GET_SCHEMA_VERSION).fetchone()
        found = int(row[0]) if row else None
        if found is not None and found > sql.SCHEMA_VERSION:
            raise BackendError(
                f"PostgreSQL at {self.shown}: schema version {found} is newer than this code's {sql.SCHEMA_VERSION}; "
                "upgrade the app before using this database"
            )
        return found

    def ensure_schema(self) -> None:
        """Create or complete the schema unless the database already records this version: then nothing is written,
        so a role that may only read and write the tables (not make them) can use a database made by its owner."""
        try:
            with self.transaction() as conn:
                if self._version(conn) == sql.SCHEMA_VERSION:
                    return
            with self.transaction() as conn:
                conn.execute(sql.TAKE_SCHEMA_LOCK, (sql.SCHEMA_LOCK,))
                conn.execute(sql.META_TABLE)
                if self._version(conn) == sql.SCHEMA_VERSION:  # another process made it while we waited
                    return
                for ddl in sql.SCHEMA:
                    conn.execute(ddl)
                conn.execute(sql.SET_SCHEMA_VERSION, (str(sql.SCHEMA_VERSION),))
        except BackendError as exc:
            if not isinstance(exc.__cause__, psycopg.errors.InsufficientPrivilege):
                raise
            raise BackendError(
                f"PostgreSQL at {self.shown}: {self.said(exc.__cause__)} — this role cannot make the tables (schema version "
                f"{sql.SCHEMA_VERSION}); start the app or any command once with the database owner's role, or grant this "
                "role the right to make tables in the schema"
            ) from None

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection (autocommit off); a failure to reach the server is a BackendError."""
        try:
            with self.pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise BackendError(f"PostgreSQL at {self.shown}: no connection free or reachable within {POOL_TIMEOUT_S:.0f} s") from exc
        except psycopg.OperationalError as exc:
            raise BackendError(f"PostgreSQL at {self.shown}: {self.said(exc)}") from exc
        except psycopg.errors.InsufficientPrivilege as exc:
            raise BackendError(f"PostgreSQL at {self.shown}: {self.said(exc)} (the role lacks a privilege)") from exc

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction: committed when the block ends, rolled back if it raises."""
        with self.connection() as conn, conn.transaction():
            yield conn

    def vacuum(self, statements: Sequence[str]) -> list[str]:
        """Run VACUUM statements on an autocommit connection; return the tables PostgreSQL skipped.

        Only a table's owner (or a superuser) may VACUUM it: for any other role PostgreSQL skips the table with a
        WARNING notice and no error, and the old row versions an erasure left — the erased words — stay until
        autovacuum or the owner's VACUUM. That is logged here (WARNING, naming the tables), never silent."""
        skipped: list[str] = []

        def notice(diag: psycopg.errors.Diagnostic) -> None:
            text = diag.message_primary or ""
            if diag.severity_nonlocalized == "WARNING" and "skipping" in text:
                skipped.append(text)

        with self.connection() as conn:
            conn.autocommit = True
            conn.add_notice_handler(notice)
            try:
                for statement in statements:
                    conn.execute(statement)
            finally:
                conn.remove_notice_handler(notice)
                conn.autocommit = False
        if skipped:
            log.warning(
                "PostgreSQL at %s: VACUUM skipped (%s): this role does not own the tables, so the old row versions of "
                "what was just erased or deleted stay until autovacuum or the owner's VACUUM (docs/BACKENDS.md, Roles)",
                self.shown, "; ".join(skipped),
            )
        return skipped

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.pool.close()  # its URL stays in _SCRUBBED: the pool's threads may still log while they stop

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
