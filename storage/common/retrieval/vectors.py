"""The semantic extra's vectors in index.sqlite: embedding what has none, reading a session's, dropping them.

Derived data like every row of the index: one row of `vectors` per embedded event (its `events` row id), float16
(retrieval.semantic.to_blob), written only while the event's row is there and deleted with it (housekeeping's forget,
indexer's drop and rebuild, the table dropped with the others on a reset). Without the extra the table stays empty.

Embedding runs when asked (`embed_pending`: every event of a session that has none, oldest first, in batches; the
bench, `rebuild` and `import --semantic`), and in one of two ways for the events a turn appends:

- in the background (`embed_in_background`, what the app does): a thread of this process embeds each session that
  `index_session` brought up to date (and those it is handed at start), so a turn never waits on the embedding of
  its own events; a search embeds nothing but its query, and an event without a vector yet answers lexically;
- otherwise (a one-shot CLI search) a hybrid search first embeds at most AT_SEARCH of the newest pending events.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ledger import Event
from retrieval import sql
from retrieval.semantic import TextEmbedder, from_blobs, to_blob
from storage.common.retrieval.indexer import Indexing, Progress

if TYPE_CHECKING:
    import numpy as np

AT_SEARCH = 64  # pending events a hybrid search embeds before it runs (newest first), when none embeds in the background
BATCH = 256
QUERY_CACHE = 16  # the last queries' vectors held: a turn searches with its message two or three times (chat.retrieve)
log = logging.getLogger("retrieval")


def drop_held_queries(index: object) -> None:
    """Let go of the last queries' vectors (every forget, before and after its rows go: one may be the text going).

    The dict is replaced, not cleared: a search embedding its query meanwhile stores the vector in the dict it
    started with, which no one reads again (cleared, it would hold the vector of a text forgotten while it ran)."""
    index.__dict__["_query_cache"] = OrderedDict()


class _HeldQueries:
    """The model for a search's query, holding the vectors of the last QUERY_CACHE queries (keyed by the sha256 of
    their text, in memory only; every forget drops them all: the message forgotten may be one of them)."""

    def __init__(self, model: TextEmbedder, held: OrderedDict[bytes, np.ndarray], lock: threading.Lock) -> None:
        self.model, self.held, self.lock = model, held, lock

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) != 1:
            return self.model.embed(texts)
        key = hashlib.sha256(texts[0].encode("utf-8", "surrogatepass")).digest()
        with self.lock:
            found = self.held.get(key)
            if found is not None:
                self.held.move_to_end(key)
                return found
        vec = self.model.embed(texts)
        with self.lock:
            self.held[key] = vec
            while len(self.held) > QUERY_CACHE:
                self.held.popitem(last=False)
        return vec

    def describe(self) -> dict[str, str]:
        return self.model.describe()


class _Background:
    """The sessions waiting for the embedding thread, and whether it is busy (one Condition guards both)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.queued: dict[str, None] = {}  # insertion-ordered: first woken, first embedded
        self.busy = False
        self.stopped = False
        self.failures = 0
        self.thread: threading.Thread | None = None


class _Stopped(Exception):
    """Raised after a batch by the background thread's progress when it was asked to stop."""


