"""Dates a question names, and whether an event's time falls on them (pure).

"What did Maria share on 16 June, 2023?", "Which spot did Joanna visit in May?",
"What happened in 2022?": the words of such a question are rarely in the turn
that answers it, but the turn's time is. An event's time is its ledger `ts`
(an import can set it: a conversation imported with its original dates).
scoring.date_factor turns a match into a boost (docs/RETRIEVAL.md, "Dates").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MONTHS = {
    m: i
    for i, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for m in names
}
_MONTH = r"(january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
_DAY_MONTH_YEAR = re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.I)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.I)
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+(?:of\s+)?{_YEAR}\b", re.I)
_MONTH_ALONE = re.compile(rf"\b{_MONTH}\b", re.I)
_YEAR_ALONE = re.compile(rf"\b{_YEAR}\b")
# "may" is a month only after words that introduce a time ("in May", "early May"), not as a verb
_MAY_BEFORE = {"in", "of", "early", "late", "mid", "since", "until", "by", "during", "last", "this", "next"}
_TS = re.compile(r"(\d{4})-(\d{2})-(\d{2})T")


@dataclass(frozen=True, slots=True)
class DateSpan:
    """A day, a month (day None) or a year (month and day None); `year` None: that month in any year."""

    year: int | None
    month: int | None = None
    day: int | None = None

    @property
    def level(self) -> str:
        if self.day is not None:
            return "day"
        return "month" if self.month is not None else "year"

    def describe(self) -> str:
        parts = [str(self.day) if self.day else "", _MONTH_NAMES[self.month] if self.month else "", str(self.year or "")]
        return " ".join(p for p in parts if p)

    def holds(self, year: int, month: int, day: int) -> bool:
        return (
            (self.year is None or self.year == year)
            and (self.month is None or self.month == month)
            and (self.day is None or self.day == day)
        )


_MONTH_NAMES = {i: name.capitalize() for name, i in MONTHS.items() if len(name) > 4 or name in ("may", "june", "july")}


def _month(name: str) -> int:
    return MONTHS[name.lower().rstrip(".")]


def query_dates(text: str) -> list[DateSpan]:
    """The dates `text` names, most specific first, each once (a day's month and year are not repeated)."""
    spans: list[DateSpan] = []
    taken: list[tuple[int, int]] = []

    def free(m: re.Match[str]) -> bool:
        return all(m.end() <= a or m.start() >= b for a, b in taken)

    for m in _DAY_MONTH_YEAR.finditer(text):
        day, mon, year = int(m.group(1)), _month(m.group(2)), int(m.group(3))
        if 1 <= day <= 31:
            spans.append(DateSpan(year, mon, day))
            taken.append(m.span())
    for m in _MONTH_DAY_YEAR.finditer(text):
        mon, day, year = _month(m.group(1)), int(m.group(2)), int(m.group(3))
        if free(m) and 1 <= day <= 31:
            spans.append(DateSpan(year, mon, day))
            taken.append(m.span())
    for m in _MONTH_YEAR.finditer(text):
        if free(m):
            spans.append(DateSpan(int(m.group(2)), _month(m.group(1))))
            taken.append(m.span())
    for m in _MONTH_ALONE.finditer(text):
        if not free(m):
            continue
        if m.group(1).lower() == "may":
            before = text[: m.start()].split()
            if not before or before[-1].lower() not in _MAY_BEFORE:
                continue
        elif len(m.group(1)) <= 4 and m.group(1).lower() not in ("june", "july") and not m.group(0)[0].isupper():
            continue  # "mar", "dec" in lower case are more likely words than months
        spans.append(DateSpan(None, _month(m.group(1))))
        taken.append(m.span())
    for m in _YEAR_ALONE.finditer(text):
        if free(m):
            spans.append(DateSpan(int(m.group(1))))
            taken.append(m.span())
    return list(dict.fromkeys(spans))


def event_date(ts: str) -> tuple[int, int, int] | None:
    """(year, month, day) of a ledger timestamp (YYYY-MM-DDTHH:MM:SS.ffffffZ), or None."""
    m = _TS.match(ts)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def best_match(spans: list[DateSpan], ts: str) -> DateSpan | None:
    """The most specific of `spans` that the event's time falls in, or None."""
    when = event_date(ts)
    if when is None:
        return None
    order = {"day": 0, "month": 1, "year": 2}
    hits = [s for s in spans if s.holds(*when)]
    return min(hits, key=lambda s: order[s.level]) if hits else None
