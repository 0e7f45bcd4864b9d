"""MCP's propose_turn / answer_turn / cancel_turn and revoke_memory / restore_memory, called directly (no server):
what they return, that the receipt records the person's decision and the revocation, and their refusals in plain text."""

from __future__ import annotations

import json
from pathlib import Path

import gradio as gr
import pytest

from chat.engine import Engine
from chat.llm import LLM
from control.settings import set_consent
from storage.files.receipts.api import verify_bytes
from webui.mcp_tools import make_tools
from webui.service import Service
from webui.sessions import session_id

MEMORIES = ("my cat Miso likes tuna", "my cat Miso sleeps on the radiator", "my cat Miso was born in March")


@pytest.fixture
def service(tmp_path: Path) -> Service:
    return Service(Engine(tmp_path / "data", llm=LLM(api_key="")))


@pytest.fixture
def tools(service: Service) -> dict:
    return {fn.__name__: fn for fn in make_tools(service)}


def events(service: Service, key: str) -> int:
    led = service.engine.ledger
    sid = session_id(key)
    return led.head(sid)[0] if led.exists(sid) else 0


def session_with_memories(tools: dict) -> tuple[str, list[dict]]:
    key = json.loads(tools["new_session_key"]())["session_key"]
    return key, [json.loads(tools["remember"](key, text)) for text in MEMORIES]


def verified(service: Service, receipt: dict) -> str:
    raw = json.dumps(receipt).encode()
    return verify_bytes(raw, trusted=[service.engine.key.public_key], data_dir=service.data_dir).verdict


def test_the_five_control_tools_are_listed(tools: dict) -> None:
    assert {"propose_turn", "answer_turn", "cancel_turn", "revoke_memory", "restore_memory"} <= set(tools)


class TestConsent:
    def test_propose_appends_nothing_and_answer_uses_only_the_approved_memories(
        self, tools: dict, service: Service
    ) -> None:
        key, mems = session_with_memories(tools)
        before = events(service, key)
        proposal = json.loads(tools["propose_turn"](key, "what about my cat Miso?", 8))
        assert events(service, key) == before
        ids = [c["event_id"] for c in proposal["candidates"]]
        assert set(ids) == {m["event_id"] for m in mems}
        out = json.loads(tools["answer_turn"](key, proposal["token"], ids[0]))
        assert [m["event_id"] for m in out["memories"]] == [ids[0]]
        seq_of = {c["event_id"]: c["seq"] for c in proposal["candidates"]}
        assert out["approved"] == [seq_of[ids[0]]] and sorted(out["withheld"]) == sorted(seq_of[i] for i in ids[1:])
        assert verified(service, out["receipt"]) == "verified"
        assert events(service, key) == before + 2  # the question and the answer

    def test_approved_ids_may_come_as_one_comma_separated_string(self, tools: dict, service: Service) -> None:
        key, _mems = session_with_memories(tools)
        proposal = json.loads(tools["propose_turn"](key, "my cat Miso", 8))
        ids = [c["event_id"] for c in proposal["candidates"]]
        out = json.loads(tools["answer_turn"](key, proposal["token"], ", ".join(ids[:2])))
        assert [m["event_id"] for m in out["memories"]] == ids[:2] and len(out["withheld"]) == 1

    def test_cancel_appends_nothing_and_spends_the_token(self, tools: dict, service: Service) -> None:
        key, _mems = session_with_memories(tools)
        proposal = json.loads(tools["propose_turn"](key, "my cat Miso", 8))
        before = events(service, key)
        assert json.loads(tools["cancel_turn"](key, proposal["token"]))["cancelled"] is True
        with pytest.raises(gr.Error, match="cancelled"):
            tools["answer_turn"](key, proposal["token"], "")
        assert events(service, key) == before

    def test_a_replayed_token_is_refused_and_nothing_is_appended(self, tools: dict, service: Service) -> None:
        key, _mems = session_with_memories(tools)
        proposal = json.loads(tools["propose_turn"](key, "my cat Miso", 8))
        tools["answer_turn"](key, proposal["token"], "")
        after = events(service, key)
        with pytest.raises(gr.Error, match="already used"):
            tools["answer_turn"](key, proposal["token"], "")
        assert events(service, key) == after

    def test_another_sessions_token_is_refused_in_plain_text(self, tools: dict, service: Service) -> None:
        key, _mems = session_with_memories(tools)
        other = json.loads(tools["new_session_key"]())["session_key"]
        proposal = json.loads(tools["propose_turn"](key, "my cat Miso", 8))
        before = events(service, key)
        with pytest.raises(gr.Error) as info:
            tools["answer_turn"](other, proposal["token"], "")
        assert "another session" in info.value.message and "&" not in info.value.message
        assert events(service, key) == before and events(service, other) == 0

    def test_an_id_that_was_not_proposed_is_refused(self, tools: dict, service: Service) -> None:
        key, _mems = session_with_memories(tools)
        proposal = json.loads(tools["propose_turn"](key, "my cat Miso", 2))
        before = events(service, key)
        with pytest.raises(gr.Error, match="was not proposed"):
            tools["answer_turn"](key, proposal["token"], "evt_" + "0" * 32)
        assert events(service, key) == before

    @pytest.mark.parametrize(("args", "match"), [(("", 8), "message"), (("hi", 51), "K 51"), (("hi", 0), "K 0")])
    def test_bad_proposals_are_refused(self, tools: dict, args: tuple, match: str) -> None:
        key, _mems = session_with_memories(tools)
        with pytest.raises(gr.Error, match=match):
            tools["propose_turn"](key, *args)


