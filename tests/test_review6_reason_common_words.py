"""Reviewer finding (control.quoting rule 1): any content word of 4 letters or more that the reason and the memory
share refuses the reason, however common the word. Ordinary reasons from a list of plausible ones are refused
against ordinary memories that merely use the same everyday word: on LoCoMo conversations 0-2
(/work/shared/data/locomo10.json, 1,451 turns) "I don't want this remembered" is refused against 80 turns, "my
friend asked me to remove it" 38, "that was about someone else" 35, "I changed my mind" 22, "not true anymore" 21,
"please forget it" 11, "no longer relevant" 1 (about 0.5% of 42 reasons x 1,451 turns, against the 0.03% the module
docstring measures for rule 4). The pairs below are written for this test in the same way."""

from __future__ import annotations

import pytest

from control.plan import quoted


@pytest.mark.xfail(strict=True, reason="reviewer finding: ordinary reasons are refused for sharing an everyday word with the memory")
@pytest.mark.parametrize(
    ("reason", "memory"),
    [
        ("I changed my mind", "Running really helps me clear my mind after work"),
        ("I don't want this remembered", "I'll always remember our camping trip by the lake"),
        ("please forget it", "I keep forgetting where I put my keys"),
        ("no longer relevant", "I've been running longer distances lately"),
        ("that was about someone else", "It's important to have someone to talk to"),
        ("my friend asked me to remove it", "My friend and I went hiking on Sunday"),
    ],
)
def test_an_ordinary_reason_is_not_refused_for_an_everyday_word(reason: str, memory: str) -> None:
    assert not quoted(reason, memory)
