"""Reviewer finding (control.quoting, rule 6 / the normal form): the negative circled (U+1F150-1F169) and negative
squared (U+1F170-1F189) Latin capitals and the regional indicator symbols (U+1F1E6-1F1FF) read as the letters they
enclose wherever the reason is shown, but NFKC has no decomposition for them and control.confusables does not fold
them (the plain circled and squared letters, which NFKC maps, are refused): a reason spelling the memory's word in
them passes the check and is kept for good."""

from __future__ import annotations

import pytest

from control.plan import quoted

MEMORY = "I live in Lisbon with my cat Zanzibar"


def _spelled(word: str, first: int) -> str:
    return "".join(chr(first + ord(c) - ord("a")) for c in word.lower())


@pytest.mark.parametrize(
    "reason",
    [
        _spelled("lisbon", 0x1F150),  # 🅛🅘🅢🅑🅞🅝
        _spelled("lisbon", 0x1F170),  # 🅻🅸🆂🅱🅾🅽
        f"moved from {_spelled('zanzibar', 0x1F170)}",
        _spelled("zanzibar", 0x1F1E6),  # regional indicators (shown as letters where a pair is no flag)
    ],
)
def test_a_reason_in_enclosed_letters_is_refused(reason: str) -> None:
    assert quoted(reason, MEMORY)
