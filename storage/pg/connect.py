"""The connection pool and the schema of the PostgreSQL backend.

`Database(url)` opens a psycopg-pool ConnectionPool, creates the schema on first use (under an
advisory lock, so replicas starting together do not race) and refuses a database whose schema is
newer than this code. Connections are checked when taken from the pool, so after the server
restarts the next call reconnects instead of failing forever. Every failure to reach the server is
a BackendError whose message names the server (never the password) and the cause.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from storage import BackendError, redact

from . import sql

CONNECT_TIMEOUT_S = 10
POOL_TIMEOUT_S = 30.0


class Database:
    """One PostgreSQL database: a pool of connections and the schema in it. Safe for many threads."""

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 8, timeout: float = CONNECT_TIMEOUT_S) -> None:
        self.url = url
        self.shown = redact(url)
        self._closed = False
        self._lock = threading.Lock()
        self.pool = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            open=False,
            timeout=POOL_TIMEOUT_S,
            check=ConnectionPool.check_connection,
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
