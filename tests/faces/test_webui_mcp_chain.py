"""MCP tools as an agent chains them (issue 31): one output feeds the next as it was returned — `ask`'s receipt object
into verify_receipt, forget_memory's certificate too; one id name (`event_id`) and one rule (an id or a seq) for every
tool; one error convention (a refusal is a tool error); scores as the ranking used them, rounded; errors that never
repeat a memory's words; and a log without two INFO lines per call."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gradio as gr
import pytest

import app
from chat.engine import Engine
from chat.llm import LLM
from webui.config import Config
from webui.mcp_tools import make_tools
from webui.service import Service

MARKER = "zanzibarquokka"  # a memory's words: never in an error


@pytest.fixture
def tools(tmp_path: Path) -> dict[str, Any]:
    return {fn.__name__: fn for fn in make_tools(Service(Engine(tmp_path / "data", llm=LLM(api_key=""))))}


def session(tools: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(key, the remembered event, ask's output)."""
    key = json.loads(tools["new_session_key"]())["session_key"]
    mem = json.loads(tools["remember"](key, f"my locker word is {MARKER}"))
    tools["remember"](key, "I keep the spare key under the blue pot")
    asked = json.loads(tools["ask"](key, "what is my locker word?", 4))
    return key, mem, asked


def error_of(fn: Any, *args: Any) -> str:
    with pytest.raises(gr.Error) as caught:
        fn(*args)
    return str(caught.value.message)


class TestVerifyTakesWhatTheToolsReturned:
    def test_the_receipt_object_ask_returned_verifies_as_it_is(self, tools: dict[str, Any]) -> None:
        key, _mem, asked = session(tools)
        for given in (asked["receipt"], asked, json.dumps(asked["receipt"])):
            out = json.loads(tools["verify_receipt"](given, key))
            assert (out["kind"], out["verdict"], out["checked"]) == ("receipt", "verified", "ledger")

    def test_verify_receipt_says_why_these_memories_for_the_callers_own_receipt_only(self, tools: dict[str, Any]) -> None:
        key, _mem, asked = session(tools)
        out = json.loads(tools["verify_receipt"](asked["receipt"], key))
        why = out["why_these"]
        assert why["verdict"] == "replayed" and [r["seq"] for r in why["committed"]][: len(asked["memories"])] == [
            m["seq"] for m in asked["memories"]
        ]
        other = json.loads(tools["verify_receipt"](asked["receipt"], json.loads(tools["new_session_key"]())["session_key"]))
        assert other["why_these"]["replayed"] is False and "your own session" in other["why_these"]["why"]

    def test_the_certificate_forget_memory_returned_verifies_as_it_is(self, tools: dict[str, Any]) -> None:
        key, mem, _asked = session(tools)
        gone = json.loads(tools["forget_memory"](key, mem["event_id"]))
        for given in (gone["certificate"], gone, json.dumps(gone["certificate"])):
            out = json.loads(tools["verify_receipt"](given, key))
            assert (out["kind"], out["verdict"]) == ("erasure-certificate", "verified"), out
            assert all(c["status"] != "fail" for c in out["checks"])

    @pytest.mark.parametrize("shape", ["memories-list", "number", "empty-object", "receipt-with-a-foreign-member", "text-not-json"])
    def test_a_refusal_never_repeats_what_was_sent(self, tools: dict[str, Any], shape: str) -> None:
        key, _mem, asked = session(tools)
        given = {
            "memories-list": asked["memories"],
            "number": 7,
            "empty-object": {},
            "receipt-with-a-foreign-member": {**asked["receipt"], "note": MARKER},
            "text-not-json": f"not json {MARKER}",
        }[shape]
        message = error_of(tools["verify_receipt"], given, key)
        assert MARKER not in message and "\n" not in message, message

    def test_a_changed_memory_in_the_object_is_a_failed_verdict_not_an_error(self, tools: dict[str, Any]) -> None:
        key, _mem, asked = session(tools)
        receipt = json.loads(json.dumps(asked["receipt"]))
        changed = [d for d in receipt["disclosures"] if MARKER in d["text"]]
        assert changed, "the memory's words are disclosed beside the signed body"
        changed[0]["text"] = "my locker word is something else"
        out = json.loads(tools["verify_receipt"](receipt, key))
        assert out["verdict"] == "failed"


