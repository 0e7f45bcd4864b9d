"""Query rules (issue 16): dates the question names, speakers it names."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.messages import Message
from retrieval import IndexConfig
from retrieval.dates import DateSpan, best_match, event_date, query_dates
from storage.files.ledger.store import Ledger
from storage.files.retrieval.db import Index


class TestQueryDates:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("What did Maria share on 16 June, 2023?", [DateSpan(2023, 6, 16)]),
            ("what happened on June 16th, 2023", [DateSpan(2023, 6, 16)]),
            ("Which spot did Joanna visit in May?", [DateSpan(None, 5)]),
            ("in the second week of November", [DateSpan(None, 11)]),
            ("What did she do in March 2021 and in 2022?", [DateSpan(2021, 3), DateSpan(2022)]),
            ("I may go there", []),
            ("a dec of cards, mar the day", []),
            ("nothing dated here", []),
        ],
    )
    def test_pairs(self, text: str, expected: list[DateSpan]) -> None:
        assert query_dates(text) == expected

    def test_the_most_specific_span_an_event_falls_in_is_chosen(self) -> None:
        spans = [DateSpan(2023), DateSpan(2023, 6, 16), DateSpan(None, 6)]
        assert best_match(spans, "2023-06-16T10:00:00.000000Z") == DateSpan(2023, 6, 16)
        assert best_match(spans, "2023-06-17T10:00:00.000000Z") == DateSpan(None, 6)
        assert best_match(spans, "2023-07-01T10:00:00.000000Z") == DateSpan(2023)
        assert best_match(spans, "2024-07-01T10:00:00.000000Z") is None

    def test_event_date_reads_the_ledger_timestamp(self) -> None:
        assert event_date("2023-06-16T10:00:00.000000Z") == (2023, 6, 16)
        assert event_date("garbage") is None


def dated_index(tmp: Path, **cfg: object) -> Index:
    ledger = Ledger(tmp)
    msgs = []
    for day in range(1, 21):
        msgs.append(Message("user", f"I went hiking with my friends, trip {chr(96 + day)}", {}, ts=f"2023-06-{day:02d}T10:00:00.000000Z"))
    ledger.append_many("s1", msgs)
    return Index(tmp, ledger, config=IndexConfig(**cfg))  # type: ignore[arg-type]


class TestDateRule:
    def test_an_event_on_the_named_day_ranks_first(self, tmp_path: Path) -> None:
        hits = dated_index(tmp_path).search("s1", "Where did I go hiking on 16 June, 2023?", k=3, explain=True).results
        assert hits[0].ts.startswith("2023-06-16")
        assert hits[0].explain is not None and any(r.startswith("date: ") for r in hits[0].explain["rules"])

    def test_without_the_rule_the_date_changes_nothing(self, tmp_path: Path) -> None:
        hits = dated_index(tmp_path, date_rule=False).search("s1", "Where did I go hiking on 16 June, 2023?", k=3).results
        assert not hits[0].ts.startswith("2023-06-16")


class TestSpeakerRule:
    @pytest.fixture()
    def index(self, tmp_path: Path) -> Index:
        ledger = Ledger(tmp_path)
        msgs = []
        for i in range(10):
            msgs.append(Message("user", f"Caroline: I painted a lake sunrise, picture {i} with colours", {"speaker": "Caroline"}))
            msgs.append(Message("assistant", f"Melanie: I painted a horse, picture {i} with colours", {"speaker": "Melanie"}))
        ledger.append_many("s1", msgs)
        return Index(tmp_path, ledger, config=IndexConfig(context_before=0, context_after=0))

    def test_the_named_speakers_turns_rank_first(self, index: Index) -> None:
        hits = index.search("s1", "What has Melanie painted?", k=5, explain=True).results
        assert all(h.meta["speaker"] == "Melanie" for h in hits)
        assert hits[0].explain is not None and any(r.startswith("speaker: ") for r in hits[0].explain["rules"])
