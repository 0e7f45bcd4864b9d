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

from retrieval.semantic import TextEmbedder, from_blobs, to_blob
from storage.common.retrieval.vectors import BATCH
from storage.pg import sql

if TYPE_CHECKING:
    from storage.pg.connect import Database


class PgVectoring:
    """use_semantic, embed_pending, vector_seqs, and a session's vectors for the hybrid search (PgIndex)."""

    db: Database
    _embedder: TextEmbedder | None = None

    def use_semantic(self, embedder: TextEmbedder | None) -> None:
        """Search in hybrid mode with `embedder` (None: lexical, as without the extra)."""
        self._embedder = embedder
        self.__dict__["_vec_cache"] = {}

    @property
    def semantic(self) -> dict[str, str] | None:
        """The method, model and model sha256 searches run with; None when lexical."""
        return None if self._embedder is None else self._embedder.describe()

    def embed_pending(
        self, session: str, *, limit: int | None = None, progress: Callable[[int], None] | None = None
    ) -> int:
        """Embed the session's indexed events that have no vector (newest first, at most `limit`); how many."""
        embedder = self._embedder
        if embedder is None:
            return 0
        with self.db.connection() as conn:
            row = conn.execute(sql.SEARCH_SESSION, (session,)).fetchone()
        if row is None:
            return 0
        num = int(row[0])
        done = 0
        while limit is None or done < limit:
            want = BATCH if limit is None else min(BATCH, limit - done)
            with self.db.connection() as conn:
                pending = conn.execute(sql.SEARCH_VECTORS_PENDING, (num, want)).fetchall()
            if not pending:
                break
            vecs = embedder.embed([bytes(r[1]).decode("utf-8", "surrogatepass") for r in pending])
            with self.db.transaction() as conn:
                conn.execute(
                    sql.SEARCH_VECTORS_PUT, (num, [int(r[0]) for r in pending], [to_blob(v) for v in vecs], num)
                )
            done += len(pending)
            if progress is not None:
                progress(len(pending))
            if len(pending) < want:
                break
        return done

    def vector_seqs(self, session: str) -> list[int]:
        """The seqs of the session that have a stored vector, ascending."""
        with self.db.connection() as conn:
            return [int(r[0]) for r in conn.execute(sql.SEARCH_VECTOR_SEQS, (session,)).fetchall()]

    def _session_vectors(self, conn: psycopg.Connection[Any], num: int) -> tuple[np.ndarray, np.ndarray]:
        """The session's (seqs, unit vectors), read once per state of its vectors (count and sum of seqs)."""
        count, total = conn.execute(sql.SEARCH_VECTORS_STATE, (num,)).fetchone() or (0, 0)
        cache: dict[int, tuple[tuple[int, int], np.ndarray, np.ndarray]] = self.__dict__.setdefault("_vec_cache", {})
        key = (int(count), int(total))
        found = cache.get(num)
        if found is not None and found[0] == key:
            return found[1], found[2]
        rows = conn.execute(sql.SEARCH_VECTORS_OF, (num,)).fetchall()
        seqs = np.array([int(r[0]) for r in rows], dtype=np.int64)
        matrix = from_blobs([bytes(r[1]) for r in rows])
        cache[num] = (key, seqs, matrix)
        return seqs, matrix

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
