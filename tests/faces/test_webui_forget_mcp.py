"""MCP's forget_memory, called directly (no server): what it returns, the certificate it carries, its refusals."""

from __future__ import annotations

import json
from pathlib import Path

import gradio as gr
import pytest

from chat.engine import Engine
from chat.llm import LLM
from ledger.canonical import canonical_json
from receipts.verify import PASS
from storage.files.receipts.certificate_io import verify_certificate_bytes
from webui.mcp_tools import make_tools
from webui.service import Service

from ..forget_support import MARKER, files_with_marker


@pytest.fixture
def service(tmp_path: Path) -> Service:
    return Service(Engine(tmp_path / "data", llm=LLM(api_key="")))


@pytest.fixture
def tools(service: Service) -> dict:
    return {fn.__name__: fn for fn in make_tools(service)}


def marked(tools: dict) -> tuple[str, dict, dict]:
    key = json.loads(tools["new_session_key"]())["session_key"]
    mem = json.loads(tools["remember"](key, f"My locker code word is {MARKER}"))
    asked = json.loads(tools["ask"](key, "what is my locker code word?"))
    assert [m["event_id"] for m in asked["memories"]][:1] == [mem["event_id"]]
    return key, mem, asked


def test_forget_memory_erases_it_and_the_answers_that_cited_it_and_returns_a_certificate_that_verifies(
    tools: dict, service: Service
) -> None:
    key, mem, asked = marked(tools)
    out = json.loads(tools["forget_memory"](key, mem["event_id"], "asked to"))
    answer_seq = mem["seq"] + 2
    assert out["session_id"] == mem["session_id"]
    assert out["erased"] == [{"seq": mem["seq"], "role": "user"}, {"seq": answer_seq, "role": "assistant"}]
    assert out["cascaded"] == [answer_seq] and out["receipts_redacted"] == [asked["receipt_id"]]
    assert out["erasure_record_seq"] == answer_seq + 1
    raw = canonical_json(out["certificate"])  # the envelope as a remote client keeps it
    report = verify_certificate_bytes(raw, trusted=[service.engine.key.public_key], data_dir=service.data_dir)
    assert report.verdict == "verified", [c for c in report.checks if c.status != PASS]
    assert json.loads(tools["search_memories"](key, MARKER))["results"] == []
    assert files_with_marker(service.data_dir) == []
    check = json.loads(
        tools["verify_receipt"](json.dumps(asked["receipt"]), key)
    )  # the client's own copy still verifies
    assert check["verdict"] == "verified"


@pytest.mark.parametrize(
    ("event_id", "words"),
    [
        ("evt_" + "0" * 32, "no event with id"),
        ("seq-1", "neither an event id"),
        ("99", "seq 99"),
        ("", "give the event to forget"),
    ],
    ids=["unknown-id", "malformed-id", "unknown-seq", "empty"],
)
def test_a_bad_event_id_is_one_plain_line_and_nothing_is_erased(
    tools: dict, service: Service, event_id: str, words: str
) -> None:
    key, mem, _asked = marked(tools)
    with pytest.raises(gr.Error) as info:
        tools["forget_memory"](key, event_id)
    message = str(info.value.message)
    assert words in message and "\n" not in message and "&#x27;" not in message
    assert not any(ev.erased for ev in service.engine.ledger.events(mem["session_id"]))


def test_forgetting_twice_says_it_is_already_erased(tools: dict) -> None:
    key, mem, _asked = marked(tools)
    tools["forget_memory"](key, mem["event_id"])
    with pytest.raises(gr.Error, match="already erased"):
        tools["forget_memory"](key, mem["event_id"])


def test_a_bad_session_key_is_refused(tools: dict) -> None:
    _key, mem, _asked = marked(tools)
    with pytest.raises(gr.Error, match="session_key|session key"):
        tools["forget_memory"]("short", mem["event_id"])
