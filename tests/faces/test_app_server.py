"""The app launched on a loopback port: gradio_client (what the browser's events call) and the MCP endpoint."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

import app
from receipts import checkpoints
from receipts.body import MAX_RECEIPT_BYTES
from storage.files.receipts.api import verify_bytes
from webui import kept
from webui.config import Config
from webui.sessions import new_session_key, session_id

from ..history_support import edit_in_place, rewrite_and_recompute

TIMEOUT = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[app.Running]:
    data = tmp_path_factory.mktemp("data")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("GROQ_API_KEY", raising=False)  # the offline stand-in, never the network
        running = app.start(Config(data, "127.0.0.1", free_port(), None, 16, True), quiet=True)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def client(server: app.Running, tmp_path: Path) -> Client:
    return Client(server.url, verbose=False, analytics_enabled=False, download_files=str(tmp_path))


def call(client: Client, *args: Any, api_name: str) -> Any:
    return client.submit(*args, api_name=api_name).result(timeout=TIMEOUT)


def say(client: Client, key: str, message: str, k: int = 8) -> tuple[list[Any], str, str, Path]:
    """One chat turn as the browser sends it: (history, stamps, receipt id, downloaded receipt)."""
    history, _box, stamps, download = call(client, message, [], k, key, False, api_name="/chat")
    path = Path(download["value"] if isinstance(download, dict) else download)
    return history, stamps, path.stem, path


class TestGradioClient:
    def test_the_public_api_is_the_tool_set_only(self, client: Client) -> None:
        api = client.view_api(print_info=False, return_format="dict")
        assert set(api["named_endpoints"]) == {
            "/new_session_key",
            "/remember",
            "/search_memories",
            "/ask",
            "/verify_receipt",
            "/forget_memory",
            "/propose_turn",
            "/answer_turn",
            "/cancel_turn",
            "/revoke_memory",
            "/restore_memory",
            "/memory_history",
            "/correct_memory",
            "/export_session",
            "/import_bundle",
        }

    def test_chat_shows_stamps_and_the_downloaded_receipt_verifies(self, client: Client, server: app.Running) -> None:
        key = new_session_key()
        say(client, key, "My sister lives in Porto")
        history, stamps, rid, path = say(client, key, "Where does my sister live?")
        assert "My sister lives in Porto" in stamps and rid in stamps and "offline stand-in" in stamps
        assert history[-1]["metadata"]["title"].endswith(rid)
        assert (
            path.read_bytes()
            == (server.service.data_dir / "sessions" / session_id(key) / "receipts" / f"{rid}.json").read_bytes()
        )
        verdict, table = call(client, handle_file(str(path)), key, api_name="/verify")
        assert "✅ Verified" in verdict and "this session's ledger" in verdict
        assert all(row[1] == "✅ pass" for row in table["data"])
        offline = verify_bytes(path.read_bytes(), trusted=[server.service.engine.key.public_key])
        assert offline.verdict == "verified"

    def test_search_finds_what_was_said(self, client: Client) -> None:
        key = new_session_key()
        say(client, key, "The quokka is my favourite animal")
        status, table, _why = call(client, "quokka", 8, key, False, False, False, api_name="/search")
        assert "result" in status
        assert "The quokka is my favourite animal" in [row[4] for row in table["data"]]

    def test_tamper_names_the_check_that_catches_it(self, client: Client) -> None:
        key = new_session_key()
        say(client, key, "I drink oolong tea")
        _h, _s, _rid, path = say(client, key, "what tea do I drink?")
        verdict, table, _copy = call(client, handle_file(str(path)), "memory", key, api_name="/tamper")
        assert "Tampered copy: caught" in verdict
        assert "memory#1.content" in {row[0] for row in table["data"] if row[1] == "❌\ufe0f FAIL"}  # format 2

    def test_a_reload_resumes_and_the_ledger_tab_shows_the_chain(self, client: Client) -> None:
        key = new_session_key()
        say(client, key, "first words")
        resumed = call(client, key, api_name="/start")
        assert resumed[0] == key and len(resumed[3]) == 3
        fresh = call(client, None, api_name="/start")
        assert fresh[0] != key and fresh[3] == []
        status, table, checkpoint = call(client, key, api_name="/ledger")
        assert "Chain intact" in status and len(table["data"]) == 2 and "tree_size" in checkpoint


class TestIsolation:
    def test_two_clients_never_see_each_others_events(self, server: app.Running, tmp_path: Path) -> None:
        a = Client(server.url, verbose=False, analytics_enabled=False, download_files=str(tmp_path / "a"))
        b = Client(server.url, verbose=False, analytics_enabled=False, download_files=str(tmp_path / "b"))
        ka, kb = new_session_key(), new_session_key()
        say(a, ka, "my bank PIN hint is marmalade-777")
        _h, _s, _rid, a_receipt = say(a, ka, "what is my PIN hint about?")
        say(b, kb, "tell me about my PIN hint")
        history, stamps, _rid, _p = say(b, kb, "marmalade PIN hint")
        seen = json.dumps(history) + stamps
        seen += json.dumps(call(b, "marmalade PIN hint", 20, kb, False, True, False, api_name="/search"))
        seen += json.dumps(call(b, kb, api_name="/ledger"))
        seen += json.dumps(call(b, kb, api_name="/start"))
        assert "marmalade-777" not in seen and "marmalade\\-777" not in seen
        # B can check A's receipt (it was handed over) but only offline: A's ledger is never consulted for B.
        verdict, table = call(b, handle_file(str(a_receipt)), kb, api_name="/verify")
        assert "another session" in verdict
        assert {row[0] for row in table["data"] if row[1] == "⚪ not verifiable here"} >= {
            "ledger.events",
            "ledger.chain",
        }


class TestHistoryTheVisitorKept:
    """What the page's chained history check does, called as the page calls it (gradio_client: no chaining).

    Over the API its outputs are (kept state, warning, kept download, current download, status): Gradio leaves
    the layout (the warning box) and the accept button's update out."""

    def test_the_kept_checkpoint_moves_on_with_an_honest_turn_and_a_rewrite_is_named(
        self, client: Client, server: app.Running
    ) -> None:
        key = new_session_key()
        say(client, key, "My cat is called Miso")
        state, warning, _kept_file, _current_file, status = call(client, key, None, api_name="/history_check")
        assert warning == "" and "2 events" in status
        say(client, key, "What is my cat called?")
        state, warning, _kept_file, _current_file, status = call(client, key, state, api_name="/history_check")
        assert warning == "" and "2 → 4 events" in status
        assert '"tree_size":4' in (kept.kept_for(state, session_id(key)).text or "")
        data, engine_key = server.service.data_dir, server.service.engine.key
        resigned = rewrite_and_recompute(data, session_id(key), 0, "My cat is called Rex!", engine_key)
        again, warning, _kept_file, current_file, status = call(client, key, state, api_name="/history_check")
        assert warning.startswith("## ⚠️ This history changed since you last saw it") and "⚠️" in status
        assert again == {"__type__": "update"}  # no new value: the kept checkpoint is the evidence, not overwritten
        current = Path(current_file["value"] if isinstance(current_file, dict) else current_file)
        assert current.read_bytes() == checkpoints.checkpoint_file_bytes(resigned)


