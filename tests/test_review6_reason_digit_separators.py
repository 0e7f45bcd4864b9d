"""Reviewer finding (control.quoting rule 2): a memory's code repeated digit by digit is refused with spaces, dots,
dashes, slashes or commas between the digits, but accepted with ';', '_', '|', '·', 'x', ' and ', or spelled out in
words: the kept reason then carries the code for good."""

from __future__ import annotations

import pytest

from control.plan import quoted

MEMORY = "my door code is 4711"


@pytest.mark.parametrize("reason", ["4;7;1;1", "4_7_1_1", "4|7|1|1", "4·7·1·1", "it was four seven one one", "four-seven-one-one"])
def test_a_code_repeated_with_other_separators_or_in_words_is_refused(reason: str) -> None:
    assert quoted(reason, MEMORY)
