"""The semantic extra's vectors on both backends (issue 35), over the contract suite's `stores` fixture.

A small deterministic embedder stands in for the model (tests/storage/test_semantic_model.py runs the real one): it
maps words to dimensions, with a few synonyms sharing one, so a dense match with no shared word is predictable.
What is proved: vectors are stored beside the rows and gone with them (forget, rebuild, a dropped session), a search
without the extra (or with it disabled) answers exactly as before, the hybrid search adds what only the meaning finds,
never returns an excluded or erased event, and says which mode it ran in.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from ledger.messages import Message
from retrieval.semantic import BLOB_BYTES, DIM, normalized
from storage.stores import Stores

from . import test_contract

# the contract suite's fixtures: a fresh deployment of each backend (ids files, pg), on PostgreSQL one module database
stores = test_contract.stores
pg_module_url = test_contract.pg_module_url

SYNONYMS = {"puppy": "dog", "hound": "dog", "canine": "dog", "overwhelmed": "stress", "stressed": "stress"}


class WordEmbedder:
    """Bag of words hashed into DIM dimensions; synonyms share their head word's dimension."""

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                w = SYNONYMS.get(w.strip(".,!?'"), w.strip(".,!?'"))
                out[i, zlib.crc32(w.encode()) % DIM] += 1.0
        return normalized(out)

    def describe(self) -> dict[str, str]:
        return {"method": "linear-fusion-v2", "model": "word-hash-test", "model_sha256": "0" * 64}


TEXTS = [
    "I adopted a puppy last week",
    "the weather in Leeds is grey",
    "my sister plays the cello",
    "I am overwhelmed at work",
    "we talked about the dog show",
]


def _fill(stores: Stores, session: str = "s1", texts: Sequence[str] = TEXTS) -> None:
    stores.ledger.append_many(session, [Message("user" if i % 2 == 0 else "assistant", t, {}) for i, t in enumerate(texts)])
    stores.index.index_session(session)


def _seqs(resp: Any) -> list[int]:
    return [h.seq for h in resp.results]


class TestVectorsAreStoredBesideTheRows:
    def test_every_indexed_event_gets_one_vector_of_768_bytes(self, stores: Stores) -> None:
        _fill(stores)
        stores.index.use_semantic(WordEmbedder())
        assert stores.index.embed_pending("s1") == len(TEXTS)
        assert stores.index.vector_seqs("s1") == list(range(len(TEXTS)))
        assert stores.index.embed_pending("s1") == 0  # incremental: nothing left
        assert BLOB_BYTES == 768

    def test_new_events_are_embedded_incrementally(self, stores: Stores) -> None:
        _fill(stores)
        stores.index.use_semantic(WordEmbedder())
        stores.index.embed_pending("s1")
        stores.ledger.append("s1", "user", "a canine friend visited")
        stores.index.index_session("s1")
        assert stores.index.embed_pending("s1") == 1
        assert stores.index.vector_seqs("s1") == list(range(len(TEXTS) + 1))

    def test_without_the_extra_nothing_is_embedded(self, stores: Stores) -> None:
        _fill(stores)
        assert stores.index.embed_pending("s1") == 0
        stores.index.search("s1", "dog")
        assert stores.index.vector_seqs("s1") == []
        assert stores.index.semantic is None


class TestAnErasedEventsVectorGoes:
    def test_forgetting_an_event_deletes_its_vector(self, stores: Stores) -> None:
        _fill(stores)
        stores.index.use_semantic(WordEmbedder())
        stores.index.embed_pending("s1")
        stores.ledger.erase("s1", [0])
        stores.index.forget_events("s1", [0])
        assert 0 not in stores.index.vector_seqs("s1")
        assert stores.index.vector_seqs("s1") == [1, 2, 3, 4]

    def test_a_hybrid_search_never_returns_an_erased_event(self, stores: Stores) -> None:
        _fill(stores)
        stores.index.use_semantic(WordEmbedder())
        assert 0 in _seqs(stores.index.search("s1", "hound", k=5))  # found by meaning before
        stores.ledger.erase("s1", [0])
        stores.index.forget_events("s1", [0])
        hits = stores.index.search("s1", "hound", k=50).results
        assert 0 not in [h.seq for h in hits] and not any("puppy" in h.text for h in hits)

    def test_a_rebuild_drops_every_vector_and_embedding_again_restores_them(self, stores: Stores) -> None:
        _fill(stores)
        stores.index.use_semantic(WordEmbedder())
        stores.index.embed_pending("s1")
        stores.ledger.erase("s1", [3])
        assert stores.index.rebuild() == []
        assert stores.index.vector_seqs("s1") == []
        assert stores.index.embed_pending("s1") == 4
        assert stores.index.vector_seqs("s1") == [0, 1, 2, 4]

    def test_a_dropped_session_leaves_no_vector(self, stores: Stores) -> None:
        _fill(stores)
        stores.index.use_semantic(WordEmbedder())
        stores.index.embed_pending("s1")
        stores.index.drop_session("s1")  # control runs it before and after the ledger's deletion
        assert stores.ledger.delete_session("s1") is True
        stores.index.drop_session("s1")
        assert stores.index.vector_seqs("s1") == []