class TestEditedInPlace:
    def test_a_running_app_whose_ledger_is_edited_in_place_says_failed_and_refuses_to_append(
        self, client: Client, server: app.Running
    ) -> None:
        key = new_session_key()
        session, data = session_id(key), server.service.data_dir
        say(client, key, "My bike is green")
        _h, _s, _rid, receipt = say(client, key, "What colour is my bike?")
        verdict, _table = call(client, handle_file(str(receipt)), key, api_name="/verify")
        assert "✅ Verified" in verdict  # the verifier's cache and the writer's tail are warm
        edit_in_place(data, session, 0, b"green", b"grean")  # same length, mtime put back
        verdict, table = call(client, handle_file(str(receipt)), key, api_name="/verify")
        assert "❌ Failed" in verdict
        assert "ledger.chain" in {row[0] for row in table["data"] if row[1] == "❌\ufe0f FAIL"}
        receipts = sorted((data / "sessions" / session / "receipts").iterdir())
        lines = (data / "sessions" / session / "events.jsonl").read_bytes()
        with pytest.raises(AppError, match=r"line 1 \(seq 0\) changed after this writer verified it"):
            call(client, "What colour is my bike now?", [], 8, key, False, api_name="/chat")
        assert sorted((data / "sessions" / session / "receipts").iterdir()) == receipts  # no new receipt
        assert (data / "sessions" / session / "events.jsonl").read_bytes() == lines  # no new event


class TestBadInput:
    @pytest.mark.parametrize(("message", "k", "match"), [("", 8, "empty"), ("x" * 8001, 8, "8000"), ("ok", 0, "0")])
    def test_chat_refusals_are_messages(self, client: Client, message: str, k: int, match: str) -> None:
        with pytest.raises(AppError, match=match):
            call(client, message, [], k, new_session_key(), False, api_name="/chat")

    def test_a_bad_session_key_is_refused(self, client: Client) -> None:
        with pytest.raises(AppError, match="session key"):
            call(client, "hello", [], 8, "guessable", False, api_name="/chat")

    def test_a_non_json_upload_gets_a_verdict_not_a_traceback(self, client: Client, tmp_path: Path) -> None:
        p = tmp_path / "notes.json"
        p.write_text("these are not the droids")
        verdict, table = call(client, handle_file(str(p)), None, api_name="/verify")
        assert "Not a receipt" in verdict and table["data"] == []

    def test_an_oversized_upload_is_refused_by_the_server(
        self, client: Client, server: app.Running, tmp_path: Path
    ) -> None:
        p = tmp_path / "huge.json"
        p.write_bytes(b" " * (MAX_RECEIPT_BYTES + 1))
        with pytest.raises(
            ValueError, match="exceeds the maximum file size"
        ):  # gradio_client reads the cap from the app
            call(client, handle_file(str(p)), None, api_name="/verify")
        resp = httpx.post(
            f"{server.url}gradio_api/upload",
            files={"files": ("huge.json", p.read_bytes(), "application/json")},
            timeout=30,
        )
        assert resp.status_code == 413  # and the server enforces it for any other caller

    def test_the_data_directory_is_never_served(self, server: app.Running) -> None:
        from storage.common.keyfiles import keys_dir

        data = server.service.data_dir
        for target in (keys_dir(data) / "signing.key", data.resolve() / "index.sqlite"):
            assert target.exists()
            resp = httpx.get(f"{server.url}gradio_api/file={target}", timeout=10)
            assert resp.status_code == 403

    def test_there_is_no_monitoring_dashboard_of_visitors_events(self, server: app.Running) -> None:
        for path in ("monitoring", "monitoring/summary"):
            assert httpx.get(f"{server.url}{path}", timeout=10).status_code == 403


