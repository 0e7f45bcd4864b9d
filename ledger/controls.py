"""What a revoke or restore record is (FORMAT §17): its fields, its text, and the parse that says whether a ledger line
is exactly one. Pure: the ledger needs it to refuse such lines in an import; receipts/decisions.py checks them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CONTROL_VERSION = 1

REVOKE, RESTORE = "revoke", "restore"

CONTROL_TEXTS = {REVOKE: "[control record: revoke]", RESTORE: "[control record: restore]"}

CONTROL_FIELDS = ("v", "action", "seq", "id", "reason")

MAX_CONTROL_REASON = 1000

def control_meta(action: str, seq: int, event_id: str, reason: str | None) -> dict[str, Any]:
    """The meta of a control event (§17)."""
    return {"control": {"v": CONTROL_VERSION, "action": action, "seq": seq, "id": event_id, "reason": reason}}

def control_of(role: object, text: object, meta: object, own_seq: int | None = None) -> tuple[str, int, str, str | None] | None:
    """(action, seq, id, reason) when the fields are exactly a control event's (§17), else None.

    With `own_seq`, the target must be an earlier event (a control event names what came before it)."""
    if role != "system" or type(meta) is not dict or set(meta) != {"control"}:
        return None
    c = meta["control"]
    if type(c) is not dict or set(c) != set(CONTROL_FIELDS) or c["v"] != CONTROL_VERSION or type(c["v"]) is not int:
        return None
    action, seq, event_id, reason = c["action"], c["seq"], c["id"], c["reason"]
    if action not in CONTROL_TEXTS or text != CONTROL_TEXTS[action]:
        return None
    if type(seq) is not int or seq < 0 or (own_seq is not None and seq >= own_seq):
        return None
    if type(event_id) is not str or not event_id.startswith("evt_"):
        return None
    if reason is not None and (type(reason) is not str or len(reason) > MAX_CONTROL_REASON):
        return None
    return action, seq, event_id, reason

def control_of_record(ev: Mapping[str, Any]) -> tuple[str, int, str, str | None] | None:
    """control_of over a stored line's (or a receipt's whole-event) fields; None for an erased line."""
    if "text" not in ev or "meta" not in ev:
        return None
    seq = ev.get("seq")
    return control_of(ev.get("role"), ev.get("text"), ev.get("meta"), seq if type(seq) is int else None)