class TestSearchModes:
    def test_with_the_extra_absent_or_disabled_the_answers_are_identical(self, stores: Stores) -> None:
        _fill(stores)
        queries = ["dog", "weather Leeds", "cello sister", "work", "nothing matches this"]
        before = [stores.index.search("s1", q, k=3, explain=True).to_dict() for q in queries]
        stores.index.use_semantic(WordEmbedder())
        stores.index.embed_pending("s1")
        stores.index.use_semantic(None)
        after = [stores.index.search("s1", q, k=3, explain=True).to_dict() for q in queries]
        assert after == before
        assert {d["mode"] for d in after} == {"lexical"}

    def test_the_hybrid_search_finds_a_paraphrase_that_shares_no_word(self, stores: Stores) -> None:
        _fill(stores)
        assert 3 not in _seqs(stores.index.search("s1", "stressed", k=5))
        stores.index.use_semantic(WordEmbedder())
        resp = stores.index.search("s1", "stressed", k=1, explain=True)
        assert resp.mode == "hybrid" and resp.to_dict()["mode"] == "hybrid"
        assert _seqs(resp) == [3]
        assert resp.results[0].explain is not None and resp.results[0].explain["found_by"] == "dense"

    def test_a_lexical_match_that_also_means_it_ranks_first(self, stores: Stores) -> None:
        _fill(stores)
        stores.index.use_semantic(WordEmbedder())
        resp = stores.index.search("s1", "dog show", k=3, explain=True)
        assert resp.results[0].seq == 4
        parts = resp.results[0].explain
        assert parts is not None and parts["found_by"] == "lexical and dense"
        assert parts["fused"] == pytest.approx(parts["lexical_share"] + parts["weight"] * parts["cosine_part"])

    def test_explain_gives_each_part_of_a_hybrid_score_and_the_gate_that_set_the_weight(self, stores: Stores) -> None:
        from retrieval.semantic import FUSION

        _fill(stores)
        stores.index.use_semantic(WordEmbedder())
        worded = stores.index.search("s1", "dog show", k=3, explain=True).results[0].explain
        meant = stores.index.search("s1", "stressed", k=1, explain=True).results[0].explain
        assert worded is not None and meant is not None
        assert worded["method"] == meant["method"] == FUSION.method
        # both words of "dog show" are in the session: the base weight; "stressed" is in no event: the gate's
        assert (worded["overlap"], worded["weight"]) == (1.0, FUSION.weight)
        assert (meant["overlap"], meant["weight"]) == (0.0, FUSION.weight * FUSION.gate_weight)
        assert worded["lexical_score"] is not None and meant["lexical_score"] is None and meant["lexical_share"] == 0.0
        for parts in (worded, meant):
            assert parts["fused"] == pytest.approx(parts["lexical_share"] + parts["weight"] * parts["cosine_part"])

    def test_an_excluded_event_is_not_found_by_meaning_either(self, stores: Stores) -> None:
        _fill(stores)
        stores.index.use_semantic(WordEmbedder())
        assert 0 not in _seqs(stores.index.search("s1", "hound", k=5, exclude_seqs=[0]))

    def test_an_event_not_embedded_yet_still_answers_lexically(self, stores: Stores, monkeypatch: pytest.MonkeyPatch) -> None:
        import storage.common.retrieval.vectors as vectors

        monkeypatch.setattr(vectors, "AT_SEARCH", 0)
        _fill(stores)
        stores.index.use_semantic(WordEmbedder())
        resp = stores.index.search("s1", "cello", k=3)
        assert stores.index.vector_seqs("s1") == []
        assert resp.mode == "hybrid" and _seqs(resp)[0] == 2

    def test_it_names_the_model_it_runs_with(self, stores: Stores) -> None:
        stores.index.use_semantic(WordEmbedder())
        assert stores.index.semantic == {"method": "linear-fusion-v2", "model": "word-hash-test", "model_sha256": "0" * 64}


