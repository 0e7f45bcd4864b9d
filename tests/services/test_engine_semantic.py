"""A turn with the semantic extra (FORMAT.md §25): its receipt names the method, the model and the model's sha256 when
the search that chose its memories ran hybrid, and carries nothing new when it ran lexically (the default)."""

from __future__ import annotations

from pathlib import Path

from chat.engine import Engine
from chat.llm import LLM
from receipts.body import parse_receipt

from ..storage.test_semantic_vectors import WordEmbedder


def _engine(tmp_path: Path) -> Engine:
    eng = Engine(tmp_path / "data", llm=LLM(api_key=""), receipt_format=2)
    eng.remember("alice", "I adopted a puppy last week")
    eng.remember("alice", "the tax form is due on Friday")
    return eng


def test_a_lexical_turn_writes_no_semantic_member(tmp_path: Path) -> None:
    eng = _engine(tmp_path)
    turn = eng.turn("alice", "When is the tax form due?")
    assert "semantic" not in turn.body
    assert "semantic" not in parse_receipt(turn.receipt_path.read_bytes()).signed_body


def test_a_hybrid_turn_names_the_method_model_and_sha256_in_its_signed_body(tmp_path: Path) -> None:
    eng = _engine(tmp_path)
    eng.index.use_semantic(WordEmbedder())
    turn = eng.turn("alice", "How is my hound doing?")
    assert 0 in [h.seq for h in turn.hits]  # "hound" and "puppy" share only their meaning
    signed = parse_receipt(turn.receipt_path.read_bytes()).signed_body
    assert signed["semantic"] == {"v": 1, "method": "linear-fusion-v2", "model": "word-hash-test", "model_sha256": "0" * 64}


def test_forgetting_a_memory_and_the_answers_that_cited_it_leaves_none_of_their_vectors(tmp_path: Path) -> None:
    from control.forget import forget

    eng = _engine(tmp_path)
    eng.index.use_semantic(WordEmbedder())
    turn = eng.turn("alice", "How is my hound doing?")  # cites seq 0; its question and answer are seqs 2 and 3
    eng.index.embed_pending("alice")
    assert eng.index.vector_seqs("alice") == [0, 1, 2, 3]
    result = forget(eng.data_dir, "alice", [0], ledger=eng.ledger, index=eng.index, key=eng.key)
    assert {0, turn.assistant_event.seq} <= set(result.erased)  # the memory, and the answer that cited it (cascade)
    left = eng.index.vector_seqs("alice")
    assert left and not set(result.erased) & set(left)
    hits = eng.index.search("alice", "hound", k=10).results
    assert not any("puppy" in h.text for h in hits)


def test_a_turn_does_not_wait_for_its_own_events_to_be_embedded(tmp_path: Path) -> None:
    from ..storage.test_semantic_vectors import GatedEmbedder

    eng = _engine(tmp_path)
    gated = GatedEmbedder()
    gated.gate.set()
    eng.index.use_semantic(gated)
    eng.index.embed_in_background(["alice"])
    try:
        assert eng.index.embedding_idle(timeout=10)  # the two memories have vectors
        gated.gate.clear()  # from here the thread waits until the turn is over
        turn = eng.turn("alice", "How is my hound doing?")
        assert turn.body["semantic"]["model"] == "word-hash-test"  # a hybrid turn
        assert 0 in [h.seq for h in turn.hits]
        assert eng.index.vector_seqs("alice") == [0, 1]  # its question and answer still wait for the thread
        assert sum(gated.here) <= 1  # the turn embedded its query, nothing else
        gated.gate.set()
        assert eng.index.embedding_idle(timeout=10)
        assert eng.index.vector_seqs("alice") == [0, 1, 2, 3]
        assert not gated.timed_out
    finally:
        gated.gate.set()
        eng.index.stop_embedding()
