"""Reviewer findings (issue 28 item 7, the reason check): a forget/revoke reason that repeats a memory's word,
obfuscated in ways control.quoting does not normalise, still passes — and an ordinary reason with a date and a time
is refused because the reason's digits are all read together."""

from __future__ import annotations

import pytest

from control.plan import quoted

MEMORY = "I live in Lisbon with my cat Zanzibar"


def test_a_reason_that_displays_the_word_through_a_bidi_override_is_refused() -> None:
    # U+202E RIGHT-TO-LEFT OVERRIDE is dropped as a format character, which leaves the reversed word; the kept reason
    # still renders as "Lisbon" wherever it is shown (certificate, History, erasure record).
    assert quoted("moved from \u202enobsiL\u202c", MEMORY)


@pytest.mark.parametrize("filler", ["\u3164", "\u115f", "\u1160", "\uffa0"])
def test_a_reason_with_an_invisible_hangul_filler_inside_the_word_is_refused(filler: str) -> None:
    assert quoted(f"the Lis{filler}bon one", MEMORY)


@pytest.mark.parametrize(
    "reason",
    [
        "L1sb0n was wrong",  # leetspeak: digits for letters
        "%4C%69%73%62%6F%6E",  # percent-encoding of Lisbon
        "&#76;&#105;&#115;&#98;&#111;&#110;",  # HTML character references
    ],
)
def test_a_reason_spelling_the_word_in_a_common_obfuscation_is_refused(reason: str) -> None:
    assert quoted(reason, MEMORY)


@pytest.mark.parametrize("reason", ["said on 12 March at 3pm by mistake", "typed at 11:23 on the bus", "moved on 1 Feb, 23 days ago"])
def test_an_ordinary_reason_with_a_date_is_not_read_as_quoting_a_code(reason: str) -> None:
    # the memory's number is 123; the reason holds 12 and 3, or 11 and 23 — two numbers, neither the code
    assert not quoted(reason, "my door code is 123")