class GatedEmbedder(WordEmbedder):
    """WordEmbedder whose background thread ("embed-pending") waits at a gate the test opens; a search's query (this
    thread) never waits. `timed_out` records a gate that was never opened: something waited for the embedding."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.timed_out = False
        self.here: list[int] = []  # the sizes of the batches embedded outside the background thread

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if threading.current_thread().name == "embed-pending":
            if not self.gate.wait(10):
                self.timed_out = True
        else:
            self.here.append(len(texts))
        return super().embed(texts)


class TestEmbeddingOffTheTurnsPath:
    def test_a_search_answers_lexically_while_the_background_embedding_waits(self, stores: Stores) -> None:
        _fill(stores)
        gated = GatedEmbedder()
        stores.index.use_semantic(gated)
        stores.index.embed_in_background(["s1"])
        try:
            resp = stores.index.search("s1", "cello", k=3)
            assert resp.mode == "hybrid" and _seqs(resp)[0] == 2
            assert stores.index.vector_seqs("s1") == []  # the thread still waits: the search did not embed the events
            assert sum(gated.here) <= 1  # the search embedded its query at most (none: no vector yet to compare)
            gated.gate.set()
            assert stores.index.embedding_idle(timeout=10)
            assert stores.index.vector_seqs("s1") == list(range(len(TEXTS)))
            assert not gated.timed_out
        finally:
            gated.gate.set()
            stores.index.stop_embedding()

    def test_indexing_a_new_event_queues_it_for_the_background_embedding(self, stores: Stores) -> None:
        _fill(stores)
        gated = GatedEmbedder()
        gated.gate.set()
        stores.index.use_semantic(gated)
        stores.index.embed_in_background(["s1"])
        try:
            assert stores.index.embedding_idle(timeout=10)
            stores.ledger.append("s1", "user", "a canine friend visited")
            stores.index.index_session("s1")
            assert stores.index.embedding_idle(timeout=10)
            assert stores.index.vector_seqs("s1") == list(range(len(TEXTS) + 1))
            assert gated.here == []  # nothing was embedded outside the thread
        finally:
            stores.index.stop_embedding()

    def test_an_event_erased_while_its_batch_is_embedded_leaves_no_vector(self, stores: Stores) -> None:
        _fill(stores)
        gated = GatedEmbedder()
        stores.index.use_semantic(gated)
        stores.index.embed_in_background(["s1"])
        try:
            stores.ledger.erase("s1", [0])
            stores.index.forget_events("s1", [0])  # while the thread holds the batch it read, seq 0 in it
            gated.gate.set()
            assert stores.index.embedding_idle(timeout=10)
            assert stores.index.vector_seqs("s1") == [1, 2, 3, 4]
        finally:
            gated.gate.set()
            stores.index.stop_embedding()

    def test_after_the_thread_stops_a_search_embeds_the_newest_events_itself_again(self, stores: Stores) -> None:
        _fill(stores)
        stores.index.use_semantic(WordEmbedder())
        stores.index.embed_in_background()
        stores.index.stop_embedding()
        stores.index.search("s1", "cello", k=3)
        assert stores.index.vector_seqs("s1") == list(range(len(TEXTS)))


def test_a_search_catching_up_embeds_the_newest_events_first(stores: Stores, monkeypatch: pytest.MonkeyPatch) -> None:
    import storage.common.retrieval.vectors as vectors

    monkeypatch.setattr(vectors, "AT_SEARCH", 2)
    _fill(stores)
    stores.index.use_semantic(WordEmbedder())
    stores.index.search("s1", "cello", k=3)
    assert stores.index.vector_seqs("s1") == [3, 4]
    assert stores.index.embed_pending("s1") == 3  # the rest, oldest first
    assert stores.index.vector_seqs("s1") == [0, 1, 2, 3, 4]


def test_vectors_embedded_after_a_search_are_used_by_the_next_one(stores: Stores) -> None:
    _fill(stores)
    stores.index.use_semantic(WordEmbedder())
    stores.index.embed_pending("s1")
    assert 5 not in _seqs(stores.index.search("s1", "hound", k=10))  # the session's vectors now held in memory
    stores.ledger.append_many("s1", [Message("user", "a canine visited", {}), Message("user", "my puppy barks", {})])
    stores.index.index_session("s1")
    held = stores.index.__dict__["_vec_cache"]
    before = next(iter(held.values()))
    assert stores.index.embed_pending("s1") == 2
    hits = {h.seq: h for h in stores.index.search("s1", "hound", k=10, explain=True).results}
    assert next(iter(held.values())) is before and before.n == 7  # appended to the vectors held, not read again
    assert {5, 6} <= set(hits)
    assert hits[5].explain is not None and hits[5].explain["cosine"] == pytest.approx(3 ** -0.5, abs=1e-3)  # 1 word of 3
    stores.ledger.erase("s1", [6])
    stores.index.forget_events("s1", [6])
    assert 6 not in _seqs(stores.index.search("s1", "hound", k=10))


def test_an_imported_session_is_embedded_with_its_progress_on_either_backend(stores: Stores) -> None:
    from storage import admin

    _fill(stores)
    ticks: list[int] = []
    assert admin.embed_imported(stores.ledger, "s1", WordEmbedder(), ticks.append) == len(TEXTS)
    assert sum(ticks) == len(TEXTS)
    assert stores.index.vector_seqs("s1") == list(range(len(TEXTS)))


class TestTheLastQueriesVectors:
    def test_a_query_searched_again_is_not_embedded_again(self, stores: Stores) -> None:
        _fill(stores)
        model = WordEmbedder()
        stores.index.use_semantic(model)
        stores.index.embed_pending("s1")
        first = stores.index.search("s1", "hound", k=3).to_dict()
        calls = model.calls
        assert stores.index.search("s1", "hound", k=3).to_dict() == first  # a turn searches its message twice or more
        assert model.calls == calls
        stores.index.search("s1", "cello", k=3)
        assert model.calls == calls + 1

    def test_a_forget_drops_the_queries_held(self, stores: Stores) -> None:
        _fill(stores)
        model = WordEmbedder()
        stores.index.use_semantic(model)
        stores.index.embed_pending("s1")
        stores.index.search("s1", "I am overwhelmed at work", k=3)  # a message that is then forgotten
        stores.ledger.erase("s1", [3])
        stores.index.forget_events("s1", [3])
        assert len(stores.index.__dict__["_query_cache"]) == 0
        calls = model.calls
        stores.index.search("s1", "I am overwhelmed at work", k=3)
        assert model.calls == calls + 1


def _another_process_index(stores: Stores) -> Any:
    """A second index over the same deployment: what another process (a CLI forget, a CLI search) opens."""
    if stores.database is None:
        from storage.admin import file_index

        return file_index(stores.ledger.data_dir, stores.ledger)  # type: ignore[attr-defined]
    from storage.pg.index import PgIndex

    return PgIndex(stores.ledger.db, stores.ledger)  # type: ignore[attr-defined]


def test_vectors_held_are_never_those_of_events_another_process_erased_even_when_count_and_sum_agree(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    import storage.common.retrieval.vectors as vectors

    monkeypatch.setattr(vectors, "AT_SEARCH", 0)  # this process's searches embed nothing (as with its thread not there yet)
    texts = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    _fill(stores, texts=texts)
    other = _another_process_index(stores)
    try:
        other.use_semantic(WordEmbedder())
        stores.index.use_semantic(WordEmbedder())
        assert other.embed_pending("s1", limit=3) == 3  # a search's catch-up there: the newest, {5, 6, 7}
        stores.index.search("s1", "zeta", k=3)  # this process now holds (count 3, sum 18)
        stores.ledger.append("s1", "user", "my puppy barks")  # seq 8
        stores.index.index_session("s1")
        stores.ledger.erase("s1", [5, 7])
        other.forget_events("s1", [5, 7])  # there: {6}
        assert other.embed_pending("s1", limit=2) == 2  # {8, 4}: {4, 6, 8}, count 3 and sum 18 again
        assert stores.index.vector_seqs("s1") == [4, 6, 8]
        assert 8 in _seqs(stores.index.search("s1", "hound", k=10))  # found by meaning only
        held = next(iter(stores.index.__dict__["_vec_cache"].values()))
        assert held.view()[0].tolist() == [4, 6, 8]  # not the erased 5 and 7
    finally:
        other.close()


class ForgetsWhileEmbedding(WordEmbedder):
    """WordEmbedder that, while it embeds one query, lets another thread erase and forget `seq` (a visitor's forget
    racing their own search)."""

    def __init__(self, stores: Stores, seq: int) -> None:
        super().__init__()
        self.stores, self.seq, self.armed = stores, seq, False

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.armed and len(texts) == 1:
            self.armed = False

            def forget() -> None:
                self.stores.ledger.erase("s1", [self.seq])
                self.stores.index.forget_events("s1", [self.seq])

            t = threading.Thread(target=forget)
            t.start()
            t.join(30)
            assert not t.is_alive()
        return super().embed(texts)


def test_a_query_embedded_while_its_text_is_forgotten_is_not_held_after_the_forget(stores: Stores) -> None:
    import hashlib

    _fill(stores)
    model = ForgetsWhileEmbedding(stores, 3)
    stores.index.use_semantic(model)
    stores.index.embed_pending("s1")
    model.armed = True
    stores.index.search("s1", TEXTS[3], k=3)  # the forget of this very message lands while its vector is computed
    assert not model.armed and 3 not in stores.index.vector_seqs("s1")
    held = stores.index.__dict__["_query_cache"]
    assert hashlib.sha256(TEXTS[3].encode()).digest() not in held


def _embedding_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "embed-pending"}


def test_closing_the_index_stops_its_background_embedding_between_batches(stores: Stores, monkeypatch: pytest.MonkeyPatch) -> None:
    import storage.common.retrieval.vectors as vectors

    monkeypatch.setattr(vectors, "BATCH", 1)
    before = _embedding_threads()
    _fill(stores)
    gated = GatedEmbedder()
    index = _another_process_index(stores)  # the app's own, closed when it stops
    index.use_semantic(gated)
    index.embed_in_background(["s1"])
    try:
        started = _embedding_threads() - before
        assert len(started) == 1
        closer = threading.Thread(target=index.close)
        closer.start()
        gated.gate.set()  # the batch under way finishes; no other starts
        closer.join(10)
        assert not closer.is_alive()
        assert not any(t.is_alive() for t in started)
        assert len(stores.index.vector_seqs("s1")) < len(TEXTS)
    finally:
        gated.gate.set()
        index.stop_embedding()


def test_a_session_deleted_while_its_batch_is_embedded_lends_no_vector_to_the_next_session(stores: Stores) -> None:
    _fill(stores, "s1", ["my puppy barks at night"])
    gated = GatedEmbedder()
    stores.index.use_semantic(gated)
    stores.index.embed_in_background(["s1"])
    try:
        assert stores.ledger.delete_session("s1")  # while the thread holds s1's batch (its text read, not yet written)
        stores.index.purge_session("s1")
        _fill(stores, "s2", ["the weather in Leeds is grey"])  # on SQLite it takes the number s1 had
        gated.gate.set()
        assert stores.index.embedding_idle(timeout=10)
        stores.index.embed_pending("s2")
        hit = stores.index.search("s2", "weather", k=3, explain=True).results[0]
        want = float(WordEmbedder().embed(["weather"])[0] @ WordEmbedder().embed(["the weather in Leeds is grey"])[0])
        assert hit.seq == 0 and hit.explain is not None
        assert hit.explain["cosine"] == pytest.approx(want, abs=1e-3)  # s2's own vector, not s1's "puppy"
    finally:
        gated.gate.set()
        stores.index.stop_embedding()


def test_vectors_held_for_a_session_another_process_deleted_are_not_those_of_the_session_after_it(stores: Stores) -> None:
    _fill(stores, "s1", ["my puppy barks at night"])
    stores.index.use_semantic(WordEmbedder())
    stores.index.embed_pending("s1")
    stores.index.search("s1", "hound", k=3)  # this process now holds s1's vectors
    other = _another_process_index(stores)
    try:
        other.use_semantic(WordEmbedder())
        assert stores.ledger.delete_session("s1")
        other.purge_session("s1")
        _fill(stores, "s2", ["the weather in Leeds is grey"])  # on SQLite it takes the number s1 had
        other.embed_pending("s2")  # one vector at seq 0: the count, sum and forgets s1's had
        hit = stores.index.search("s2", "weather", k=3, explain=True).results[0]
        want = float(WordEmbedder().embed(["weather"])[0] @ WordEmbedder().embed(["the weather in Leeds is grey"])[0])
        assert hit.seq == 0 and hit.explain is not None
        assert hit.explain["cosine"] == pytest.approx(want, abs=1e-3)  # s2's own vector, not s1's held "puppy"
    finally:
        other.close()
