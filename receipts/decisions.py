"""The visitor's decisions on the record (pure): control events, and what a receipt says of them.

A *control event* (docs/FORMAT.md §17) is an ordinary ledger event — role `system`, a fixed text
that holds no word of any memory, meta `{"control": {"v": 1, "action", "seq", "id", "reason"}}` —
that takes the event at `seq` out of retrieval (`revoke`) or brings it back (`restore`).

A format-2 receipt may carry two versioned additions (§17, §18), each checked here:
- `exclusions`: the revoked events retrieval would otherwise have handed the model, each with the
  revocation in force (the control event whole, and its inclusion proof in the signed tree);
- `consent`: the memories proposed to a person, which they approved and which they withheld
  (withheld ones by hashed fields and commitment only), and that a person decided.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ledger.event import EventError, chain_link, recompute_digest
from receipts.merkle import ProofError, leaf_hash, verify_inclusion

CONTROL_VERSION = 1
REVOKE, RESTORE = "revoke", "restore"
CONTROL_TEXTS = {REVOKE: "[control record: revoke]", RESTORE: "[control record: restore]"}
CONTROL_FIELDS = ("v", "action", "seq", "id", "reason")
MAX_CONTROL_REASON = 1000
EXCLUSIONS_VERSION = 1
CONSENT_VERSION = 1
DECIDED_BY_PERSON = "person"
EXCLUSION_FIELDS = ("seq", "id", "control")
EXCLUSIONS_FIELDS = ("v", "revoked")
CONSENT_FIELDS = ("v", "decided_by", "proposed_at", "proposed", "approved", "withheld")
MAX_EXCLUSIONS = 50  # at most the top K a turn would have retrieved


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


# -- checking a receipt's additions (rows are (name, ok, message, expected, found)) ---------------------
Row = tuple[str, bool, str, str | None, str | None]


def _event_proof_problem(ev: Mapping[str, Any], proof: Sequence[str], digest: bytes, tree_size: int, root: bytes) -> str | None:
    if digest.hex() != ev["digest"]:
        return f"the digest does not recompute (signed {ev['digest'][:16]}…, recomputed {digest.hex()[:16]}…)"
    if chain_link(bytes.fromhex(ev["prev"]), digest).hex() != ev["chain"]:
        return "the chain hash does not link prev and digest"
    try:
        if ev["seq"] >= tree_size:
            raise ProofError(f"leaf {ev['seq']} is outside the checkpoint's tree of size {tree_size}")
        verify_inclusion(ev["seq"], tree_size, leaf_hash(digest), [bytes.fromhex(h) for h in proof], root)
    except ProofError as exc:
        return f"not in the signed tree: {exc}"
    return None


def check_exclusions(body: Mapping[str, Any]) -> Row:
    """`exclusions.records` (offline): each excluded seq names a revocation that is a well-formed control event
    of this session, whose digest, chain link and inclusion in the signed tree verify, revoking exactly that
    seq and id, older than the question; no excluded seq is among the memories or the proposed ones."""
    ex = body["exclusions"]
    cpb = body["checkpoint"]["body"]
    tree_size, root = cpb["tree_size"], bytes.fromhex(cpb["root"])
    query_seq = body["query"]["event"]["seq"]
    used = {m["event"]["seq"] for m in body["memories"]}
    if "consent" in body:
        used |= {p["event"]["seq"] for p in body["consent"]["proposed"]}
    problems = []
    last = -1
    for i, entry in enumerate(ex["revoked"]):
        name = f"exclusion {i + 1} (seq {entry['seq']})"
        ev, proof = entry["control"]["event"], entry["control"]["proof"]
        if entry["seq"] <= last:
            problems.append(f"{name}: excluded seqs are not distinct and ascending")
        last = entry["seq"]
        what = control_of_record(ev)
        if what is None:
            problems.append(f"{name}: its control event (seq {ev['seq']}) is not a control record")
            continue
        action, seq, event_id, _reason = what
        if action != REVOKE or seq != entry["seq"] or event_id != entry["id"]:
            problems.append(f"{name}: its control event (seq {ev['seq']}) is a {action} of seq {seq} ({event_id}), not a revoke of seq {entry['seq']} ({entry['id']})")
        if ev["session"] != body["session"]:
            problems.append(f"{name}: its control event is in session {ev['session']}")
        if not ev["seq"] < query_seq:
            problems.append(f"{name}: its control event (seq {ev['seq']}) is not older than the question (seq {query_seq})")
        if entry["seq"] in used:
            problems.append(f"{name}: an excluded seq is among the memories handed to the model or proposed")
        try:
            digest = recompute_digest(dict(ev))
        except EventError as exc:
            problems.append(f"{name}: its control event's digest cannot be recomputed: {exc}")
            continue
        problem = _event_proof_problem(ev, proof, digest, tree_size, root)
        if problem:
            problems.append(f"{name}: its control event (seq {ev['seq']}): {problem}")
    n = len(ex["revoked"])
    ok_msg = f"{n} revoked event(s) excluded from retrieval, each by a revocation in the signed tree"
    return ("exclusions.records", not problems, ok_msg if not problems else "; ".join(problems), None if not problems else "well-formed revocations in the signed tree", "; ".join(problems) or None)


def check_ledger_exclusions(body: Mapping[str, Any], verified: int, event_at: Callable[[int], dict[str, Any]]) -> Row:
    """`ledger.exclusions` (with the ledger): each revocation the receipt names is in the ledger at its seq
    with the same recomputed digest and id, names the event the ledger holds at the excluded seq, and was
    still in force when the question was asked (no restore of that seq between it and the question)."""
    query_seq = body["query"]["event"]["seq"]
    problems = []
    entries = body["exclusions"]["revoked"]
    restored: dict[int, int] = {}
    starts = [e["control"]["event"]["seq"] for e in entries]
    if entries and min(starts) < verified:
        wanted = {e["seq"] for e in entries}
        for s in range(min(starts) + 1, min(query_seq, verified)):
            what = control_of_record(event_at(s))
            if what is not None and what[0] == RESTORE and what[1] in wanted:
                restored[what[1]] = s  # ascending: the last restore before the question
    for entry in entries:
        ev = entry["control"]["event"]
        c = ev["seq"]
        name = f"the revocation of seq {entry['seq']} at control seq {c}"
        if c >= verified or entry["seq"] >= verified:
            problems.append(f"{name}: lies after the ledger's verified events ({verified})")
            continue
        stored = event_at(c)
        try:
            digest = recompute_digest(stored).hex()
        except EventError as exc:
            problems.append(f"{name}: the stored event is unreadable: {exc}")
            continue
        if digest != ev["digest"] or stored.get("id") != ev["id"]:
            problems.append(f"{name}: the ledger holds no such control event (ledger digest {digest[:16]}…, receipt {ev['digest'][:16]}…)")
            continue
        if event_at(entry["seq"]).get("id") != entry["id"]:
            problems.append(f"{name}: the ledger's event at seq {entry['seq']} has another id")
        r = restored.get(entry["seq"])
        if r is not None and r > c:
            problems.append(f"{name}: was no longer in force at the question (seq {query_seq}): restored at seq {r}")
    n = len(entries)
    msg = f"the ledger holds each of the {n} revocation(s) named, in force when the question was asked"
    return ("ledger.exclusions", not problems, msg if not problems else "; ".join(problems), None if not problems else "revocations the ledger holds", "; ".join(problems) or None)


def check_consent(body: Mapping[str, Any]) -> list[Row]:
    """`consent.proposed`, `consent.decision` and `consent.prompt` (offline; §18)."""
    consent = body["consent"]
    cpb = body["checkpoint"]["body"]
    tree_size, root = cpb["tree_size"], bytes.fromhex(cpb["root"])
    query_seq = body["query"]["event"]["seq"]
    proposed = consent["proposed"]
    rows: list[Row] = []
    # the proposed memories: ranks, order, and each in the signed tree
    problems = []
    ranks = [p["rank"] for p in proposed]
    if ranks != list(range(1, len(proposed) + 1)):
        problems.append(f"proposed ranks are {ranks}, expected 1..{len(proposed)}")
    if len(proposed) > body["k"]:
        problems.append(f"{len(proposed)} proposed memories exceed k={body['k']}")
    seqs = [p["event"]["seq"] for p in proposed]
    if len(set(seqs)) != len(seqs):
        problems.append("a memory is proposed twice")
    for p in proposed:
        ev = p["event"]
        name = f"proposed#{p['rank']} (seq {ev['seq']})"
        if ev["session"] != body["session"]:
            problems.append(f"{name}: in session {ev['session']}")
        if not ev["seq"] < query_seq:
            problems.append(f"{name}: not older than the question (seq {query_seq})")
        try:
            digest = recompute_digest(dict(ev))  # from its hashed fields and `commit` (an erased-form record)
        except EventError as exc:
            problems.append(f"{name}: {exc}")
            continue
        problem = _event_proof_problem(ev, p["proof"], digest, tree_size, root)
        if problem:
            problems.append(f"{name}: {problem}")
    ok = f"{len(proposed)} proposed memories, each in the signed tree by its hashed fields and commitment"
    rows.append(("consent.proposed", not problems, ok if not problems else "; ".join(problems), None if not problems else "proposed memories in the signed tree", "; ".join(problems) or None))
    # the decision: approved and withheld split the proposal, and a person made it
    approved, withheld = consent["approved"], consent["withheld"]
    problems = []
    if consent["decided_by"] != DECIDED_BY_PERSON:
        problems.append(f"decided_by is {consent['decided_by']!r}, expected {DECIDED_BY_PERSON!r}")
    if len(set(approved)) != len(approved) or len(set(withheld)) != len(withheld):
        problems.append("a seq is listed twice")
    both = sorted(set(approved) & set(withheld))
    if both:
        problems.append(f"seq {both[0]} is both approved and withheld")
    if sorted(set(approved) | set(withheld)) != sorted(set(seqs)):
        problems.append(f"approved {sorted(approved)} and withheld {sorted(withheld)} are not exactly the proposed seqs {sorted(seqs)}")
    ok = f"a person decided: {len(approved)} approved, {len(withheld)} withheld of {len(proposed)} proposed"
    rows.append(("consent.decision", not problems, ok if not problems else "; ".join(problems), None if not problems else "approved + withheld = proposed", "; ".join(problems) or None))
    # the prompt: exactly the approved memories, in proposal order, as proposed
    problems = []
    memories = {m["event"]["seq"]: m["event"] for m in body["memories"]}
    by_seq = {p["event"]["seq"]: p["event"] for p in proposed}
    for s in approved:
        if s not in memories:
            problems.append(f"approved memory seq {s} is missing from the prompt")
    for s in withheld:
        if s in memories:
            problems.append(f"withheld memory seq {s} is in the prompt")
    for s, ev in memories.items():
        if s not in approved and s not in withheld:
            problems.append(f"memory seq {s} in the prompt was not approved")
        elif s in by_seq and {k: ev.get(k) for k in by_seq[s]} != by_seq[s]:
            problems.append(f"memory seq {s} in the prompt is not the event proposed at that seq")
    order = [s for s in seqs if s in approved]
    if not problems and [m["event"]["seq"] for m in body["memories"]] != order:
        problems.append(f"the prompt's memories {[m['event']['seq'] for m in body['memories']]} are not the approved ones in proposal order {order}")
    ok = f"the prompt (its hash) covers exactly the {len(approved)} approved memories and none of the withheld"
    rows.append(("consent.prompt", not problems, ok if not problems else "; ".join(problems), None if not problems else "memories = approved", "; ".join(problems) or None))
    return rows
