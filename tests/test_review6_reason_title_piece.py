"""Reviewer finding (control.quoting rule 4): ordinary privacy reasons ("confidential", "too personal", "wrong
person", "personal data") are refused against ordinary LoCoMo memories because a capitalised title word or name
("'Embracing Identity'", "the Perseid meteor shower") shares a 4-letter piece ("iden", "pers") with a common English
word. The memory holds no part of what the reason says."""

from __future__ import annotations

import pytest

from control.plan import quoted

IDENTITY = "Here's one- 'Embracing Identity' is all about finding comfort and love in being yourself."
PERSEID = "I'll always remember our camping trip last year when we saw the Perseid meteor shower."


@pytest.mark.parametrize(
    ("reason", "memory"),
    [("confidential", IDENTITY), ("entered by accident", IDENTITY), ("too personal", PERSEID), ("personal data", PERSEID), ("wrong person", PERSEID)],
)
def test_an_ordinary_privacy_reason_is_not_refused_for_a_piece_of_a_title_word(reason: str, memory: str) -> None:
    assert not quoted(reason, memory)
