"""How control.quoting reads an ordinary forget / revoke reason (issue 28, item 7): a dated reason, a privacy reason
and a reason whose words run together are not taken for a quote of an ordinary memory by the number, cross-word or
title-piece rules; an everyday word the reason shares with the memory is refused by the documented word rule (rule 1)
alone. The other side — a reason that repeats a memory however it is spelled is refused — is
tests/services/test_reason_obfuscation.py."""

from __future__ import annotations

import dataclasses

import pytest

from control import quoting
from control.plan import quoted

# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review6_reason_common_words.py):
# Reviewer finding (control.quoting rule 1): any content word of 4 letters or more that the reason and the memory
# share refuses the reason, however common the word. Ordinary reasons from a list of plausible ones are refused
# against ordinary memories that merely use the same everyday word: on LoCoMo conversations 0-2
# (/work/shared/data/locomo10.json, 1,451 turns) "I don't want this remembered" is refused against 80 turns, "my
# friend asked me to remove it" 38, "that was about someone else" 35, "I changed my mind" 22, "not true anymore" 21,
# "please forget it" 11, "no longer relevant" 1 (about 0.5% of 42 reasons x 1,451 turns, against the 0.03% the module
# docstring measures for rule 4). The pairs below are written for this test in the same way.
#
# By design (review 6, h-fc), not a defect: every one of these refusals is rule 1, the documented rule that predates
# this session's hardening (a content term of 4 letters or more, stemmed, in both the reason and the memory: "mind",
# "remember"/"remembered", "forget"/"forgetting", "longer", "someone", "friend"; docs/guides/forgetting.md, FORMAT.md
# §17). The reason is kept for good (erasure record, certificate, control record), so it must not repeat a word of
# what it erases, however ordinary; the user rewords it. So the test asserts the documented behaviour: each pair is
# refused, and only by rule 1 — with rule 1 taken away (the reason's terms emptied), none of the newer rules (split
# words, pieces of names, numbers, leetspeak, encodings) refuses an everyday word.
# --------------------------------------------------------------------------------------------------------------------


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
def test_a_reason_sharing_an_everyday_word_is_refused_by_the_documented_word_rule_only(
    reason: str, memory: str, word: str
) -> None:
    assert quoted(reason, memory)
    read, held = quoting.reading(reason), quoting.holding(memory)
    assert word in read[0].terms & held.terms  # rule 1: the same content term (stemmed) in both
    without_rule_1 = tuple(dataclasses.replace(said, terms=frozenset()) for said in read)
    assert not quoting.quotes(without_rule_1, held)  # no newer rule refuses it


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review6_reason_cross_word.py):
# Reviewer finding (control.quoting rule 3): an ordinary reason is refused against an ordinary memory because a
# common word of the memory appears across two of the reason's words ("12 March at 3pm" reads "...marchat..." which
# holds "chat"). The issue's own example reason is refused against a memory that merely says "chat".
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "memory"),
    [
        ("said on 12 March at 3pm by mistake", "Let's chat again tomorrow about the garden"),
        ("said on 12 March at 3pm by mistake", "Since our last chat, I've been looking into counseling"),
    ],
)
def test_an_ordinary_dated_reason_is_not_refused_for_a_word_made_across_its_words(reason: str, memory: str) -> None:
    assert not quoted(reason, memory)


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review6_reason_dates_hold_numbers.py):
# Reviewer finding (control.quoting rule 2): a memory's number of 3 digits or more is looked for *inside* the
# reason's numbers, and a date's parts are read together across '-', '/' and '.'; so an ordinary reason that dates
# itself ("since 2023", "on 2024-03-12", "on 3/4/2024", "as of 10.05.2024") is refused against an ordinary memory
# whose number merely appears inside the date's digits (202 in 2023, 312 in 20240312, 342 in 342024, 100 in
# 10052024). The reason repeats no word or number of the memory.
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "memory"),
    [
        ("no longer true since 2023", "my flat is number 202"),
        ("entered by mistake on 2024-03-12", "my hotel room was 312"),
        ("said it on 3/4/2024 by mistake", "I paid 342 dollars for the bike"),
        ("outdated as of 10.05.2024", "my badge number is 100"),
        ("typo from 2025-01-15", "I ran 501 km last year"),
    ],
)
def test_a_dated_reason_is_not_read_as_quoting_a_number_inside_the_date(reason: str, memory: str) -> None:
    assert not quoted(reason, memory)


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review6_reason_title_piece.py):
# Reviewer finding (control.quoting rule 4): ordinary privacy reasons ("confidential", "too personal", "wrong
# person", "personal data") are refused against ordinary LoCoMo memories because a capitalised title word or name
# ("'Embracing Identity'", "the Perseid meteor shower") shares a 4-letter piece ("iden", "pers") with a common English
# word. The memory holds no part of what the reason says.
# --------------------------------------------------------------------------------------------------------------------


IDENTITY = "Here's one- 'Embracing Identity' is all about finding comfort and love in being yourself."


PERSEID = "I'll always remember our camping trip last year when we saw the Perseid meteor shower."


@pytest.mark.parametrize(
    ("reason", "memory"),
    [
        ("confidential", IDENTITY),
        ("entered by accident", IDENTITY),
        ("too personal", PERSEID),
        ("personal data", PERSEID),
        ("wrong person", PERSEID),
    ],
)
def test_an_ordinary_privacy_reason_is_not_refused_for_a_piece_of_a_title_word(reason: str, memory: str) -> None:
    assert not quoted(reason, memory)
