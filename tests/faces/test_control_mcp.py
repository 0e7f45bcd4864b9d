"""control.mcp: the plain functions webui/mcp_tools.py wraps as MCP tools (propose_turn, answer_turn, cancel_turn,
revoke_memory, restore_memory) return JSON-ready dicts and refuse with the domain's one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chat.consent import ConsentError
from chat.engine import Engine
from control.mcp import answer_turn, approved_list, cancel_turn, propose_turn, restore_memory, revoke_memory
from control.revocation import ControlError
from receipts.body import dump_file
from storage.files.receipts.api import verify_bytes

from ..forget_support import engine


@pytest.fixture
def eng(tmp_path: Path) -> Engine:
    e = engine(tmp_path / "d")
    for text in ("I adopted a grey cat named Miso", "I moved to Lisbon in March", "My sister is called Ana"):
        e.remember("alice", text)
    return e


def test_propose_then_answer_returns_json_and_a_receipt_that_verifies(eng: Engine) -> None:
    p = propose_turn(eng, "alice", "my cat, Lisbon, my sister?", 3)
    json.dumps(p)
    assert p["token"].startswith("ct1.") and len(p["candidates"]) == 3
    keep = p["candidates"][0]["event_id"]
    out = answer_turn(eng, "alice", p["token"], f'["{keep}"]')  # a client may send the list as one string
    json.dumps(out)
    assert [m["event_id"] for m in out["memories"]] == [keep]
    assert out["approved"] == [p["candidates"][0]["seq"]] and sorted(out["withheld"]) == sorted(c["seq"] for c in p["candidates"][1:])
    report = verify_bytes(dump_file(out["receipt"]), trusted=[eng.key.public_key], data_dir=eng.data_dir)
    assert report.verdict == "verified"


def test_answer_turn_refuses_another_sessions_token_and_a_spent_one(eng: Engine) -> None:
    eng.remember("bob", "Bob keeps bees")
    p = propose_turn(eng, "alice", "my cat?", 2)
    with pytest.raises(ConsentError, match="another session"):
        answer_turn(eng, "bob", p["token"], [])
    assert cancel_turn(eng, "alice", p["token"]) == {"cancelled": True, "session_id": "alice"}
    with pytest.raises(ConsentError, match="cancelled"):
        answer_turn(eng, "alice", p["token"], [])


def test_revoke_and_restore_memory_take_an_event_id_and_say_revoke_is_not_erasure(eng: Engine) -> None:
    eid = eng.ledger.read_events("alice", [1])[0].id
    r = revoke_memory(eng, "alice", eid, "outdated")
    json.dumps(r)
    assert (r["action"], r["seq"], r["event_id"], r["reason"]) == ("revoke", 1, eid, "outdated") and "not erasure" in r["note"]
    assert 1 not in [c["seq"] for c in propose_turn(eng, "alice", "Lisbon March", 3)["candidates"]]
    with pytest.raises(ControlError, match="already revoked"):
        revoke_memory(eng, "alice", eid)
    assert restore_memory(eng, "alice", eid)["action"] == "restore"
    assert 1 in [c["seq"] for c in propose_turn(eng, "alice", "Lisbon March", 3)["candidates"]]


@pytest.mark.parametrize(
    ("given", "expected"),
    [(None, []), ("", []), ("evt_a, evt_b", ["evt_a", "evt_b"]), ('["evt_a","evt_b"]', ["evt_a", "evt_b"]), (["evt_a"], ["evt_a"]), ("3 4", ["3", "4"])],
)
def test_approved_ids_arrive_as_a_list_or_one_string(given: object, expected: list[object]) -> None:
    assert approved_list(given) == expected
