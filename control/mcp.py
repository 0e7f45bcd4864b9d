"""The visitor's controls as plain functions for MCP (issue 11): propose_turn, answer_turn, cancel_turn,
revoke_memory, restore_memory.

Each takes the app's Engine and the caller's *session id* (webui/mcp_tools.py derives it from the
caller's session key, as its other tools do, and turns what these raise into a tool error) and returns a
JSON-ready dict. They hold no rules: chat.consent and control.revocation do. Errors are the domain's
one-line exceptions — ConsentError / InputError (consent), ControlError (revoke/restore), TurnError.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from control.revocation import ControlResult, restore, revoke

_SPLIT = re.compile(r"[\s,;]+")


def approved_list(approved_ids: object) -> list[object]:
    """The approved ids as a list: an MCP client may send a list, or one string of ids separated by commas or spaces."""
    if approved_ids is None:
        return []
    if isinstance(approved_ids, str):
        text = approved_ids.strip().removeprefix("[").removesuffix("]")
        return [x.strip().strip('"') for x in _SPLIT.split(text) if x.strip().strip('"')]
    if isinstance(approved_ids, Iterable):
        return list(approved_ids)
    return [approved_ids]


def propose_turn(engine: Any, session: str, message: str, k: int = 8) -> dict[str, Any]:
    """Step 1 of an "ask me first" turn: the memories retrieval would hand the model and a one-time turn token.

    Nothing is stored in the ledger and nothing is sent to a model. The token is single-use, works only for
    this session and this proposal, and expires after 10 minutes. Each candidate names its event as `event_id`, as
    every other tool does, and its scores rounded (`shown_score`)."""
    out = dict(engine.propose(session, message, k).to_dict())
    out["session_id"] = out.pop("session")
    out["candidates"] = [
        {**{("event_id" if name == "id" else name): v for name, v in c.items()}, "score": shown_score(c["score"]),
         "relative": shown_score(c["relative"])}
        for c in out["candidates"]
    ]
    return out


SCORE_DIGITS = 4


def shown_score(value: float) -> float:
    """A score as a tool returns it: the value the ranking used, to 4 significant digits (`2.606e-06`, not the float
    noise `2.6055299539170510e-06`). The order is the ranking's own (tier, then score), never re-derived from this."""
    return float(f"{value:.{SCORE_DIGITS}g}")


def event_ref(value: object) -> object:
    """What forget, revoke, restore, history and correct take for a memory: its event id (`evt_…`) or its seq, as text
    or as a JSON integer (a bool is neither); anything else is passed on for the domain to refuse in its own words."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value.strip() if isinstance(value, str) else value


def answer_turn(engine: Any, session: str, token: str, approved_ids: object) -> dict[str, Any]:
    """Step 2: answer with only the approved memories (event ids from propose_turn; none is allowed)."""
    turn = engine.answer(token, approved_list(approved_ids), session=session)
    c = turn.completion
    consent = turn.body.get("consent", {})
    return {
        "answer": turn.answer,
        "provider": c.provider,
        "model": c.model,
        "fallback_reason": c.fallback_reason,
        "memories": [
            {"rank": m["rank"], "seq": m["event"]["seq"], "role": m["event"]["role"], "text": m["event"]["text"], "digest": m["event"]["digest"], "event_id": m["event"]["id"]}
            for m in turn.body["memories"]
        ],
        "approved": list(consent.get("approved", [])),
        "withheld": list(consent.get("withheld", [])),
        "excluded_revoked": [e["seq"] for e in turn.body.get("exclusions", {}).get("revoked", [])],
        "session_id": turn.body["session"],
        "receipt_id": turn.receipt_id,
        "receipt": turn.envelope,
    }


def cancel_turn(engine: Any, session: str, token: str) -> dict[str, Any]:
    """End an "ask me first" turn: nothing is sent to the model, nothing appended, no receipt."""
    engine.cancel(token, session=session)
    return {"cancelled": True, "session_id": session}


def _result(r: ControlResult) -> dict[str, Any]:
    return {
        "session_id": r.session,
        "action": r.action,
        "seq": r.seq,
        "event_id": r.event_id,
        "control_seq": r.control_seq,
        "control_id": r.control_id,
        "reason": r.reason,
        "note": "revoke is not erasure: the event stays in the ledger, unused; forget_memory destroys the words",
    }


def revoke_memory(engine: Any, session: str, event_id: object, reason: str = "") -> dict[str, Any]:
    """Take one memory out of retrieval from now on (a control event in the ledger); its words are kept, unused."""
    return _result(revoke(engine.data_dir, session, event_ref(event_id), reason or None, key=engine.key, stores=engine.stores))


def restore_memory(engine: Any, session: str, event_id: object, reason: str = "") -> dict[str, Any]:
    """Bring a revoked memory back into retrieval (another control event)."""
    return _result(restore(engine.data_dir, session, event_ref(event_id), reason or None, key=engine.key, stores=engine.stores))
