"""Reviewer finding (issue 28, item 1, at the MCP edge): MCP's search_memories leaves revoked memories out by default
("as answers never use them"), but not the answers that quote them — the closure chat.withheld keeps from every model.
An MCP client is itself a model: the calling agent is handed the revoked words, unlabelled (revoked_by null)."""

from __future__ import annotations

import json
from pathlib import Path

from chat.engine import Engine
from chat.llm import LLM
from webui.mcp_tools import make_tools
from webui.service import Service

MARKER = "Quuxborough"


def test_search_memories_leaves_out_answers_that_quote_a_revoked_memory(tmp_path: Path) -> None:
    service = Service(Engine(tmp_path / "data", llm=LLM(api_key="")))
    try:
        tools = {fn.__name__: fn for fn in make_tools(service)}
        key = json.loads(tools["new_session_key"]())["session_key"]
        mem = json.loads(tools["remember"](key, f"my locker code word is {MARKER}"))
        asked = json.loads(tools["ask"](key, "what is my locker code word?"))
        assert MARKER in asked["answer"]  # the stand-in quotes the memory it was handed
        tools["revoke_memory"](key, mem["event_id"])
        found = json.loads(tools["search_memories"](key, "locker code word"))
        leaked = [r for r in found["results"] if MARKER.lower() in r["text"].lower()]
        assert not leaked, f"the revoked words reached the MCP client in {[(r['seq'], r['role'], r['revoked_by']) for r in leaked]}"
    finally:
        service.engine.close()
