"""Reviewer finding (issue 28 item 7, "fold confusables"): control.confusables folds a subset of Cyrillic and Greek
look-alikes only. Letters that Unicode's confusables.txt (UTS #39) also gives a Latin prototype — Armenian օ (U+0585,
'o'), Latin alpha ɑ (U+0251, 'a'), Latin small capital ᴄ (U+1D04, 'c'), Cyrillic г (U+0433, 'r'), the estimated
sign ℮ (U+212E, 'e') — leave a reason that reads as the memory's word passing the check, for a common word (no
4-character pieces) and for a short name alike."""

from __future__ import annotations

import pytest

from control.plan import quoted

MEMORY = "my safe word is chocolate and my dog is Oreo"


def test_the_plain_words_are_refused() -> None:
    assert quoted("chocolate", MEMORY) and quoted("Oreo", MEMORY)


@pytest.mark.parametrize(
    "reason",
    ["ch\u0585c\u0585late", "chocol\u0251te", "\u1d04hocolate", "chocolat\u212e", "Ore\u0585", "O\u0433eo"],
    ids=["armenian-o", "latin-alpha", "small-capital-c", "estimated-sign", "armenian-o-name", "cyrillic-ge-name"],
)
def test_a_reason_spelling_the_word_with_a_lookalike_is_refused(reason: str) -> None:
    assert quoted(reason, MEMORY)
