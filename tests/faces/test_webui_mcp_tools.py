"""The MCP tool functions called directly (no server): descriptions, JSON results, refusals."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import gradio as gr
import pytest

from chat.engine import Engine
from chat.llm import LLM
from webui.inputs import K_API_MAX, K_MAX
from webui.mcp_tools import make_tools
from webui.service import Service
from webui.sessions import session_id

ROOT = Path(__file__).resolve().parents[2]


def offline_engine(path: Path) -> Engine:
    """An engine whose model is the offline stand-in, whatever the environment says (tests never touch the network)."""
    return Engine(path, llm=LLM(api_key=""))


@pytest.fixture
def tools(tmp_path: Path) -> dict:
    return {fn.__name__: fn for fn in make_tools(Service(offline_engine(tmp_path)))}


def test_the_tool_set(tools: dict) -> None:
    assert set(tools) == {
        "new_session_key",
        "remember",
        "search_memories",
        "ask",
        "verify_receipt",
        "forget_memory",
        "propose_turn",
        "answer_turn",
        "cancel_turn",
        "revoke_memory",
        "restore_memory",
        "memory_history",
        "correct_memory",
        "export_session",
        "import_bundle",
    }


def test_every_tool_documents_every_argument_and_the_session_key_as_a_secret(tools: dict) -> None:
    for name, fn in tools.items():
        doc = inspect.getdoc(fn) or ""
        assert doc.splitlines()[0], name
        for param in inspect.signature(fn).parameters:
            assert f"{param}:" in doc.split("Args:")[1], (name, param)
        if "session_key" in inspect.signature(fn).parameters:
            assert "secret" in doc, name


def test_annotations_are_real_types_for_the_schema(tools: dict) -> None:
    for fn in tools.values():
        assert all(not isinstance(p.annotation, str) for p in inspect.signature(fn).parameters.values())
        assert inspect.signature(fn).return_annotation is str


def test_ask_returns_the_answer_and_a_receipt_that_verifies(tools: dict) -> None:
    key = json.loads(tools["new_session_key"]())["session_key"]
    tools["remember"](key, "my locker code is in the blue notebook")
    out = json.loads(tools["ask"](key, "where is my locker code?", 5))
    assert out["provider"] == "offline" and "Offline stand-in" in out["answer"]
    assert out["session_id"] == session_id(key) and out["receipt_id"].startswith("rcpt_")
    assert [m["text"] for m in out["memories"]][:1] == ["my locker code is in the blue notebook"]
    report = json.loads(tools["verify_receipt"](json.dumps(out["receipt"]), key))
    assert report["verdict"] == "verified" and report["checked"] == "ledger"
    # the whole ask output is accepted too
    assert json.loads(tools["verify_receipt"](json.dumps(out), key))["verdict"] == "verified"


def test_another_callers_receipt_is_verified_offline(tools: dict) -> None:
    a = json.loads(tools["new_session_key"]())["session_key"]
    b = json.loads(tools["new_session_key"]())["session_key"]
    receipt = json.loads(tools["ask"](a, "private words"))["receipt"]
    report = json.loads(tools["verify_receipt"](json.dumps(receipt), b))
    assert report["checked"] == "other_session" and report["mode"] == "offline"


def test_search_returns_scored_hits_of_this_session_only(tools: dict) -> None:
    a = json.loads(tools["new_session_key"]())["session_key"]
    b = json.loads(tools["new_session_key"]())["session_key"]
    tools["remember"](a, "pineapple on pizza")
    tools["remember"](b, "pineapple in salad")
    out = json.loads(tools["search_memories"](a, "pineapple", 8))
    assert [h["text"] for h in out["results"]] == ["pineapple on pizza"]
    assert {"bm25", "collapse", "score", "digest", "chain", "event_id"} <= set(out["results"][0])


@pytest.mark.parametrize(
    ("tool", "args", "match"),
    [
        ("ask", ("short-key", "hi"), "session key"),
        ("ask", (None, ""), "message"),
        ("ask", (None, "hi", 0), "K 0"),
        ("remember", (None, ""), "empty"),
        ("search_memories", (None, "x", 51), "K 51: must be from 1 to 50"),
        ("ask", (None, "hi", 51), "K 51: must be from 1 to 50"),
        ("verify_receipt", ("not json",), "malformed"),
        ("verify_receipt", ("",), "receipt_json"),
    ],
)
def test_bad_arguments_are_refused_with_the_reason(tools: dict, tool: str, args: tuple, match: str) -> None:
    key = json.loads(tools["new_session_key"]())["session_key"]
    args = tuple(key if a is None else a for a in args)
    with pytest.raises(gr.Error, match=match):
        tools[tool](*args)


class TestK:
    """K over MCP is what the app guide says: 1 to 50 (the page's slider stops at 20)."""

    def test_k_up_to_the_api_limit_is_accepted_by_search_and_ask(self, tools: dict) -> None:
        key = json.loads(tools["new_session_key"]())["session_key"]
        for i in range(3):
            tools["remember"](key, f"pineapple note {i}")
        assert K_API_MAX == 50 > K_MAX
        assert json.loads(tools["search_memories"](key, "pineapple", K_API_MAX))["k"] == K_API_MAX
        out = json.loads(tools["ask"](key, "which pineapple notes?", K_API_MAX))
        assert out["receipt_id"].startswith("rcpt_") and len(out["memories"]) == 3

    def test_the_tool_descriptions_and_the_app_guide_state_the_same_limits(self, tools: dict) -> None:
        for name in ("search_memories", "ask"):
            assert f"1 to {K_API_MAX} (default 8)" in (inspect.getdoc(tools[name]) or ""), name
        guide = " ".join((ROOT / "docs" / "guides" / "app.md").read_text(encoding="utf-8").split())
        assert f"K from 1 to {K_MAX} in the UI (1–{K_API_MAX} over MCP" in guide


class TestPlainErrors:
    """An MCP client shows the text it is given: a refusal is plain text, never HTML-escaped."""

    @pytest.mark.parametrize(
        ("tool", "args"),
        [
            ("ask", ("guessable", "hi")),
            ("remember", ("guessable", "hi")),
            ("search_memories", ("guessable", "x")),
            ("verify_receipt", ("{}", "guessable")),
        ],
    )
    def test_a_refusal_keeps_its_quotes(self, tools: dict, tool: str, args: tuple) -> None:
        with pytest.raises(gr.Error) as info:
            tools[tool](*args)
        text = str(info.value.message)
        assert "letters, digits, '-' or '_'" in text or "receipt" in text
        assert "&#x27;" not in text and "&amp;" not in text and "&lt;" not in text

    def test_a_malformed_receipt_is_named_in_plain_text(self, tools: dict) -> None:
        with pytest.raises(gr.Error) as info:
            tools["verify_receipt"]('{"payloadType": "<b>x</b>"}')
        assert "&lt;" not in str(info.value.message) and "&#x27;" not in str(info.value.message)

    def test_the_page_still_gets_escaped_text(self) -> None:
        from webui.handlers import to_gr_error
        from webui.inputs import BadInput

        assert to_gr_error(BadInput("a '<b>'")).message == "a &#x27;&lt;b&gt;&#x27;"
        assert to_gr_error(BadInput("a '<b>'"), for_html=False).message == "a '<b>'"

    def test_an_unexpected_failure_is_a_fixed_sentence_without_its_class_or_message(self) -> None:
        from webui.handlers import to_gr_error

        for for_html in (True, False):
            message = to_gr_error(KeyError("a memory's words"), for_html=for_html).message
            assert message == "the request failed on the server; the details are in the server log"

    def test_a_turn_error_reads_without_the_exception_it_wraps_however_it_was_worded(self) -> None:
        from chat.engine import TurnError
        from chat.shown import TURN_FAILED, turn_error_text

        cause = ValueError("my red kayak")
        worded = {
            "the turn failed (ValueError: my red kayak); no answer was given": "the turn failed; no answer was given",
            "the turn broke [ValueError]": TURN_FAILED,
            "session s: rebuild the index": "session s: rebuild the index",
        }
        for text, shown in worded.items():
            exc = TurnError(text)
            exc.__cause__ = cause
            assert turn_error_text(exc) == shown