class VectorMode:
    """What both backends' vector stores share: the mode (use_semantic, semantic), the embedding loop over a session's
    pending events, and a session's (seqs, unit vectors) cached per state of its vectors. Each backend supplies the
    reads and writes (this module's Vectoring: index.sqlite; storage.pg.vectors.PgVectoring: search_vectors)."""

    _embedder: TextEmbedder | None = None
    _background: _Background | None = None

    def use_semantic(self, embedder: TextEmbedder | None) -> None:
        """Search in hybrid mode with `embedder` (None: lexical, as without the extra)."""
        self._embedder = embedder
        self.__dict__["_vec_cache"] = {}
        self.__dict__["_query_cache"] = OrderedDict()

    def _query_embedder(self) -> TextEmbedder:
        """The model for a search's query, with the last queries' vectors held (_HeldQueries)."""
        assert self._embedder is not None
        held = self.__dict__.setdefault("_query_cache", OrderedDict())
        return _HeldQueries(self._embedder, held, self.__dict__.setdefault("_query_lock", threading.Lock()))

    def embed_pending(
        self, session: str, *, limit: int | None = None, progress: Callable[[int], None] | None = None
    ) -> int:
        """Each backend's: embed the session's indexed events that have no vector (at most `limit`, newest first; all, oldest first)."""
        raise NotImplementedError

    # -- embedding off the turn's path -------------------------------------------------------------------------
    def embed_in_background(self, sessions: Iterable[str] = ()) -> None:
        """From now on embed in a thread of this process: `sessions` now, then each session `index_session` brings
        up to date. A hybrid search then embeds only its query: events not embedded yet answer lexically."""
        if self._background is None:
            bg = self._background = _Background()
            bg.thread = threading.Thread(target=self._embed_loop, args=(bg,), name="embed-pending", daemon=True)
            bg.thread.start()
        for session in sessions:
            self._wake(session)

    def stop_embedding(self, timeout: float | None = 30.0) -> None:
        """Stop the background thread after the batch it is embedding, waiting up to `timeout` seconds for it to end
        (a search embeds at search again). Closing the index calls it: a thread left running would write (or fail,
        every wake, on connections closed under it) after its index was closed."""
        bg, self._background = self._background, None
        if bg is not None:
            with bg.cond:
                bg.stopped = True
                bg.cond.notify_all()
            if bg.thread is not None and bg.thread is not threading.current_thread():
                bg.thread.join(timeout)

    def embedding_idle(self, timeout: float | None = None) -> bool:
        """Whether the background thread has nothing queued or running (waiting up to `timeout` seconds for it)."""
        bg = self._background
        if bg is None:
            return True
        with bg.cond:
            return bg.cond.wait_for(lambda: not bg.queued and not bg.busy, timeout)

    def _wake(self, session: str) -> None:
        """Queue `session` for the background thread (nothing when there is none, or no model)."""
        bg = self._background
        if bg is None or self._embedder is None:
            return
        with bg.cond:
            bg.queued[session] = None
            bg.cond.notify_all()

    def _embed_loop(self, bg: _Background) -> None:
        while True:
            with bg.cond:
                bg.cond.wait_for(lambda: bg.queued or bg.stopped)
                if bg.stopped:
                    return
                session = next(iter(bg.queued))
                del bg.queued[session]
                bg.busy = True
            try:
                self.embed_pending(session, progress=lambda _n: self._check_stopped(bg))
            except _Stopped:
                pass
            except Exception as exc:  # noqa: BLE001 - the thread must live on; the search answers lexically meanwhile
                bg.failures += 1
                log.warning("session %s: embedding in the background failed (%s)", session, type(exc).__name__)
            finally:
                with bg.cond:
                    bg.busy = False
                    bg.cond.notify_all()

    @staticmethod
    def _check_stopped(bg: _Background) -> None:
        if bg.stopped:
            raise _Stopped

    def _embed_at_search(self, session: str) -> None:
        """Before a hybrid search: wake the background thread, or (none) embed at most AT_SEARCH newest events."""
        if self._background is not None:
            self._wake(session)
        else:
            self.embed_pending(session, limit=AT_SEARCH)

    @property
    def semantic(self) -> dict[str, str] | None:
        """The method, model and model sha256 searches run with; None when lexical."""
        return None if self._embedder is None else self._embedder.describe()

    @staticmethod
    def _embed_batches(
        embedder: TextEmbedder,
        pending: Callable[[int, bool], list[tuple[int, str]]],
        put: Callable[[list[int], list[bytes]], None],
        limit: int | None,
        progress: Callable[[int], None] | None,
        missing: int,
    ) -> int:
        """Embed `pending(want, newest)`'s (seq, text) in batches of BATCH until none is left or `limit` are done,
        storing each batch with `put(seqs, blobs)`; how many. With a `limit` (a search's catch-up) the newest first:
        what a turn may ask about; without, the oldest first: the rows then fill the table's pages (written newest
        first they were left 60% full). `missing` (events less vectors, counted first)
        bounds it: nothing to do costs two counts, and the scan for pending rows stops once it found them all (the
        new events are the newest), rather than walking a whole embedded session to fill a batch."""
        done = 0
        newest = limit is not None
        limit = missing if limit is None else min(limit, missing)
        while done < limit:
            want = min(BATCH, limit - done)
            batch = pending(want, newest)
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

    def _cached_vectors(
        self, num: int, state: tuple[int, int, int, str], rows: Callable[[], list[Any]], after: Callable[[int], list[Any]] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Session `num`'s (seqs, unit vectors) from `rows()` ((seq, blob) each, ascending), read again only when
        `state` (how many forgets changed the session's rows, read first; then count and sum of seqs of its vectors)
        differs from the one cached. When only vectors past the last one cached were added (a turn's events, embedded
        in the background) and nothing was forgotten, `after(last seq)` reads those alone and they are appended in
        place: a 100k-event session is not read again (77 MB) at every turn.

        The forgets count is in the state because count and sum alone can agree after an erasure in another process
        (which cannot drop what this one holds): {5, 6, 7} erased to {6}, then {4, 8} embedded, is {4, 6, 8}, count 3
        and sum 18 again, and the erased 5 and 7 would be held (and 4 and 8 never found by meaning). The session's
        name is in it too: SQLite gives a deleted session's number to the next new session."""
        # one search at a time brings the held vectors up to date (the app searches from several threads): two that
        # appended the same new rows at once would hold them twice
        import numpy as np  # here, as in retrieval.semantic: a lexical search never loads numpy

        with self.__dict__.setdefault("_vec_lock", threading.Lock()):
            cache: dict[int, _Cached] = self.__dict__.setdefault("_vec_cache", {})
            found = cache.get(num)
            if found is not None and found.state == state:
                return found.view()
            if found is not None and after is not None and found.n and state[0] > found.state[0] and state[2:] == found.state[2:]:
                new = after(int(found.seqs[found.n - 1]))
                seqs = np.array([int(r[0]) for r in new], dtype=np.int64)
                if found.state[0] + seqs.size == state[0] and found.state[1] + int(seqs.sum()) == state[1]:
                    found.append(seqs, from_blobs([bytes(r[1]) for r in new]), state)
                    return found.view()
            got = rows()
            held = _Cached(state, np.array([int(r[0]) for r in got], dtype=np.int64), from_blobs([bytes(r[1]) for r in got]))
            cache[num] = held
            return held.view()


class _Cached:
    """A session's vectors held in memory: seqs ascending, one unit row each, with room to grow (doubling)."""

    def __init__(self, state: tuple[int, int, int, str], seqs: np.ndarray, matrix: np.ndarray) -> None:
        self.state, self.n, self.seqs, self.matrix = state, int(seqs.size), seqs, matrix

    def view(self) -> tuple[np.ndarray, np.ndarray]:
        return self.seqs[: self.n], self.matrix[: self.n]

    def append(self, seqs: np.ndarray, matrix: np.ndarray, state: tuple[int, int, int, str]) -> None:
        import numpy as np  # as in _cached_vectors

        need = self.n + seqs.size
        if need > self.seqs.size:
            size = max(need, 2 * self.seqs.size)
            grown_seqs = np.zeros(size, dtype=np.int64)
            grown = np.zeros((size, self.matrix.shape[1]), dtype=np.float32)
            grown_seqs[: self.n], grown[: self.n] = self.seqs[: self.n], self.matrix[: self.n]
            self.seqs, self.matrix = grown_seqs, grown
        self.seqs[self.n : need], self.matrix[self.n : need] = seqs, matrix
        self.n, self.state = need, state


class Vectoring(Indexing, VectorMode):
    """use_semantic, embed_pending, vector_seqs, and the session's vectors for the hybrid search."""

    def embed_pending(
        self, session: str, *, limit: int | None = None, progress: Callable[[int], None] | None = None
    ) -> int:
        """Embed the session's indexed events that have no vector (at most `limit`, newest first; all, oldest first)."""
        embedder = self._embedder
        if embedder is None:
            return 0
        row = self._reader().execute("SELECT num FROM watermarks WHERE session = ?", (session,)).fetchone()
        if row is None:
            return 0
        lo, hi = sql.session_range(int(row[0]))
        conn = self._reader()
        missing = int(conn.execute(sql.EVENTS_COUNT, (lo, hi)).fetchone()[0]) - int(
            conn.execute(sql.VECTORS_STATE, (lo, lo, hi)).fetchone()[0]
        )

        texts: dict[int, str] = {}  # the batch's texts: a row whose text is no longer this one gets no vector

        def pending(want: int, newest: bool) -> list[tuple[int, str]]:
            stmt = sql.VECTORS_PENDING if newest else sql.VECTORS_PENDING_OLDEST
            batch = [(int(r[0]), str(r[2])) for r in self._reader().execute(stmt, (lo, hi, want)).fetchall()]
            texts.clear()
            texts.update(batch)
            return batch

        def put(ids: list[int], blobs: list[bytes]) -> None:
            with self._lock, self._tx() as conn:
                conn.executemany(sql.VECTORS_PUT, [(i, b, i, texts[i]) for i, b in zip(ids, blobs, strict=True)])

        return self._embed_batches(embedder, pending, put, limit, progress, missing)

    def index_session(
        self, session: str, new_events: Sequence[Event] | None = None, *, progress: Progress | None = None
    ) -> list[str]:
        """Indexing.index_session, then the session queued for the background embedding (when it runs)."""
        warnings = super().index_session(session, new_events, progress=progress)
        self._wake(session)
        return warnings

    def close(self) -> None:
        """The background embedding stopped first (VectorMode.stop_embedding), then the connections closed."""
        self.stop_embedding()
        super().close()

    def vector_seqs(self, session: str) -> list[int]:
        """The seqs of the session that have a stored vector, ascending."""
        row = self._reader().execute("SELECT num FROM watermarks WHERE session = ?", (session,)).fetchone()
        if row is None:
            return []
        lo, hi = sql.session_range(int(row[0]))
        return [int(r[0]) for r in self._reader().execute(sql.VECTORS_OF, (lo, lo, hi)).fetchall()]

    def _session_vectors(self, num: int) -> tuple[np.ndarray, np.ndarray]:
        """The session's (seqs, unit vectors), read once per state of its vectors (forgets, count and sum of seqs)."""
        lo, hi = sql.session_range(num)
        conn = self._reader()
        forgets = conn.execute("SELECT value FROM retrieval_meta WHERE key = ?", (self._forgets_key(num),)).fetchone()
        owner = conn.execute("SELECT session FROM watermarks WHERE num = ?", (num,)).fetchone()
        count, total = conn.execute(sql.VECTORS_STATE, (lo, lo, hi)).fetchone()
        return self._cached_vectors(
            num, (int(count), int(total), 0 if forgets is None else int(forgets[0]), "" if owner is None else str(owner[0])), lambda: conn.execute(sql.VECTORS_OF, (lo, lo, hi)).fetchall(),
            lambda last: conn.execute(sql.VECTORS_OF, (lo, sql.row_id(num, last + 1), hi)).fetchall(),
        )

    def _dense_rows(self, num: int, seqs: list[int]) -> list[Any]:
        if not seqs:
            return []
        ids = [sql.row_id(num, s) for s in seqs]
        return self._reader().execute(sql.dense_rows_sql(len(ids)), ids).fetchall()
