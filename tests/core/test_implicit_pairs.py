"""bench/implicit_pairs.py: our own implicit-recall dev pairs share no content term and stitch into dev only."""

from __future__ import annotations

import pytest

from bench.common import Turn
from bench.implicit_pairs import PAIRS, PER_CONVERSATION, check, shared_terms, stitched


def _turns(n: int) -> list[Turn]:
    return [
        Turn(f"D1:{i}", "user" if i % 2 == 0 else "assistant", f"{'Ann' if i % 2 == 0 else 'Bob'}: turn {i}",
             {"dia_id": f"D1:{i}", "speaker": "Ann" if i % 2 == 0 else "Bob", "session": 1, "session_date": ""})
        for i in range(n)
    ]


def test_there_are_at_least_60_pairs_and_none_shares_a_content_term() -> None:
    assert len(PAIRS) >= 60 and len(PAIRS) == 5 * PER_CONVERSATION
    assert check() == []


def test_the_check_would_see_a_shared_stem() -> None:
    assert shared_terms("We adopted a dog", "The dogs bark") == {"dog"}


def test_each_earlier_message_is_stitched_once_before_its_question_is_asked() -> None:
    ts, qs = stitched(_turns(40), 2)
    assert len(ts) == 40 + PER_CONVERSATION and len(qs) == PER_CONVERSATION
    ids = [t.dia_id for t in ts]
    for j, q in enumerate(qs):
        assert q.gold == (f"P2:{j}",) and q.question == PAIRS[2 * PER_CONVERSATION + j][1]
        turn = ts[ids.index(f"P2:{j}")]
        assert turn.text.endswith(PAIRS[2 * PER_CONVERSATION + j][0]) and turn.meta["speaker"] in {"Ann", "Bob"}


def test_test_conversations_get_no_pairs() -> None:
    with pytest.raises(ValueError, match="dev conversations 0-4"):
        stitched(_turns(40), 5)