class TestAskWithConsentOn:
    def test_ask_on_a_session_with_ask_me_first_on_is_refused_in_plain_text_and_nothing_is_appended(
        self, tools: dict, service: Service
    ) -> None:
        key, _mems = session_with_memories(tools)
        set_consent(service.data_dir, session_id(key), True)
        before = events(service, key)
        with pytest.raises(gr.Error) as info:
            tools["ask"](key, "my cat Miso", 8)
        message = info.value.message
        assert "ask me first is on" in message and "propose_turn" in message and "answer_turn" in message
        assert "\n" not in message and "&" not in message
        assert events(service, key) == before
        proposal = json.loads(tools["propose_turn"](key, "my cat Miso", 8))  # the two steps still work
        assert verified(service, json.loads(tools["answer_turn"](key, proposal["token"], ""))["receipt"]) == "verified"

    def test_ask_on_another_session_is_not_affected(self, tools: dict, service: Service) -> None:
        key, _mems = session_with_memories(tools)
        other, _mems2 = session_with_memories(tools)
        set_consent(service.data_dir, session_id(key), True)
        assert json.loads(tools["ask"](other, "my cat Miso", 8))["answer"]


class TestRevoke:
    def test_revoke_keeps_it_out_of_the_next_answer_and_the_receipt_names_the_revocation(
        self, tools: dict, service: Service
    ) -> None:
        key, mems = session_with_memories(tools)
        gone = mems[0]
        out = json.loads(tools["revoke_memory"](key, gone["event_id"], "outdated"))
        assert out["action"] == "revoke" and out["seq"] == gone["seq"] and "not erasure" in out["note"]
        asked = json.loads(tools["ask"](key, "what does my cat Miso like?", 8))
        assert gone["event_id"] not in {m["event_id"] for m in asked["memories"]}
        revoked = asked["receipt"]  # the receipt's signed body names the revocation that kept it out
        body = service.verify(json.dumps(revoked).encode(), key)[0]
        assert body.verdict == "verified"
        exclusions = json.loads(tools["verify_receipt"](json.dumps(revoked), key))
        assert any(c["name"] == "ledger.exclusions" and c["status"] == "pass" for c in exclusions["checks"])
        back = json.loads(tools["restore_memory"](key, gone["event_id"]))
        assert back["action"] == "restore" and back["control_seq"] > out["control_seq"]
        again = json.loads(tools["ask"](key, "what does my cat Miso like?", 8))
        assert gone["event_id"] in {m["event_id"] for m in again["memories"]}

    @pytest.mark.parametrize("event_id", ["evt_" + "0" * 32, "999", "evt_nope"])
    def test_a_bad_event_is_refused_in_plain_text_and_nothing_is_appended(
        self, tools: dict, service: Service, event_id: str
    ) -> None:
        key, _mems = session_with_memories(tools)
        before = events(service, key)
        with pytest.raises(gr.Error) as info:
            tools["revoke_memory"](key, event_id)
        assert "&#x27;" not in info.value.message and info.value.message
        assert events(service, key) == before

    def test_restoring_what_is_not_revoked_is_refused(self, tools: dict, service: Service) -> None:
        key, mems = session_with_memories(tools)
        with pytest.raises(gr.Error, match="not revoked"):
            tools["restore_memory"](key, mems[0]["event_id"])


def test_search_memories_leaves_revoked_memories_out_unless_asked_and_names_the_revocation(tools: dict) -> None:
    key, mems = session_with_memories(tools)
    out = json.loads(tools["revoke_memory"](key, mems[0]["event_id"]))
    plain = json.loads(tools["search_memories"](key, "cat Miso", 8))["results"]
    assert mems[0]["event_id"] not in {h["event_id"] for h in plain} and len(plain) == 2
    shown = json.loads(tools["search_memories"](key, "cat Miso", 8, True))["results"]
    by_id = {h["event_id"]: h["revoked_by"] for h in shown}
    assert by_id[mems[0]["event_id"]] == out["control_seq"] and by_id[mems[1]["event_id"]] is None
