"""Reviewer finding (control.quoting rule 3): an ordinary reason is refused against an ordinary memory because a
common word of the memory appears across two of the reason's words ("12 March at 3pm" reads "...marchat..." which
holds "chat"). The issue's own example reason is refused against a memory that merely says "chat"."""

from __future__ import annotations

import pytest

from control.plan import quoted


@pytest.mark.parametrize(
    ("reason", "memory"),
    [
        ("said on 12 March at 3pm by mistake", "Let's chat again tomorrow about the garden"),
        ("said on 12 March at 3pm by mistake", "Since our last chat, I've been looking into counseling"),
    ],
)
def test_an_ordinary_dated_reason_is_not_refused_for_a_word_made_across_its_words(reason: str, memory: str) -> None:
    assert not quoted(reason, memory)
