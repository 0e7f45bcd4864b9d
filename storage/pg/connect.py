"""The connection pool and the schema of the PostgreSQL backend.

`Database(url)` opens a psycopg-pool ConnectionPool, creates the schema on first use (under an
advisory lock, so replicas starting together do not race) and refuses a database whose schema is
newer than this code. Connections are checked when taken from the pool, so after the server
restarts the next call reconnects instead of failing forever. Every failure to reach the server is
a BackendError whose message names the server (never the password) and the cause.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from storage import BackendError, redact

from . import sql

CONNECT_TIMEOUT_S = 10
POOL_TIMEOUT_S = 30.0
# A connection handed back less than this long ago is handed out again without a round trip to check it: a turn takes
# and returns a connection ~60 times, and the ping was a third of a turn's statements. One idle for longer (as every
# connection is once a lost server is back) is checked first, so the pool still recovers by itself after a restart; a
# server lost within this second costs the requests in flight then, which fail with a BackendError anyway.
RECHECK_AFTER_S = 1.0


class Database:
    """One PostgreSQL database: a pool of connections and the schema in it. Safe for many threads."""

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 8, timeout: float = CONNECT_TIMEOUT_S) -> None:
        self.url = url
        self.shown = redact(url)
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
            return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__

    def ensure_schema(self) -> None:
        with self.transaction() as conn:
            conn.execute(sql.TAKE_SCHEMA_LOCK, (sql.SCHEMA_LOCK,))
            conn.execute(sql.META_TABLE)
            row = conn.execute(sql.GET_SCHEMA_VERSION).fetchone()
            found = int(row[0]) if row else None
            if found is not None and found > sql.SCHEMA_VERSION:
                raise BackendError(
                    f"PostgreSQL at {self.shown}: schema version {found} is newer than this code's {sql.SCHEMA_VERSION}; "
                    "upgrade the app before using this database"
                )
            for ddl in sql.SCHEMA:
                conn.execute(ddl)
            conn.execute(sql.SET_SCHEMA_VERSION, (str(sql.SCHEMA_VERSION),))

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection (autocommit off); a failure to reach the server is a BackendError."""
        try:
            with self.pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise BackendError(f"PostgreSQL at {self.shown}: no connection free or reachable within {POOL_TIMEOUT_S:.0f} s") from exc
        except psycopg.OperationalError as exc:
            raise BackendError(f"PostgreSQL at {self.shown}: {str(exc).strip() or type(exc).__name__}") from exc

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction: committed when the block ends, rolled back if it raises."""
        with self.connection() as conn, conn.transaction():
            yield conn

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.pool.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
