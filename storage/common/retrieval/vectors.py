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
from typing import TYPE_CHECKING, Any

from retrieval import sql
from retrieval.semantic import TextEmbedder, from_blobs, to_blob
from storage.common.retrieval.indexer import Indexing

if TYPE_CHECKING:
    import numpy as np

AT_SEARCH = 64  # pending events a hybrid search embeds before it runs (newest first)
BATCH = 256


class VectorMode:
    """What both backends' vector stores share: the mode (use_semantic, semantic), the embedding loop over a session's
    pending events, and a session's (seqs, unit vectors) cached per state of its vectors. Each backend supplies the
    reads and writes (this module's Vectoring: index.sqlite; storage.pg.vectors.PgVectoring: search_vectors)."""

    _embedder: TextEmbedder | None = None

    def use_semantic(self, embedder: TextEmbedder | None) -> None:
        """Search in hybrid mode with `embedder` (None: lexical, as without the extra)."""
        self._embedder = embedder
        self.__dict__["_vec_cache"] = {}

    @property
    def semantic(self) -> dict[str, str] | None:
        """The method, model and model sha256 searches run with; None when lexical."""
        return None if self._embedder is None else self._embedder.describe()

    @staticmethod
    def _embed_batches(
        embedder: TextEmbedder,
        pending: Callable[[int], list[tuple[int, str]]],
        put: Callable[[list[int], list[bytes]], None],
        limit: int | None,
        progress: Callable[[int], None] | None,
    ) -> int:
        """Embed `pending(want)`'s (seq, text), newest first, in batches of BATCH until none is left or `limit` are
        done, storing each batch with `put(seqs, blobs)`; how many."""
        done = 0
        while limit is None or done < limit:
            want = BATCH if limit is None else min(BATCH, limit - done)
            batch = pending(want)
            if not batch:
                break
            vecs = embedder.embed([text for _seq, text in batch])
            put([seq for seq, _text in batch], [to_blob(v) for v in vecs])
            done += len(batch)
            if progress is not None:
                progress(len(batch))
            if len(batch) < want:
                break
        return done

    def _cached_vectors(self, num: int, state: tuple[int, int], rows: Callable[[], list[Any]]) -> tuple[np.ndarray, np.ndarray]:
        """Session `num`'s (seqs, unit vectors) from `rows()` ((seq, blob) each), read again only when `state`
        (count and sum of seqs of its vectors) differs from the one cached."""
        cache: dict[int, tuple[tuple[int, int], np.ndarray, np.ndarray]] = self.__dict__.setdefault("_vec_cache", {})
        found = cache.get(num)
        if found is not None and found[0] == state:
            return found[1], found[2]
        import numpy as np  # here, as in retrieval.semantic: a lexical search never loads numpy

        got = rows()
        seqs = np.array([int(r[0]) for r in got], dtype=np.int64)
        matrix = from_blobs([bytes(r[1]) for r in got])
        cache[num] = (state, seqs, matrix)
        return seqs, matrix


class Vectoring(Indexing, VectorMode):
    """use_semantic, embed_pending, vector_seqs, and the session's vectors for the hybrid search."""

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
        lo, hi = sql.session_range(int(row[0]))

        def pending(want: int) -> list[tuple[int, str]]:
            return [(int(r[0]), str(r[2])) for r in self._reader().execute(sql.VECTORS_PENDING, (lo, hi, want)).fetchall()]

        def put(ids: list[int], blobs: list[bytes]) -> None:
            with self._lock, self._tx() as conn:
                conn.executemany(sql.VECTORS_PUT, [(i, b, i) for i, b in zip(ids, blobs, strict=True)])

        return self._embed_batches(embedder, pending, put, limit, progress)

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
        return self._cached_vectors(num, (int(count), int(total)), lambda: conn.execute(sql.VECTORS_OF, (lo, lo, hi)).fetchall())

    def _dense_rows(self, num: int, seqs: list[int]) -> list[Any]:
        if not seqs:
            return []
        ids = [sql.row_id(num, s) for s in seqs]
        return self._reader().execute(sql.dense_rows_sql(len(ids)), ids).fetchall()
