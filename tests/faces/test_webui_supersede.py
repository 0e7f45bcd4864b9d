"""Facts that change in the app (issue 12), handler by handler and render function by render function (no server):
"Correct this" from each of the three places appends the new statement and a supersession record decided by the
visitor; a refusal is a status line beside the control and a toast (never gr.Error, whose "Error" overlay covered
the status line and the new-statement box: issue 28 §6), keeps the text typed and appends nothing; Manual search leaves a superseded memory out unless "include
superseded (history)" is ticked, and then strikes it through naming the seq that replaced it, as the ledger view
does; History lists every statement of the fact, oldest first. MCP's tools are in test_webui_supersede_mcp.py."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import gradio as gr
import pytest

from chat.engine import Engine
from chat.llm import LLM
from control.supersession import HistoryEntry, SupersedeResult
from ledger import Event
from ledger.supersessions import VISITOR, supersession_of
from webui import render as r
from webui import render_supersede as rs
from webui.handlers import UI
from webui.service import Service
from webui.sessions import new_session_key, session_id

OLD = "I live in Leeds"
NEW = "I live in Bristol"
OTHER = "My cat Miso sleeps on the radiator"


@pytest.fixture
def ui(tmp_path: Path) -> UI:
    return UI(Service(Engine(tmp_path / "data", llm=LLM(api_key=""))))


def session(ui: UI) -> str:
    key = new_session_key()
    ui.service.remember(key, OLD)  # seq 0
    ui.service.remember(key, OTHER)  # seq 1
    return key


def events(ui: UI, key: str) -> list[Event]:
    return list(ui.service.engine.ledger.events(session_id(key)))


def snapshot(ui: UI) -> dict[str, str]:
    data = ui.service.data_dir
    return {
        str(p.relative_to(data)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(data.rglob("*")) if p.is_file()
    }


def text_cells(value: dict[str, Any], headers: list[str]) -> list[str]:
    return [row[headers.index("text")] for row in value["data"]]


def entry(seq: int, text: str | None, superseded_by: int | None = None, revoked: bool = False, **kw: Any) -> HistoryEntry:
    return HistoryEntry(
        seq, f"evt_{seq:032x}", "user", f"2026-12-03T12:00:0{seq}.000000Z", text, text is None, revoked, superseded_by,
        None if superseded_by is None else f"evt_{superseded_by:032x}", **kw,
    )


# -- pure render ------------------------------------------------------------------------------------------------
class TestRender:
    def test_a_superseded_ledger_row_names_the_seq_that_replaced_it(self, ui: UI) -> None:
        key = session(ui)
        rows = r.ledger_rows(events(ui, key), superseded={0: 7})
        assert rows[0][3] == "superseded by seq 7 · " + OLD
        assert rows[1][3] == OTHER  # a live memory is not labelled

    def test_revoked_and_superseded_labels_both_show(self) -> None:
        assert r.labels(3, {3: 5}, {3: 4}) == r.revoked_label(5) + r.superseded_label(4)
        assert r.labels(3, {}, {}) == ""

    def test_only_the_text_cell_of_a_superseded_row_is_struck_through(self) -> None:
        styling = r.struck_styling([0, 1, 2], {1: 2}, 6, 3)
        assert styling[1] == ["", "", "", r.STRUCK, "", ""]
        assert all(cell == "" for row in (styling[0], styling[2]) for cell in row)

    def test_the_correct_status_says_old_seq_superseded_by_new_seq_with_the_new_text(self) -> None:
        result = SupersedeResult("s", 9, "evt_9", 4, "evt_4", 10, "evt_10", VISITOR, None, None, corrected=True)
        line = rs.result_markdown(result, "I live in Bristol")
        assert "seq 4 superseded by seq 9: “I live in Bristol”" in line and "record at seq 10" in line
        assert "\n" not in line

    def test_the_correct_status_escapes_the_visitors_text(self) -> None:
        result = SupersedeResult("s", 1, "e1", 0, "e0", 2, "e2", VISITOR, None, "[x](http://e)", corrected=True)
        line = rs.result_markdown(result, "<b>**now**</b>")
        assert "<b>" not in line and "**now**" not in line and "](" not in line

    def test_the_history_lists_statements_oldest_first_the_superseded_one_struck_through(self) -> None:
        entries = [
            entry(0, OLD, 2, decided_by=VISITOR, record_seq=3, shown_reason="moved", live_seq=2),
            entry(2, NEW, supersedes=(0,), live_seq=2),
        ]
        table = rs.history_markdown(entries)
        lines = table.splitlines()
        assert "2 statements, oldest first" in lines[0] and "Holds now: seq 2" in lines[0]
        assert lines[2] == "| " + " | ".join(rs.HISTORY_HEADERS) + " |"
        old, new = lines[4], lines[5]
        assert old.startswith("| 0 | ~~I live in Leeds~~ | superseded by seq 2 |")
        assert "visitor (record seq 3)" in old and "moved" in old and "2026\\-12\\-03 12:00:00" in old
        assert new.startswith("| 2 | I live in Bristol | live (holds now) |")

    def test_a_forgotten_statement_reads_forgotten_and_a_revoked_one_says_so(self) -> None:
        entries = [entry(0, None, 1, decided_by=VISITOR, record_seq=2, live_seq=1), entry(1, NEW, revoked=True, live_seq=1)]
        table = rs.history_markdown(entries)
        assert "\\[forgotten\\]" in table and "· forgotten" in table and "· revoked" in table

    def test_a_statement_never_superseded_has_a_one_row_history(self) -> None:
        table = rs.history_markdown([entry(5, OTHER, live_seq=5)])
        assert "one statement, never superseded" in table and table.count("\n| 5 |") == 1

    def test_history_text_cannot_break_the_table(self) -> None:
        row = rs.history_row(entry(0, "a | b ~~c~~ [l](http://e)", live_seq=0))
        assert row.count(" | ") == len(rs.HISTORY_HEADERS) - 1 and "](" not in row and "~~c" not in row


# -- handlers -----------------------------------------------------------------------------------------------------
def refused(out: tuple[Any, ...]) -> str:
    """A refused Correct this: the status line says why, the new-statement box is left as typed (skipped) and the
    changed State reads False (the ledger and the search are not refreshed)."""
    assert len(out) == 3 and out[1] == gr.skip() and out[2] is False, out
    assert out[0].startswith("⚠️ **Not corrected:**"), out[0]
    return str(out[0])


def seq_from(entry_point: str) -> Any:
    return 0 if entry_point == "turn" else "0"  # the dropdown's int, or a selected row's / typed seq


class TestCorrect:
    @pytest.mark.parametrize("entry_point", ["turn", "search", "ledger"])
    def test_correct_appends_the_new_statement_and_a_record_decided_by_the_visitor(
        self, ui: UI, entry_point: str
    ) -> None:
        key = session(ui)
        status, box, changed = ui.correct(key, seq_from(entry_point), f"  {NEW} ", "")
        evs = events(ui, key)
        new, record = evs[2], evs[3]
        assert (new.role, new.text) == ("user", NEW)
        found = supersession_of(record.role, record.text, record.meta, record.seq)
        assert found is not None
        assert (found.old_seq, found.new_seq, found.decided_by) == (0, 2, VISITOR)
        assert f"seq 0 superseded by seq 2: “{NEW}”" in status and box == "" and changed is True

    def test_the_reason_is_kept_on_the_record(self, ui: UI) -> None:
        key = session(ui)
        ui.correct(key, "0", NEW, "moved house")
        record = events(ui, key)[-1]
        found = supersession_of(record.role, record.text, record.meta, record.seq)
        assert found is not None and found.reason == "moved house"

    @pytest.mark.parametrize(
        ("seq", "text", "reason"),
        [
            ("0", "", None),  # nothing typed
            ("0", "   ", None),
            ("", NEW, None),  # no memory chosen
            ("99", NEW, None),  # no such seq
            ("zero", NEW, None),
            ("0", NEW, "Leeds"),  # a reason that repeats the memory's words is kept for good: refused
            ("0", "x" * 9000, None),  # over the message limit
        ],
    )
    def test_a_refusal_is_said_beside_the_control_keeps_the_text_typed_and_appends_nothing(
        self, ui: UI, seq: str, text: str, reason: str | None
    ) -> None:
        key = session(ui)
        before = snapshot(ui)
        with pytest.warns(UserWarning):  # the toast (gr.Warning, outside a request)
            out = ui.correct(key, seq, text, reason)
        status = refused(out)
        assert "Leeds" not in status  # a refused reason is not repeated back
        assert snapshot(ui) == before

    def test_a_control_record_cannot_be_corrected(self, ui: UI) -> None:
        key = session(ui)
        ui.correct(key, "0", NEW)  # seq 2 the statement, seq 3 the record
        before = snapshot(ui)
        with pytest.warns(UserWarning, match="control record"):  # the toast
            assert "control record" in refused(ui.correct(key, "3", "anything"))
        assert snapshot(ui) == before

    def test_an_invalid_session_key_is_refused_and_nothing_is_written(self, ui: UI) -> None:
        session(ui)
        before = snapshot(ui)
        with pytest.warns(UserWarning, match="session key"):
            assert "session key" in refused(ui.correct("not a key", "0", NEW))
        assert snapshot(ui) == before

    def test_a_correction_from_the_turn_tools_after_an_answer(self, ui: UI) -> None:
        key = session(ui)
        list(ui.chat("Where do I live?", [], 8, key))
        _rid, pick, _w, _d = ui.turn_tools(key)
        seqs = [v for _label, v in pick.choices]
        assert 0 in seqs
        status, _box, _changed = ui.correct(key, 0, NEW)
        assert "seq 0 superseded by seq" in status


class TestVisible:
    def test_search_leaves_a_superseded_memory_out_unless_history_is_asked(self, ui: UI) -> None:
        key = session(ui)
        ui.correct(key, "0", NEW)
        _status, value, _explain = ui.search("live", 8, key)
        texts = text_cells(value, r.SEARCH_HEADERS)
        assert NEW in texts and not any(OLD in t for t in texts)
        _status, value, _explain = ui.search("live", 8, key, False, False, True)
        texts = text_cells(value, r.SEARCH_HEADERS)
        assert "superseded by seq 2 · " + OLD in texts and NEW in texts
        row = texts.index("superseded by seq 2 · " + OLD)
        styling = value["metadata"]["styling"]
        assert styling[row][r.SEARCH_HEADERS.index("text")] == r.STRUCK
        assert all(cell == "" for i, cells in enumerate(styling) if i != row for cell in cells)

    def test_the_explanation_labels_a_superseded_hit_too(self, ui: UI) -> None:
        key = session(ui)
        ui.correct(key, "0", NEW)
        _status, _value, explain = ui.search("live", 8, key, False, True, True)
        assert "superseded by seq 2" in explain

    def test_the_ledger_view_strikes_the_old_statement_through_naming_the_new_one(self, ui: UI) -> None:
        key = session(ui)
        ui.correct(key, "0", NEW)
        _status, value, _cp = ui.ledger(key)
        texts = text_cells(value, r.LEDGER_HEADERS)
        assert texts[0] == "superseded by seq 2 · " + OLD and texts[2] == NEW
        col = r.LEDGER_HEADERS.index("text")
        assert [row[col] for row in value["metadata"]["styling"]] == [r.STRUCK, "", "", ""]

    @pytest.mark.parametrize("seq", ["0", "2", 0])
    def test_history_lists_both_statements_oldest_first_from_either(self, ui: UI, seq: Any) -> None:
        key = session(ui)
        ui.correct(key, "0", NEW)
        table = ui.memory_history(key, seq)
        assert table.index("~~I live in Leeds~~") < table.index("| I live in Bristol |")
        assert "superseded by seq 2" in table and "visitor (record seq 3)" in table

    def test_history_of_a_record_is_refused(self, ui: UI) -> None:
        key = session(ui)
        ui.correct(key, "0", NEW)
        with pytest.warns(UserWarning, match="record"):  # the toast
            status = ui.memory_history(key, "3")
        assert status.startswith("⚠️ **No history:**") and "record" in status
