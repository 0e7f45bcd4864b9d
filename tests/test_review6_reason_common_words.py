"""Reviewer finding (control.quoting rule 1): any content word of 4 letters or more that the reason and the memory
share refuses the reason, however common the word. Ordinary reasons from a list of plausible ones are refused
against ordinary memories that merely use the same everyday word: on LoCoMo conversations 0-2
(/work/shared/data/locomo10.json, 1,451 turns) "I don't want this remembered" is refused against 80 turns, "my
friend asked me to remove it" 38, "that was about someone else" 35, "I changed my mind" 22, "not true anymore" 21,
"please forget it" 11, "no longer relevant" 1 (about 0.5% of 42 reasons x 1,451 turns, against the 0.03% the module
docstring measures for rule 4). The pairs below are written for this test in the same way.

By design (review 6, h-fc), not a defect: every one of these refusals is rule 1, the documented rule that predates
this session's hardening (a content term of 4 letters or more, stemmed, in both the reason and the memory: "mind",
"remember"/"remembered", "forget"/"forgetting", "longer", "someone", "friend"; docs/guides/forgetting.md, FORMAT.md
§17). The reason is kept for good (erasure record, certificate, control record), so it must not repeat a word of
what it erases, however ordinary; the user rewords it. So the test asserts the documented behaviour: each pair is
refused, and only by rule 1 — with rule 1 taken away (the reason's terms emptied), none of the newer rules (split
words, pieces of names, numbers, leetspeak, encodings) refuses an everyday word."""

from __future__ import annotations

import dataclasses

import pytest

from control import quoting
from control.plan import quoted


@pytest.mark.parametrize(
    ("reason", "memory", "word"),
    [
        ("I changed my mind", "Running really helps me clear my mind after work", "mind"),
        ("I don't want this remembered", "I'll always remember our camping trip by the lake", "remember"),
        ("please forget it", "I keep forgetting where I put my keys", "forget"),
        ("no longer relevant", "I've been running longer distances lately", "longer"),
        ("that was about someone else", "It's important to have someone to talk to", "someone"),
        ("my friend asked me to remove it", "My friend and I went hiking on Sunday", "friend"),
    ],
)
def test_a_reason_sharing_an_everyday_word_is_refused_by_the_documented_word_rule_only(reason: str, memory: str, word: str) -> None:
    assert quoted(reason, memory)
    read, held = quoting.reading(reason), quoting.holding(memory)
    assert word in read[0].terms & held.terms  # rule 1: the same content term (stemmed) in both
    without_rule_1 = tuple(dataclasses.replace(said, terms=frozenset()) for said in read)
    assert not quoting.quotes(without_rule_1, held)  # no newer rule refuses it
