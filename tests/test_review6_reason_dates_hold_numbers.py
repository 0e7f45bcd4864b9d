"""Reviewer finding (control.quoting rule 2): a memory's number of 3 digits or more is looked for *inside* the
reason's numbers, and a date's parts are read together across '-', '/' and '.'; so an ordinary reason that dates
itself ("since 2023", "on 2024-03-12", "on 3/4/2024", "as of 10.05.2024") is refused against an ordinary memory
whose number merely appears inside the date's digits (202 in 2023, 312 in 20240312, 342 in 342024, 100 in
10052024). The reason repeats no word or number of the memory."""

from __future__ import annotations

import pytest

from control.plan import quoted


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