class TestOneIdRule:
    def test_every_result_names_an_event_as_event_id(self, tools: dict[str, Any]) -> None:
        key, mem, asked = session(tools)
        assert mem["event_id"].startswith("evt_")
        assert all(m["event_id"].startswith("evt_") for m in asked["memories"])
        found = json.loads(tools["search_memories"](key, "locker word"))["results"]
        assert found and all(r["event_id"].startswith("evt_") for r in found)
        proposal = json.loads(tools["propose_turn"](key, "what is my locker word?", 4))
        assert proposal["candidates"] and all("id" not in c and c["event_id"].startswith("evt_") for c in proposal["candidates"])
        history = json.loads(tools["memory_history"](key, mem["event_id"]))["history"]
        assert history and all("id" not in e and e["event_id"].startswith("evt_") for e in history)
        revoked = json.loads(tools["revoke_memory"](key, mem["event_id"]))
        assert revoked["event_id"] == mem["event_id"]

    @pytest.mark.parametrize("spelling", ["event_id", "seq", "seq-text"])
    def test_forget_revoke_and_restore_take_an_id_or_a_seq_alike(self, tools: dict[str, Any], spelling: str) -> None:
        key, mem, _asked = session(tools)
        ref = {"event_id": mem["event_id"], "seq": mem["seq"], "seq-text": str(mem["seq"])}[spelling]
        assert json.loads(tools["revoke_memory"](key, ref))["event_id"] == mem["event_id"]
        assert json.loads(tools["restore_memory"](key, ref))["event_id"] == mem["event_id"]
        assert json.loads(tools["memory_history"](key, ref))["history"][0]["event_id"] == mem["event_id"]
        gone = json.loads(tools["forget_memory"](key, ref))
        assert gone["erased"][0]["seq"] == mem["seq"]

    def test_a_bool_is_neither_an_id_nor_a_seq(self, tools: dict[str, Any]) -> None:
        key, _mem, _asked = session(tools)
        for name in ("forget_memory", "revoke_memory"):
            error_of(tools[name], key, True)


class TestOneErrorConvention:
    @pytest.mark.parametrize("data", [base64.b64encode(b"garbage, not a zip").decode(), base64.b64encode(b"PK\x03\x04junk").decode()])
    def test_importing_garbage_is_a_tool_error_like_every_other_refusal(self, tools: dict[str, Any], data: str) -> None:
        key = json.loads(tools["new_session_key"]())["session_key"]
        message = error_of(tools["import_bundle"], key, data)
        assert "nothing was imported" in message and "\n" not in message


class TestScores:
    def test_scores_are_the_rankings_rounded_and_in_its_order(self, tools: dict[str, Any]) -> None:
        key, _mem, _asked = session(tools)
        for i in range(6):
            tools["remember"](key, f"note {i}: the locker by the gym has a word on it")
        found = json.loads(tools["search_memories"](key, "locker word", 8))["results"]
        assert len(found) >= 3 and [r["rank"] for r in found] == list(range(1, len(found) + 1))
        for r in found:
            for name in ("score", "relative", "bm25", "collapse"):
                assert r[name] == float(f"{r[name]:.4g}"), (name, r[name])
        own = [r["score"] for r in found if r["match"] == "own text"]
        assert own == sorted(own, reverse=True)  # within a tier the shown score follows the rank
        proposal = json.loads(tools["propose_turn"](key, "locker word", 8))
        assert all(c["score"] == float(f"{c['score']:.4g}") for c in proposal["candidates"])


def test_the_mcp_sdk_logs_nothing_per_call_by_default() -> None:
    sdk = logging.getLogger("mcp.server.lowlevel.server")
    before = logging.getLogger("mcp").level
    try:
        app.quiet_logs({})
        assert not sdk.isEnabledFor(logging.INFO) and sdk.isEnabledFor(logging.WARNING)
        app.quiet_logs({"MRE_LOG_MCP": "1"})
        assert sdk.isEnabledFor(logging.INFO)
    finally:
        logging.getLogger("mcp").setLevel(before)


# -- over the wire: the SDK validates arguments against the schema first, and its refusal echoes what was sent ------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[app.Running]:
    data = tmp_path_factory.mktemp("data")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("GROQ_API_KEY", raising=False)
        running = app.start(Config(data, "127.0.0.1", free_port(), None, 16, True), quiet=True)
    try:
        yield running
    finally:
        running.stop()


def test_over_mcp_an_agent_chains_ask_verify_and_forget_by_seq(server: app.Running) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def go() -> Any:
        async with streamable_http_client(server.url + "gradio_api/mcp/") as (read, write, _):
            async with ClientSession(read, write) as s:
                await s.initialize()

                async def call(name: str, **args: Any) -> Any:
                    return await s.call_tool(name, args)

                key = json.loads((await call("new_session_key")).content[0].text)["session_key"]
                mem = json.loads((await call("remember", session_key=key, text=f"my locker word is {MARKER}")).content[0].text)
                asked = json.loads((await call("ask", session_key=key, message="what is my locker word?", k=4)).content[0].text)
                verified = await call("verify_receipt", receipt_json=asked["receipt"], session_key=key)
                wrong = await call("verify_receipt", receipt_json=asked["memories"], session_key=key)
                gone = await call("forget_memory", session_key=key, event_id=mem["seq"])
                cert = json.loads(gone.content[0].text)["certificate"]
                checked = await call("verify_receipt", receipt_json=cert, session_key=key)
                junk = await call("import_bundle", session_key=key, bundle_base64=base64.b64encode(b"junk").decode())
                return verified, wrong, gone, checked, junk

    verified, wrong, gone, checked, junk = asyncio.run(asyncio.wait_for(go(), 90))
    assert not verified.isError and json.loads(verified.content[0].text)["verdict"] == "verified"
    assert wrong.isError and MARKER not in wrong.content[0].text
    assert not gone.isError
    assert not checked.isError and json.loads(checked.content[0].text)["kind"] == "erasure-certificate"
    assert json.loads(checked.content[0].text)["verdict"] == "verified"
    assert junk.isError and "nothing was imported" in junk.content[0].text
