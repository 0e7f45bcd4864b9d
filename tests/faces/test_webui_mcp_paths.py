"""No message an MCP client (or the page) reads names a place on the server (issue 28 §7): revoke_memory,
restore_memory, memory_history and correct_memory said `no such session in /…/DATA_DIR` for a session with nothing
stored yet. Generated over every MCP tool, with sessions that hold nothing (a fresh key), a malformed key and a
session forgotten whole, on both backends: the data directory's absolute path, its resolved path, the tails of it
a message could carry (its name with one and two parents), the keys folder and the database's address appear in no
error and no result."""

from __future__ import annotations

import base64
import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gradio as gr
import pytest

from chat.engine import Engine
from chat.llm import LLM
from storage.common.keyfiles import keys_dir
from storage.stores import pg_stores
from webui import forget as fg
from webui.mcp_tools import make_tools
from webui.service import Service
from webui.sessions import new_session_key

NAMED = ("revoke_memory", "restore_memory", "memory_history", "correct_memory")  # the four the issue names
ARGS: dict[str, Any] = {
    "text": "my dev server port is 47113",
    "query": "dev server port",
    "message": "what is my dev server port?",
    "new_text": "my dev server port is 8080",
    "reason": "",
    "event_id": "0",
    "token": "ct1.not-a-token",
    "approved_ids": "",
    "receipt_json": "{}",
    "bundle_base64": base64.b64encode(b"not a zip").decode(),
    "allow_untrusted": False,
    "k": 3,
    "include_revoked": False,
    "include_superseded": False,
}


@pytest.fixture(params=["file", pytest.param("pg", marks=pytest.mark.pg)])
def service(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Service]:
    for name in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    data = tmp_path / "srv" / "deployment" / "data"
    if request.param == "file":
        svc = Service(Engine(data, llm=LLM(api_key="")))
    else:
        svc = Service(Engine(data, llm=LLM(api_key=""), stores=pg_stores(request.getfixturevalue("pg_url"), data)))
    try:
        yield svc
    finally:
        svc.engine.close()


def places(service: Service) -> list[str]:
    """What must never appear: the data directory (as given, resolved, and its tails), the keys folder, the database."""
    data = service.data_dir
    out = {str(data), str(data.resolve()), str(Path(*data.parts[-2:])), str(Path(*data.parts[-3:])), str(keys_dir(data))}
    db = service.engine.stores.database
    if db is not None:
        out.add(db.shown)
        out.add(db.shown.split("://", 1)[1].split("/", 1)[0])  # user@host:port
    return sorted(out)


def call(tool: Callable[..., str], key: object) -> tuple[bool, str]:
    """(refused, what the client reads): the tool's JSON, or its error's text."""
    params = inspect.signature(tool).parameters
    kwargs = {name: (key if name == "session_key" else ARGS[name]) for name in params if name in ARGS or name == "session_key"}
    try:
        return False, tool(**kwargs)
    except gr.Error as exc:
        return True, str(exc.message)


def forgotten_key(service: Service) -> str:
    key = new_session_key()
    service.turn(key, "hello there", 3)
    fg.confirm(service, key, fg.ask_session(service, key).pending)
    return key


def test_no_mcp_tool_names_a_server_place_for_a_session_it_does_not_hold(service: Service) -> None:
    leaked = []
    refused_named = set()
    gone = forgotten_key(service)
    for tool in make_tools(service):
        for label, key in (("fresh", None), ("malformed", "A" * 10), ("forgotten", gone)):
            refused, text = call(tool, new_session_key() if key is None else key)
            if tool.__name__ in NAMED and label == "fresh" and refused:
                refused_named.add(tool.__name__)
            leaked += [f"{tool.__name__} ({label} session): {place!r} in {text[:300]!r}" for place in places(service) if place in text]
    assert leaked == []
    assert refused_named == set(NAMED), "the four tools must refuse a session that holds nothing"


@pytest.mark.parametrize("name", NAMED)
def test_each_named_tool_refuses_an_unknown_session_in_one_line_without_the_data_dir(service: Service, name: str) -> None:
    (tool,) = [t for t in make_tools(service) if t.__name__ == name]
    refused, text = call(tool, new_session_key())
    assert refused and "\n" not in text and "no such session" in text
    assert [place for place in places(service) if place in text] == [] and "deployment" not in text
