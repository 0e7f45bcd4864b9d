"""Supersession records (pure): a newer statement supersedes an older one, on the record (issue 12).

A *supersession record* (docs/FORMAT.md §19) is an ordinary ledger event — role `system`, the fixed text
`[control record: supersede]`, which holds no word of any memory — whose meta is exactly

    {"supersession": {"v": 1, "new": {"seq", "id"}, "old": {"seq", "id"},
                      "decided_by": "visitor" | "rule:<name>" | "model:<id>",
                      "checked_by": null | "rule:<name>", "reason": string or null}}

It says the event `new` supersedes the earlier event `old` (one record per older event). `checked_by` is
the code rule that accepted a model's proposal: present exactly when `decided_by` is a model. The reason is
kept for good, also after either event is forgotten, so it never quotes a value: "residence changed", not
"Leeds → Bristol" (the quoting sentence a person reads is recomputed from the texts while they exist).

Like a revoke (§17) it is a *control record*: never indexed, never a memory, never erased.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ledger.controls import MAX_CONTROL_REASON, control_of
from ledger.event import EVENT_ID_RE

SUPERSESSION_VERSION = 1
SUPERSEDE_TEXT = "[control record: supersede]"
SUPERSESSION_FIELDS = ("v", "new", "old", "decided_by", "checked_by", "reason")
REF_FIELDS = ("seq", "id")
VISITOR = "visitor"
MAX_DECIDER = 200
RULE_RE = re.compile(r"rule:[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
MODEL_RE = re.compile(r"model:[A-Za-z0-9][A-Za-z0-9._:/@+-]*")


@dataclass(frozen=True, slots=True)
class SupersessionRecord:
    """What a supersession record says: `new_seq` supersedes `old_seq`, who decided, and why."""

    new_seq: int
    new_id: str
    old_seq: int
    old_id: str
    decided_by: str  # "visitor", "rule:<name>" or "model:<id>"
    checked_by: str | None  # the rule that accepted a model's proposal; None otherwise
    reason: str | None


def decider_problem(decided_by: object, checked_by: object) -> str | None:
    """Why (decided_by, checked_by) is not a record's pair, or None when it is."""
    if type(decided_by) is not str or len(decided_by) > MAX_DECIDER:
        return f"decided_by: expected 'visitor', 'rule:<name>' or 'model:<id>' of at most {MAX_DECIDER} characters"
    if decided_by != VISITOR and not RULE_RE.fullmatch(decided_by) and not MODEL_RE.fullmatch(decided_by):
        return f"decided_by {decided_by[:60]!r}: expected 'visitor', 'rule:<name>' or 'model:<id>'"
    if decided_by.startswith("model:"):
        if type(checked_by) is not str or len(checked_by) > MAX_DECIDER or not RULE_RE.fullmatch(checked_by):
            return f"checked_by: a model's proposal ({decided_by[:60]}) names the rule that accepted it, 'rule:<name>'"
    elif checked_by is not None:
        return f"checked_by: only a model's proposal is checked by a rule ({decided_by[:60]} decided itself)"
    return None


def supersession_meta(
    *, new_seq: int, new_id: str, old_seq: int, old_id: str, decided_by: str, checked_by: str | None = None, reason: str | None = None
) -> dict[str, Any]:
    """The meta of a supersession record (§19)."""
    return {
        "supersession": {
            "v": SUPERSESSION_VERSION,
            "new": {"seq": new_seq, "id": new_id},
            "old": {"seq": old_seq, "id": old_id},
            "decided_by": decided_by,
            "checked_by": checked_by,
            "reason": reason,
        }
    }


def _ref(value: object) -> tuple[int, str] | None:
    if type(value) is not dict or set(value) != set(REF_FIELDS):
        return None
    seq, event_id = value["seq"], value["id"]
    if type(seq) is not int or seq < 0 or type(event_id) is not str or not EVENT_ID_RE.fullmatch(event_id):
        return None
    return seq, event_id


def supersession_of(role: object, text: object, meta: object, own_seq: int | None = None) -> SupersessionRecord | None:
    """The record when the fields are exactly a supersession record's (§19), else None.

    The older event comes before the newer, and with `own_seq` the newer before the record itself."""
    if role != "system" or text != SUPERSEDE_TEXT or type(meta) is not dict or set(meta) != {"supersession"}:
        return None
    s = meta["supersession"]
    if type(s) is not dict or set(s) != set(SUPERSESSION_FIELDS) or type(s["v"]) is not int or s["v"] != SUPERSESSION_VERSION:
        return None
    new, old = _ref(s["new"]), _ref(s["old"])
    if new is None or old is None or not old[0] < new[0] or (own_seq is not None and not new[0] < own_seq) or old[1] == new[1]:
        return None
    if decider_problem(s["decided_by"], s["checked_by"]) is not None:
        return None
    reason = s["reason"]
    if reason is not None and (type(reason) is not str or not reason or len(reason) > MAX_CONTROL_REASON):
        return None
    return SupersessionRecord(new[0], new[1], old[0], old[1], s["decided_by"], s["checked_by"], reason)


def supersession_of_record(ev: Mapping[str, Any]) -> SupersessionRecord | None:
    """supersession_of over a stored line's (or a receipt's whole-event) fields; None for an erased line."""
    if "text" not in ev or "meta" not in ev:
        return None
    seq = ev.get("seq")
    return supersession_of(ev.get("role"), ev.get("text"), ev.get("meta"), seq if type(seq) is int else None)


def is_control_record(role: object, text: object, meta: object, own_seq: int | None = None) -> bool:
    """A revoke or restore (§17) or a supersession record (§19): a decision about memories, never one itself."""
    return control_of(role, text, meta, own_seq) is not None or supersession_of(role, text, meta, own_seq) is not None
