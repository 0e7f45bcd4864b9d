"""The semantic extra's vectors in index.sqlite: embedding what has none, reading a session's, dropping them.

Derived data like every row of the index: one row of `vectors` per embedded event (its `events` row id), float16
(retrieval.semantic.to_blob), written only while the event's row is there and deleted with it (housekeeping's forget,
indexer's drop and rebuild, the table dropped with the others on a reset). Without the extra the table stays empty.

Embedding runs when asked (`embed_pending`: every event of a session that has none, newest first, in batches; the
bench and `rebuild` callers) and at each hybrid search for at most AT_SEARCH of the newest pending events, so a
turn never waits on a whole session: an event without a vector yet still answers, lexically.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from retrieval import sql
from retrieval.semantic import TextEmbedder, from_blobs, to_blob
from storage.common.retrieval.indexer import Indexing

AT_SEARCH = 64  # pending events a hybrid search embeds before it runs (newest first)
BATCH = 256


class Vectoring(Indexing):
    """use_semantic, embed_pending, vector_seqs, and the session's vectors for the hybrid search."""

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
        row = self._reader().execute("SELECT num FROM watermarks WHERE session = ?", (session,)).fetchone()
        if row is None:
            return 0
        num = int(row[0])
        lo, hi = sql.session_range(num)
        done = 0
        while limit is None or done < limit:
            want = BATCH if limit is None else min(BATCH, limit - done)
            pending = self._reader().execute(sql.VECTORS_PENDING, (lo, hi, want)).fetchall()
            if not pending:
                break
            vecs = embedder.embed([str(r[2]) for r in pending])
            rows = [(int(r[0]), to_blob(v), int(r[0])) for r, v in zip(pending, vecs, strict=True)]
            with self._lock, self._tx() as conn:
                conn.executemany(sql.VECTORS_PUT, rows)
            done += len(pending)
            if progress is not None:
                progress(len(pending))
            if len(pending) < want:
                break
        return done

    def vector_seqs(self, session: str) -> list[int]:
        """The seqs of the session that have a stored vector, ascending."""
        row = self._reader().execute("SELECT num FROM watermarks WHERE session = ?", (session,)).fetchone()
        if row is None:
            return []
        lo, hi = sql.session_range(int(row[0]))
        return [int(r[0]) for r in self._reader().execute(sql.VECTORS_OF, (lo, lo, hi)).fetchall()]

    def _session_vectors(self, num: int) -> tuple[np.ndarray, np.ndarray]:
        """The session's (seqs, unit vectors), read once per state of its vectors (count and sum of seqs)."""
        lo, hi = sql.session_range(num)
        conn = self._reader()
        count, total = conn.execute(sql.VECTORS_STATE, (lo, lo, hi)).fetchone()
        cache: dict[int, tuple[tuple[int, int], np.ndarray, np.ndarray]] = self.__dict__.setdefault("_vec_cache", {})
        key = (int(count), int(total))
        found = cache.get(num)
        if found is not None and found[0] == key:
            return found[1], found[2]
        rows = conn.execute(sql.VECTORS_OF, (lo, lo, hi)).fetchall()
        seqs = np.array([int(r[0]) for r in rows], dtype=np.int64)
        matrix = from_blobs([bytes(r[1]) for r in rows])
        cache[num] = (key, seqs, matrix)
        return seqs, matrix

    def _dense_rows(self, num: int, seqs: list[int]) -> list[Any]:
        if not seqs:
            return []
        ids = [sql.row_id(num, s) for s in seqs]
        return self._reader().execute(sql.dense_rows_sql(len(ids)), ids).fetchall()