class TestMCP:
    URL_SUFFIX = "gradio_api/mcp/"

    def run(self, server: app.Running, steps: Any) -> Any:
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        async def go() -> Any:
            async with streamable_http_client(server.url + self.URL_SUFFIX) as (read, write, _):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await steps(session)

        return asyncio.run(asyncio.wait_for(go(), TIMEOUT))

    def test_tools_are_listed_with_descriptions(self, server: app.Running) -> None:
        async def steps(s: Any) -> Any:
            return (await s.list_tools()).tools

        tools = {t.name: t for t in self.run(server, steps)}
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
        ask = tools["ask"]
        assert "receipt" in (ask.description or "")
        assert set(ask.inputSchema["required"]) == {"session_key", "message"}
        assert "secret" in ask.inputSchema["properties"]["session_key"]["description"]

    def test_ask_then_verify_the_receipt_it_returned(self, server: app.Running) -> None:
        async def steps(s: Any) -> Any:
            key = json.loads((await s.call_tool("new_session_key", {})).content[0].text)["session_key"]
            await s.call_tool("remember", {"session_key": key, "text": "the spare key is under the blue pot"})
            asked = json.loads(
                (await s.call_tool("ask", {"session_key": key, "message": "where is the spare key?", "k": 4}))
                .content[0]
                .text
            )
            mine = json.loads(
                (
                    await s.call_tool(
                        "verify_receipt", {"receipt_json": json.dumps(asked["receipt"]), "session_key": key}
                    )
                )
                .content[0]
                .text
            )
            anon = json.loads(
                (await s.call_tool("verify_receipt", {"receipt_json": json.dumps(asked["receipt"])})).content[0].text
            )
            found = json.loads(
                (await s.call_tool("search_memories", {"session_key": key, "query": "spare key"})).content[0].text
            )
            return asked, mine, anon, found

        asked, mine, anon, found = self.run(server, steps)
        assert asked["provider"] == "offline" and asked["memories"][0]["text"] == "the spare key is under the blue pot"
        assert mine["verdict"] == "verified" and mine["checked"] == "ledger"
        assert anon["checked"] == "other_session" and all(c["status"] != "fail" for c in anon["checks"])
        assert found["results"][0]["text"] == "the spare key is under the blue pot"

    def test_forget_memory_returns_a_certificate_the_remote_client_can_verify(self, server: app.Running) -> None:
        from ledger.canonical import canonical_json
        from storage.files.receipts.certificate_io import verify_certificate_bytes

        async def steps(s: Any) -> Any:
            key = json.loads((await s.call_tool("new_session_key", {})).content[0].text)["session_key"]
            mem = json.loads(
                (await s.call_tool("remember", {"session_key": key, "text": "the vault word is quillfeather"}))
                .content[0]
                .text
            )
            gone = json.loads(
                (await s.call_tool("forget_memory", {"session_key": key, "event_id": mem["event_id"]})).content[0].text
            )
            again = await s.call_tool("forget_memory", {"session_key": key, "event_id": mem["event_id"]})
            found = json.loads(
                (await s.call_tool("search_memories", {"session_key": key, "query": "quillfeather"})).content[0].text
            )
            return mem, gone, again, found

        mem, gone, again, found = self.run(server, steps)
        assert gone["erased"] == [{"seq": mem["seq"], "role": "user"}] and found["results"] == []
        report = verify_certificate_bytes(
            canonical_json(gone["certificate"]), trusted=[server.service.engine.key.public_key]
        )
        assert report.verdict == "verified"
        assert again.isError and "already erased" in again.content[0].text

    def test_a_refusal_is_a_tool_error_with_the_reason(self, server: app.Running) -> None:
        async def steps(s: Any) -> Any:
            return await s.call_tool("ask", {"session_key": "guessable", "message": "hi"})

        result = self.run(server, steps)
        assert result.isError and "session key" in result.content[0].text
        # plain text for an MCP client, as the app wrote it: never HTML-escaped
        assert "'-' or '_'" in result.content[0].text and "&#x27;" not in result.content[0].text
