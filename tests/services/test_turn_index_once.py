"""A turn writes the index once (issue 30): its question and its answer in one transaction, after the model.

The search a turn makes runs before its question is indexed (the receipt's `indexed` is the question's seq), so
indexing the question with the answer changes no result; what the index holds after a turn is what a rebuild from
the ledger holds, also when supersession records sit between the question and the answer, or when a turn stopped
before its answer (indexed when it fails).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chat.engine import Engine, TurnError
from storage.common.retrieval import indexer

from ..forget_support import engine

S = "alice"


def _rows(eng: Engine) -> list[tuple[int, str, str]]:
    with eng.index.read() as conn:
        return [(int(r[0]), str(r[1]), str(r[2])) for r in conn.execute("SELECT seq, text, context FROM events ORDER BY id")]


def _same_as_a_rebuild(eng: Engine) -> list[tuple[int, str, str]]:
    kept = _rows(eng)
    eng.index.rebuild()
    assert _rows(eng) == kept
    return kept


@pytest.fixture
def eng(tmp_path: Path) -> Engine:
    e = engine(tmp_path / "data")
    e.remember(S, "I adopted a grey cat named Miso")
    e.remember(S, "I moved to Lisbon in March")
    return e


def test_a_turn_writes_the_index_once_with_its_question_and_its_answer(eng: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    eng.turn(S, "What is my cat called?")
    writes: list[int] = []
    real = indexer.Indexing._write_chunks

    def counted(self: Any, *a: Any, **k: Any) -> Any:
        writes.append(1)
        return real(self, *a, **k)

    monkeypatch.setattr(indexer.Indexing, "_write_chunks", counted)
    turn = eng.turn(S, "Where did I move?")
    assert len(writes) == 1
    seqs = [seq for seq, _text, _ctx in _same_as_a_rebuild(eng)]
    assert turn.user_event.seq in seqs and turn.assistant_event.seq in seqs


def test_the_search_of_the_next_turn_finds_the_question_and_the_answer(eng: Engine) -> None:
    first = eng.turn(S, "Tell me about the marathon in Porto")
    hits = eng.index.search(S, "marathon Porto", 8).results
    assert first.user_event.seq in [h.seq for h in hits]


def test_with_supersession_records_between_question_and_answer_the_index_matches_a_rebuild(eng: Engine) -> None:
    eng.turn(S, "I live in Leeds")
    moved = eng.turn(S, "We've just moved to Bristol")  # its question, a supersession record, its answer
    assert moved.assistant_event.seq == moved.user_event.seq + 2
    eng.turn(S, "Where do I live?")
    _same_as_a_rebuild(eng)


def test_a_turn_that_stops_before_its_answer_leaves_its_question_indexed_as_a_rebuild_would(eng: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_a: Any, **_k: Any) -> Any:
        raise RuntimeError("the model client broke")

    monkeypatch.setattr(eng.llm, "complete", broken)
    with pytest.raises(TurnError):
        eng.turn(S, "Which cello did I buy?")
    monkeypatch.undo()
    question = eng.ledger.head(S)[0] - 2  # the question, then the turn's failure note
    assert question in [seq for seq, _t, _c in _same_as_a_rebuild(eng)]
    eng.turn(S, "And the cello?")
    assert question in [seq for seq, _t, _c in _same_as_a_rebuild(eng)]


def test_a_search_right_after_a_turn_that_failed_before_its_answer_finds_its_question(eng: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's search (webui Service.search) and an MCP search ask the index as it is, with no catch-up: the
    question of a failed turn must be in it once the turn has failed, as it was when it was indexed before the model."""

    def broken(*_a: Any, **_k: Any) -> Any:
        raise RuntimeError("the model client broke")

    monkeypatch.setattr(eng.llm, "complete", broken)
    with pytest.raises(TurnError):
        eng.turn(S, "Which cello did I buy in Vienna?")
    question = eng.ledger.head(S)[0] - 2  # the question, then the turn's failure note
    assert question in [h.seq for h in eng.index.search(S, "cello Vienna", 8).results]
    _same_as_a_rebuild(eng)
