"""index.sqlite's vector_state: one row a session, kept by triggers in the transaction of every write to `vectors`,
the hybrid search's one-lookup check that the vectors it holds are current (issue 35's cost at 100k). It must always
agree with counting the rows, and a search through it must rank exactly as one that reads every vector afresh."""

from __future__ import annotations

import random
import sqlite3
import threading
from pathlib import Path

from ledger.messages import Message
from retrieval import sql
from storage.files.ledger.store import Ledger
from storage.files.retrieval.db import Index

from .test_semantic_vectors import TEXTS, WordEmbedder

WORDS = "dog puppy hound cello sister weather Leeds grey work stress overwhelmed show talked adopted week friend".split()


def _index(d: Path) -> Index:
    ix = Index(d, Ledger(d))
    ix.use_semantic(WordEmbedder())
    return ix


def _num(ix: Index, session: str) -> int:
    return int(ix._reader().execute("SELECT num FROM watermarks WHERE session = ?", (session,)).fetchone()[0])


def _agrees(ix: Index, session: str) -> tuple[int, int]:
    """vector_state's count and sum for the session, asserted equal to counting its rows."""
    num = _num(ix, session)
    lo, hi = sql.session_range(num)
    counted = tuple(int(v) for v in ix._reader().execute(sql.VECTORS_COUNTED, (lo, lo, hi)).fetchone())
    count, total, _gen = ix._vector_state(num)
    assert (count, total) == counted
    return count, total


def _fill(ix: Index, session: str, texts: list[str]) -> None:
    ix.ledger.append_many(session, [Message("user" if i % 2 == 0 else "assistant", t, {}) for i, t in enumerate(texts)])
    ix.index_session(session)


def test_the_state_row_agrees_with_the_rows_through_embedding_forget_drop_and_rebuild(tmp_path: Path) -> None:
    ix = _index(tmp_path)
    _fill(ix, "s1", list(TEXTS))
    _fill(ix, "s2", list(TEXTS))
    assert _agrees(ix, "s1") == (0, 0)
    ix.embed_pending("s1", limit=2)
    assert _agrees(ix, "s1") == (2, 3 + 4)
    ix.embed_pending("s1")
    ix.embed_pending("s2")
    assert _agrees(ix, "s1") == (5, 10)
    ix.ledger.erase("s1", [2])
    ix.forget_events("s1", [2])
    assert _agrees(ix, "s1") == (4, 8)
    assert _agrees(ix, "s2") == (5, 10)  # another session's row untouched
    ix.drop_session("s2")
    assert ix.ledger.delete_session("s2") is True
    assert ix._vector_state(_num(ix, "s1"))[:2] == (4, 8)
    assert ix.rebuild() == []
    assert _agrees(ix, "s1") == (0, 0)
    ix.embed_pending("s1")
    assert _agrees(ix, "s1") == (4, 8)


def test_every_write_moves_the_generation_on_even_one_that_keeps_count_and_sum(tmp_path: Path) -> None:
    ix = _index(tmp_path)
    _fill(ix, "s1", list(TEXTS))
    ix.embed_pending("s1")
    num = _num(ix, "s1")
    before = ix._vector_state(num)
    seqs, _matrix = ix._session_vectors(num)
    row = sql.row_id(num, 1)
    with ix._lock, ix._tx() as conn:  # the same vector written again: an upsert, counted once
        vec = ix._reader().execute("SELECT vec FROM vectors WHERE id = ?", (row,)).fetchone()[0]
        text = ix._reader().execute("SELECT text FROM events WHERE id = ?", (row,)).fetchone()[0]
        conn.execute(sql.VECTORS_PUT, (row, vec, row, text))
    after = ix._vector_state(num)
    assert after[:2] == before[:2] and after[2] == before[2] + 1
    assert _agrees(ix, "s1") == (5, 10)
    held = ix.__dict__["_vec_cache"][num]
    ix._session_vectors(num)
    assert ix.__dict__["_vec_cache"][num] is not held  # read again: its state is not the one held


