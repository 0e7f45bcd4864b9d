"""A cited memory superseded at the turn reads so where the app shows what the model was handed (issue 12): the
stamps' memory cell starts "superseded by seq N · " (the words of the ledger view and Manual search), and the Verify
tab's panel says "(superseded at that turn by seq N)". Both read the receipt's signed `states` (FORMAT.md §20), so
stamps rebuilt from a stored receipt after a reload show it too. Render functions first (no server), then the
handlers end to end."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from chat.engine import Engine
from chat.llm import LLM
from receipts.body import parse_receipt
from receipts.show import summarize
from webui import render as r
from webui import render_receipt as rr
from webui.handlers import UI
from webui.service import Service
from webui.sessions import new_session_key

VECTOR = Path(__file__).parents[1] / "vectors" / "receipt_v2_states.json"  # memory#1 (seq 0) superseded by seq 2


def vector_body() -> dict[str, Any]:
    return copy.deepcopy(dict(parse_receipt(VECTOR.read_bytes()).body))


def memory_rows(stamps: str) -> dict[int, str]:
    """seq -> the stamps' table row."""
    return {int(line.split("|")[2]): line for line in stamps.splitlines() if line.startswith("| ") and "`" in line}


class TestStamps:
    def test_a_superseded_memory_cell_starts_with_the_seq_that_replaced_it(self) -> None:
        rows = memory_rows(r.stamps_markdown(r.stamps_from_body(vector_body())))
        assert "| superseded by seq 2 · I live in Leeds |" in rows[0]

    def test_a_live_memory_is_not_labelled(self) -> None:
        rows = memory_rows(r.stamps_markdown(r.stamps_from_body(vector_body())))
        assert "superseded" not in rows[2]

    def test_the_label_is_the_ledger_views_and_manual_searchs(self) -> None:
        s = r.stamps_from_body(vector_body())
        first = s.memories[0]
        assert (first.superseded, first.superseded_by) == (True, 2)
        assert r.stamp_state_label(first) == r.superseded_label(2)

    def test_the_state_comes_before_how_the_memory_matched(self) -> None:
        s = r.stamps_from_body(vector_body())
        matched = replace(s, memories=(replace(s.memories[0], match="context only"),))
        cell = "| superseded by seq 2 · \\[matched via neighbouring turns\\] I live in Leeds |"
        assert cell in r.stamps_markdown(matched)

    def test_no_new_column_is_added(self) -> None:
        text = r.stamps_markdown(r.stamps_from_body(vector_body()))
        assert "| # | seq | role | memory | digest |" in text
        assert all(line.count("|") == 6 for line in memory_rows(text).values())

    def test_a_receipt_without_states_makes_no_claim(self) -> None:
        body = vector_body()
        del body["states"]
        s = r.stamps_from_body(body)
        assert not any(m.superseded for m in s.memories)
        assert "superseded" not in r.stamps_markdown(s)

    def test_a_record_that_names_no_new_seq_still_reads_superseded(self) -> None:
        body = vector_body()
        del body["states"]["superseded"][0]["by"]["event"]["meta"]["supersession"]["new"]
        s = r.stamps_from_body(body)
        assert (s.memories[0].superseded, s.memories[0].superseded_by) == (True, None)
        assert "| superseded · I live in Leeds |" in r.stamps_markdown(s)

    def test_a_restored_history_shows_the_state_in_its_stamps(self) -> None:
        answer = SimpleNamespace(role="assistant", text="Leeds", erased=False)  # all history_messages reads of it
        messages = r.history_messages([(answer, vector_body())])  # type: ignore[list-item]
        assert "superseded by seq 2 · I live in Leeds" in messages[-1]["content"]


class TestPanel:
    def test_the_panel_says_a_memory_was_superseded_at_that_turn_by_seq_n(self) -> None:
        panel = rr.panel_markdown(summarize(vector_body()))
        [first] = [line for line in panel.splitlines() if line.startswith("1. memory")]
        assert first.endswith("“I live in Leeds” (superseded at that turn by seq 2)")

    def test_a_live_memory_line_says_nothing_of_supersession(self) -> None:
        panel = rr.panel_markdown(summarize(vector_body()))
        [second] = [line for line in panel.splitlines() if line.startswith("2. memory")]
        assert "superseded" not in second

    def test_a_receipt_without_states_gives_no_superseded_line(self) -> None:
        body = vector_body()
        del body["states"]
        assert "superseded at that turn" not in rr.panel_markdown(summarize(body))

    def test_a_hostile_new_seq_is_escaped(self) -> None:
        summary = summarize(vector_body())
        summary["states"]["superseded"][0]["by_seq"] = "<b>[x](http://e)</b>"
        panel = rr.panel_markdown(summary)
        assert "<b>" not in panel and "](" not in panel and "superseded at that turn by seq" in panel


# -- the handlers ---------------------------------------------------------------------------------------------
@pytest.fixture
def ui(tmp_path: Path) -> UI:
    return UI(Service(Engine(tmp_path / "data", llm=LLM(api_key=""))))


class TestHandlers:
    def test_asking_about_the_past_shows_the_old_statement_marked_superseded(self, ui: UI) -> None:
        key = new_session_key()
        ui.service.remember(key, "I live in Leeds")  # seq 0
        ui.service.remember(key, "We've just moved to Bristol")  # seq 1: the detector supersedes seq 0
        *_, (history, _box, stamps, _download) = list(ui.chat("Where did I live before?", [], 5, key))
        rows = memory_rows(stamps)
        assert "| superseded by seq 1 · I live in Leeds |" in rows[0]
        assert "superseded" not in rows[1]
        assert history[-1]["content"] == stamps  # the stamps under the answer say the same
        restored = ui._session(key)[4]  # after a reload: rebuilt from the stored, signed receipt
        assert "| superseded by seq 1 · I live in Leeds |" in memory_rows(restored)[0]

    def test_the_verify_panel_of_that_turns_receipt_says_superseded_at_that_turn(self, ui: UI) -> None:
        key = new_session_key()
        ui.service.remember(key, "I live in Leeds")
        ui.service.remember(key, "We've just moved to Bristol")
        *_, (_history, _box, _stamps, download) = list(ui.chat("Where did I live before?", [], 5, key))
        verdict, _report = ui.verify(download.value["path"], key)  # the file the visitor downloads, uploaded back
        [first] = [line for line in verdict.splitlines() if line.startswith("1. memory")]
        assert first.endswith("“I live in Leeds” (superseded at that turn by seq 1)")
