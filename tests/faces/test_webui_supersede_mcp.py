"""MCP's facts that change (issue 12), called directly (no server): search_memories results carry superseded_by and
take include_superseded; memory_history returns every statement of a fact, oldest first; correct_memory appends the
new statement and a supersession record decided by the visitor; refusals are plain text and append nothing."""

from __future__ import annotations

import json
from pathlib import Path

import gradio as gr
import pytest

from chat.engine import Engine
from chat.llm import LLM
from ledger.supersessions import VISITOR, supersession_of
from webui.mcp_tools import make_tools
from webui.service import Service
from webui.sessions import session_id

OLD = "I live in Leeds"
NEW = "I live in Bristol"


@pytest.fixture
def service(tmp_path: Path) -> Service:
    return Service(Engine(tmp_path / "data", llm=LLM(api_key="")))


@pytest.fixture
def tools(service: Service) -> dict:
    return {fn.__name__: fn for fn in make_tools(service)}


def count(service: Service, key: str) -> int:
    return service.engine.ledger.head(session_id(key))[0]


def corrected(tools: dict) -> tuple[str, dict, dict]:
    """A session holding OLD, corrected to NEW: (key, OLD's remember output, correct_memory's output)."""
    key = json.loads(tools["new_session_key"]())["session_key"]
    old = json.loads(tools["remember"](key, OLD))
    out = json.loads(tools["correct_memory"](key, old["event_id"], NEW, ""))
    return key, old, out


def test_the_facts_that_change_tools_are_listed(tools: dict) -> None:
    assert {"memory_history", "correct_memory"} <= set(tools)


class TestCorrectMemory:
    def test_the_new_statement_and_a_visitor_record_are_appended(self, tools: dict, service: Service) -> None:
        key, old, out = corrected(tools)
        assert (out["old_seq"], out["old_id"], out["new_seq"], out["record_seq"]) == (0, old["event_id"], 1, 2)
        assert out["decided_by"] == VISITOR and out["reason"] is None
        evs = list(service.engine.ledger.events(session_id(key)))
        assert (evs[1].role, evs[1].text, evs[1].id) == ("user", NEW, out["new_id"])
        record = supersession_of(evs[2].role, evs[2].text, evs[2].meta, evs[2].seq)
        assert record is not None and (record.old_id, record.new_id, record.decided_by) == (old["event_id"], out["new_id"], VISITOR)

    def test_a_seq_is_accepted_as_well_as_an_id(self, tools: dict) -> None:
        key = json.loads(tools["new_session_key"]())["session_key"]
        tools["remember"](key, OLD)
        assert json.loads(tools["correct_memory"](key, "0", NEW))["old_seq"] == 0

    @pytest.mark.parametrize(
        ("target", "text", "reason"),
        [("evt_" + "0" * 32, NEW, ""), ("0", "", ""), ("0", NEW, "Leeds was grey")],
    )
    def test_a_refusal_is_plain_text_and_appends_nothing(
        self, tools: dict, service: Service, target: str, text: str, reason: str
    ) -> None:
        key = json.loads(tools["new_session_key"]())["session_key"]
        tools["remember"](key, OLD)
        with pytest.raises(gr.Error) as info:
            tools["correct_memory"](key, target, text, reason)
        assert "&#" not in str(info.value.message) and "&quot;" not in str(info.value.message)
        assert count(service, key) == 1

    def test_another_sessions_key_cannot_correct_this_sessions_memory(self, tools: dict, service: Service) -> None:
        key = json.loads(tools["new_session_key"]())["session_key"]
        old = json.loads(tools["remember"](key, OLD))
        other = json.loads(tools["new_session_key"]())["session_key"]
        tools["remember"](other, "hello")
        with pytest.raises(gr.Error):
            tools["correct_memory"](other, old["event_id"], NEW)
        assert count(service, key) == 1 and count(service, other) == 1


class TestSearchAndHistory:
    def test_search_leaves_the_superseded_memory_out_by_default(self, tools: dict) -> None:
        key, _old, out = corrected(tools)
        results = json.loads(tools["search_memories"](key, "live", 8))["results"]
        assert [(h["text"], h["superseded_by"]) for h in results] == [(NEW, None)]
        assert results[0]["event_id"] == out["new_id"]

    def test_include_superseded_returns_it_naming_the_event_that_replaced_it(self, tools: dict) -> None:
        key, old, out = corrected(tools)
        results = json.loads(tools["search_memories"](key, "live", 8, False, True))["results"]
        by_id = {h["event_id"]: h["superseded_by"] for h in results}
        assert by_id == {old["event_id"]: out["new_id"], out["new_id"]: None}

    def test_memory_history_is_oldest_first_with_state_and_who_decided(self, tools: dict) -> None:
        key, old, out = corrected(tools)
        for asked in (old["event_id"], out["new_id"]):
            history = json.loads(tools["memory_history"](key, asked))["history"]
            assert [(h["seq"], h["text"], h["state"]) for h in history] == [(0, OLD, "superseded"), (1, NEW, "live")]
            assert history[0]["superseded_by_id"] == out["new_id"] and history[0]["decided_by"] == VISITOR
            assert history[0]["record_seq"] == 2 and history[1]["live_seq"] == 1

    def test_memory_history_of_an_unknown_event_is_a_plain_text_error(self, tools: dict) -> None:
        key, _old, _out = corrected(tools)
        with pytest.raises(gr.Error) as info:
            tools["memory_history"](key, "evt_" + "f" * 32)
        assert "&#" not in str(info.value.message)

    def test_memory_history_refuses_an_invalid_key(self, tools: dict) -> None:
        with pytest.raises(gr.Error):
            tools["memory_history"]("not a key", "0")