def test_an_index_made_before_the_state_row_is_counted_when_opened(tmp_path: Path) -> None:
    ix = _index(tmp_path)
    _fill(ix, "s1", list(TEXTS))
    ix.embed_pending("s1")
    ix.close()
    conn = sqlite3.connect(tmp_path / "index.sqlite")
    for trigger in ("vectors_added", "vectors_removed", "vectors_changed"):
        conn.execute(f"DROP TRIGGER {trigger}")
    conn.execute("DROP TABLE vector_state")
    conn.commit()
    conn.close()
    ix = _index(tmp_path)
    assert _agrees(ix, "s1") == (5, 10)
    ix.ledger.erase("s1", [4])
    ix.forget_events("s1", [4])
    assert _agrees(ix, "s1") == (4, 6)  # the triggers are back too


def test_appends_embedded_while_searches_run_keep_the_state_row_right(tmp_path: Path) -> None:
    ix = _index(tmp_path)
    _fill(ix, "s1", list(TEXTS))
    ix.embed_in_background(["s1"])
    errors: list[BaseException] = []

    def search() -> None:
        try:
            for _ in range(30):
                ix.search("s1", "hound", k=5)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=search) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for i in range(20):
            ix.ledger.append("s1", "user", f"a canine friend number {i}")
            ix.index_session("s1")  # queues the session for the background embedding
        for t in threads:
            t.join()
        assert ix.embedding_idle(timeout=30)
    finally:
        ix.stop_embedding()
    assert not errors
    n = len(TEXTS) + 20
    assert _agrees(ix, "s1") == (n, n * (n - 1) // 2)
    fresh = _index(tmp_path)
    assert ix.search("s1", "hound", k=10).to_dict() == fresh.search("s1", "hound", k=10).to_dict()


def test_a_session_searched_as_it_changes_ranks_as_one_reading_every_vector_afresh(tmp_path: Path) -> None:
    rng = random.Random(35)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) for _ in range(400)]
    queries = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4))) for _ in range(25)]
    warm = _index(tmp_path)
    _fill(warm, "s1", texts[:300])
    warm.embed_pending("s1")
    for q in queries:
        warm.search("s1", q, k=10)  # the vectors now held, then changed under it: appends, a forget, more appends
    _fill(warm, "s1", texts[300:350])
    warm.embed_pending("s1")
    warm.ledger.erase("s1", [7, 120])
    warm.forget_events("s1", [7, 120])
    _fill(warm, "s1", texts[350:])
    warm.embed_pending("s1")
    cold = _index(tmp_path)
    for q in queries:
        got = warm.search("s1", q, k=10)
        assert got.mode == "hybrid"
        assert [(h.seq, h.score) for h in got.results] == [(h.seq, h.score) for h in cold.search("s1", q, k=10).results]


def test_a_session_with_nothing_pending_is_not_counted_again_until_it_changes(tmp_path: Path) -> None:
    ix = _index(tmp_path)
    _fill(ix, "s1", list(TEXTS))
    assert ix.embed_pending("s1") == len(TEXTS)
    assert ix.embed_pending("s1") == 0  # counted: nothing pending, remembered
    seen: list[str] = []
    ix._reader().set_trace_callback(seen.append)
    assert ix.embed_pending("s1") == 0
    ix.search("s1", "hound", k=3)  # a one-shot search catches up first (no background thread)
    assert not [s for s in seen if "FROM events WHERE id BETWEEN" in s and "count(*)" in s]
    ix.ledger.append("s1", "user", "a canine friend visited")
    ix.index_session("s1")
    assert ix.embed_pending("s1") == 1  # its last indexed seq moved: counted again
    assert ix.rebuild() == []
    assert ix.embed_pending("s1") == len(TEXTS) + 1  # the vectors gone: their state moved
    _agrees(ix, "s1")
