"""The semantic extra's vectors on PostgreSQL (search_vectors): embedding what has none, reading a session's.

As storage/common/retrieval/vectors.py does for index.sqlite; here the foreign key onto search_events deletes a vector
with its event's row (forget, re-index, a dropped session, the rebuild's TRUNCATE), so no forgetting code is needed.
Every statement is in storage/pg/sql.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg

from storage.common.retrieval.vectors import VectorMode
from storage.pg import sql

if TYPE_CHECKING:
    from storage.pg.connect import Database


class PgVectoring(VectorMode):
    """use_semantic, embed_pending, vector_seqs, and a session's vectors for the hybrid search (PgIndex)."""

    db: Database

    def embed_pending(
        self, session: str, *, limit: int | None = None, progress: Callable[[int], None] | None = None
    ) -> int:
        """Embed the session's indexed events that have no vector (at most `limit`, newest first; all, oldest first)."""
        embedder = self._embedder
        if embedder is None:
            return 0
        with self.db.connection() as conn:
            row = conn.execute(sql.SEARCH_SESSION, (session,)).fetchone()
        if row is None:
            return 0
        num = int(row[0])
        with self.db.connection() as conn:
            missing = int((conn.execute(sql.SEARCH_VECTORS_MISSING, (num, num)).fetchone() or (0,))[0])

        def pending(want: int, newest: bool) -> list[tuple[int, str]]:
            stmt = sql.SEARCH_VECTORS_PENDING if newest else sql.SEARCH_VECTORS_PENDING_OLDEST
            with self.db.connection() as conn:
                rows = conn.execute(stmt, (num, want)).fetchall()
            return [(int(r[0]), bytes(r[1]).decode("utf-8", "surrogatepass")) for r in rows]

        def put(seqs: list[int], blobs: list[bytes]) -> None:
            with self.db.transaction() as conn:
                conn.execute(sql.SEARCH_VECTORS_PUT, (num, seqs, blobs, num))

        return self._embed_batches(embedder, pending, put, limit, progress, missing)

    def vector_seqs(self, session: str) -> list[int]:
        """The seqs of the session that have a stored vector, ascending."""
        with self.db.connection() as conn:
            return [int(r[0]) for r in conn.execute(sql.SEARCH_VECTOR_SEQS, (session,)).fetchall()]

    def _session_vectors(self, conn: psycopg.Connection[Any], num: int) -> tuple[np.ndarray, np.ndarray]:
        """The session's (seqs, unit vectors), read once per state of its vectors (forgets, count and sum of seqs)."""
        forgets = conn.execute(sql.SEARCH_FORGETS, (num,)).fetchone()
        count, total = conn.execute(sql.SEARCH_VECTORS_STATE, (num,)).fetchone() or (0, 0)
        return self._cached_vectors(
            num, (int(count), int(total), 0 if forgets is None else int(forgets[0]), ""),  # numbers are never reused here
            lambda: conn.execute(sql.SEARCH_VECTORS_OF, (num,)).fetchall(),
            lambda last: conn.execute(sql.SEARCH_VECTORS_AFTER, (num, last)).fetchall(),
        )

    @staticmethod
    def _dense_rows(conn: psycopg.Connection[Any], num: int, seqs: list[int]) -> list[Any]:
        """The events of `seqs` in retrieval.sql.search_sql's columns, with no lexical score."""
        if not seqs:
            return []
        return [
            (
                int(d[0]), d[1], d[2], d[3], bytes(d[4]).decode("utf-8", "surrogatepass"), bytes(d[5]),
                d[6], d[7], 0.0, float(d[8]), 0.0, float(d[9]),
            )
            for d in conn.execute(sql.SEARCH_HITS, (num, seqs)).fetchall()
        ]
