"""Each cited memory's state at the turn (pure): live, or superseded and by which record (docs/FORMAT.md §20).

A format-2 receipt may carry a third versioned addition, `states`:

    {"v": 1,
     "superseded": [{"rank", "seq", "id", "by": {"event": <supersession record, whole>, "proof": [...]}}],
     "excluded":   [{"seq", "id", "by": {"event": <supersession record, whole>, "proof": [...]}}]}

`superseded` lists the cited memories that were superseded when the memories were chosen (a question about
the past may be answered from them; the prompt marks each, template mre-prompt/v2); every cited memory not
listed is claimed live. `excluded` lists the superseded events retrieval left out that it would otherwise
have handed the model. Each names the supersession record in force (§19) and its inclusion proof.

"In force at the turn" means before the answer: the turn's own detector may supersede an older statement
after the question is appended and before the memories are chosen (the question "we've just moved to
Bristol — any cafés near me?" makes "I live in Leeds" dead for that very turn), so a record lies before the
answer, not necessarily before the question.

States v2 (issue 32) adds `earlier`: [{"rank", "seq", "id", "newer"}], each cited memory that was an earlier
statement of what the question asked about when a newer statement (seq `newer`, also among the memories) replaced
it, resolved at question time (facts.resolve: no record in the ledger). The prompt marks each (mre-prompt/v3).

Checked offline (`states.records`, `states.earlier`) and with the ledger (`ledger.states`). With the ledger, a format-2 receipt
without `states` is checked as claiming every cited memory live (§20, "A receipt without `states`").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ledger.event import Event, EventError, recompute_digest
from ledger.supersessions import supersession_of_record
from receipts.decisions import Row, _event_proof_problem
from receipts.prompt import TEMPLATE_V3, earlier_mark, superseded_mark

STATES_VERSION = 1
STATES_VERSION_2 = 2  # v1 plus `earlier` (issue 32)
STATES_VERSIONS = (STATES_VERSION, STATES_VERSION_2)
STATES_FIELDS = ("v", "superseded", "excluded")
STATES_FIELDS_2 = (*STATES_FIELDS, "earlier")
EARLIER_FIELDS = ("rank", "seq", "id", "newer")
SUPERSEDED_FIELDS = ("rank", "seq", "id", "by")
EXCLUDED_FIELDS = ("seq", "id", "by")
BY_FIELDS = ("event", "proof")
MAX_STATES = 50  # each list: at most the top K a turn retrieves


def states_part(
    *,
    superseded: Sequence[tuple[int, int, str, Event, Sequence[bytes]]],
    excluded: Sequence[tuple[int, str, Event, Sequence[bytes]]],
    earlier: Sequence[tuple[int, int, str, int]] = (),
) -> dict[str, Any]:
    """The body's `states` member: (rank, seq, id, its supersession record, the record's inclusion proof) for each
    superseded memory cited, and (seq, id, record, proof) for each superseded event retrieval left out; with
    `earlier` ((rank, seq, id, the newer statement's seq) for each cited earlier statement) states v2, else v1."""

    def by(record: Event, proof: Sequence[bytes]) -> dict[str, Any]:
        return {"event": record.to_dict(), "proof": [h.hex() for h in proof]}

    return {
        "v": STATES_VERSION,
        "superseded": [
            {"rank": rank, "seq": seq, "id": event_id, "by": by(rec, proof)}
            for rank, seq, event_id, rec, proof in sorted(superseded, key=lambda x: x[0])
        ],
        "excluded": [{"seq": seq, "id": event_id, "by": by(rec, proof)} for seq, event_id, rec, proof in sorted(excluded, key=lambda x: x[0])],
    } | (
        {"v": STATES_VERSION_2, "earlier": [{"rank": r, "seq": s, "id": i, "newer": n} for r, s, i, n in sorted(earlier)]} if earlier else {}
    )


def prompt_marks(body: Mapping[str, Any]) -> dict[int, str]:
    """rank -> the mark template mre-prompt/v2 gives that memory (what a verifier rebuilds the prompt with)."""
    if "states" not in body:
        return {}
    marks = {}
    for s in body["states"]["superseded"]:
        rec = s["by"]["event"]
        meta = rec.get("meta")
        new = meta.get("supersession", {}).get("new", {}) if isinstance(meta, dict) else {}
        new_seq = new.get("seq") if isinstance(new, dict) else None
        marks[s["rank"]] = superseded_mark(rec["ts"], new_seq if type(new_seq) is int else -1)
    said = {m["rank"]: m["event"]["ts"] for m in body["memories"]}
    for e in body["states"].get("earlier", []):
        if e["rank"] in said and e["rank"] not in marks:  # a rank out of range or listed twice: states.earlier fails
            marks[e["rank"]] = earlier_mark(said[e["rank"]], e["newer"])
    return marks


def _row(name: str, problems: list[str], ok: str, expected: str) -> Row:
    return (name, not problems, ok if not problems else "; ".join(problems), None if not problems else expected, "; ".join(problems) or None)


def check_states(body: Mapping[str, Any]) -> Row:
    """`states.records` (offline): each listed record is a well-formed supersession record (§19) of this session,
    before the answer, whose digest, chain link and inclusion in the signed tree verify, superseding exactly
    the event listed (seq and id); a `superseded` entry is the cited memory at its rank; an `excluded` one is
    not among the memories handed to the model; each list names a seq once, in order."""
    st = body["states"]
    cpb = body["checkpoint"]["body"]
    tree_size, root = cpb["tree_size"], bytes.fromhex(cpb["root"])
    answer_seq = body["response"]["event"]["seq"]
    memories = {m["rank"]: m["event"] for m in body["memories"]}
    cited = {ev["seq"] for ev in memories.values()}
    problems: list[str] = []
    entries = [(f"superseded memory#{s['rank']} (seq {s['seq']})", s) for s in st["superseded"]]
    entries += [(f"excluded seq {s['seq']}", s) for s in st["excluded"]]
    for key, items in (("rank", st["superseded"]), ("seq", st["excluded"])):
        order = [s[key] for s in items]
        if order != sorted(set(order)):
            problems.append(f"states.{'superseded' if key == 'rank' else 'excluded'}: {key}s are not distinct and ascending")
    for name, entry in entries:
        if "rank" in entry:
            mem = memories.get(entry["rank"])
            if mem is None or mem["seq"] != entry["seq"] or mem["id"] != entry["id"]:
                problems.append(f"{name}: is not the memory cited at rank {entry['rank']}")
        elif entry["seq"] in cited:
            problems.append(f"{name}: an excluded seq is among the memories handed to the model")
        problem = record_problem(body, entry, tree_size, root, answer_seq)
        if problem:
            problems.append(f"{name}: {problem}")
    n, m = len(st["superseded"]), len(st["excluded"])
    ok = f"{n} cited memory(ies) superseded and marked, {m} superseded event(s) left out, each by a supersession record in the signed tree; the other cited memories were live"
    return _row("states.records", problems, ok, "supersession records in the signed tree")


def check_earlier(body: Mapping[str, Any]) -> Row:
    """`states.earlier` (offline, states v2): the prompt template is mre-prompt/v3; each entry is the cited memory
    at its rank (same seq and id), a user statement, not also listed superseded; the statement replacing it
    (`newer`) is a user statement among the memories, newer than it (a greater seq) and before the answer; ranks are distinct and ascending. Resolved at
    question time, an earlier statement has no record in the ledger: what is checked is that the mark the prompt
    carried names a statement the model was handed with it."""
    st = body["states"]
    items = st["earlier"]
    memories = {m["rank"]: m["event"] for m in body["memories"]}
    by_seq = {ev["seq"]: ev for ev in memories.values()}
    superseded = {s["rank"] for s in st["superseded"]}
    answer_seq = body["response"]["event"]["seq"]
    problems: list[str] = []
    ranks = [e["rank"] for e in items]
    if ranks != sorted(set(ranks)):
        problems.append("states.earlier: ranks are not distinct and ascending")
    template = body["prompt"]["template"]
    if template != TEMPLATE_V3:  # v2 carries the marks with no word of what they mean; v1 none (prompt.hash fails)
        problems.append(f"states.earlier: the prompt template is {template}, and only {TEMPLATE_V3} tells the model what an earlier statement's mark means")
    for e in items:
        name = f"earlier memory#{e['rank']} (seq {e['seq']})"
        mem = memories.get(e["rank"])
        if mem is None:
            problems.append(f"{name}: rank {e['rank']} is not among the {len(memories)} memories")
            continue
        if mem["seq"] != e["seq"] or mem["id"] != e["id"]:
            problems.append(f"{name}: is not the memory cited at rank {e['rank']} (seq {mem['seq']}, {mem['id']})")
            continue
        if mem.get("role") != "user":
            problems.append(f"{name}: is not a user statement (role {mem.get('role')})")
        if e["rank"] in superseded:
            problems.append(f"{name}: is also listed superseded")
        newer = by_seq.get(e["newer"])
        if newer is None:
            problems.append(f"{name}: the statement replacing it (seq {e['newer']}) is not among the memories")
        elif newer.get("role") != "user":
            problems.append(f"{name}: the statement replacing it (seq {e['newer']}) is not a user statement")
        elif not e["seq"] < e["newer"] < answer_seq:
            problems.append(f"{name}: the statement replacing it (seq {e['newer']}) is not newer than it and before the answer (seq {answer_seq})")
    ok = f"{len(items)} cited memory(ies) marked as earlier statements, each replaced by a newer statement among the memories"
    return _row("states.earlier", problems, ok, "earlier statements among the memories, each with a newer one")


def record_problem(body: Mapping[str, Any], entry: Mapping[str, Any], tree_size: int, root: bytes, answer_seq: int) -> str | None:
    """Why the record an entry names is not a supersession of that entry in the signed tree, or None."""
    ev, proof = entry["by"]["event"], entry["by"]["proof"]
    what = supersession_of_record(ev)
    if what is None:
        return f"its record (seq {ev['seq']}) is not a supersession record"
    if what.old_seq != entry["seq"] or what.old_id != entry["id"]:
        return f"its record (seq {ev['seq']}) supersedes seq {what.old_seq} ({what.old_id}), not seq {entry['seq']} ({entry['id']})"
    if ev["session"] != body["session"]:
        return f"its record is in session {ev['session']}"
    if not ev["seq"] < answer_seq:
        return f"its record (seq {ev['seq']}) is not older than the answer (seq {answer_seq})"
    try:
        digest = recompute_digest(dict(ev))
    except EventError as exc:
        return f"its record's digest cannot be recomputed: {exc}"
    problem = _event_proof_problem(ev, proof, digest, tree_size, root)
    return None if problem is None else f"its record (seq {ev['seq']}): {problem}"


def _by_the_person(event_at: Callable[[int], dict[str, Any]], record_seq: int) -> bool:
    """Whether the supersession record at `record_seq` (the walk's list says it is one) counts: not when its `new` is
    not a user statement — only what the person said supersedes (§19), and the library folds no other record. Two
    lines read, only for a record that contradicts a live claim, so the check still costs what the receipt cites."""
    what = supersession_of_record(event_at(record_seq))
    return what is None or event_at(what.new_seq).get("role") == "user"


def check_ledger_states(
    body: Mapping[str, Any], verified: int, event_at: Callable[[int], dict[str, Any]], supersessions: Sequence[tuple[int, int]]
) -> Row:
    """`ledger.states` (with the ledger): each record the receipt names is in the ledger at its seq (same digest
    and id); every cited memory claimed live has no supersession record in the ledger before the answer, and
    every one claimed superseded has one (the one named).

    `supersessions` is the ledger's (record seq, superseded seq) of every supersession record among its `verified`
    events, ascending (the auditor's walk collects them: receipts/supersession_walk.py); `event_at` is read only
    for the records the receipt names, so the check costs what the receipt cites, not a scan to the answer. A
    format-2 receipt without `states` claims every cited memory live and names no record (§20)."""
    st = body.get("states")
    answer_seq = body["response"]["event"]["seq"]
    problems: list[str] = []
    named = [*st["superseded"], *st["excluded"]] if st is not None else []
    for entry in named:
        ev = entry["by"]["event"]
        name = f"the supersession of seq {entry['seq']} at seq {ev['seq']}"
        if ev["seq"] >= verified:
            problems.append(f"{name}: lies after the ledger's verified events ({verified})")
            continue
        stored = event_at(ev["seq"])
        try:
            digest = recompute_digest(stored).hex()
        except EventError as exc:
            problems.append(f"{name}: the stored event is unreadable: {exc}")
            continue
        if digest != ev["digest"] or stored.get("id") != ev["id"]:
            problems.append(f"{name}: the ledger holds no such record (ledger digest {digest[:16]}…, receipt {ev['digest'][:16]}…)")
    claimed = {s["seq"] for s in st["superseded"]} if st is not None else set()
    live = {m["event"]["seq"] for m in body["memories"]} - claimed
    any_live = bool(live)
    without = "" if st is not None else " (the receipt carries no states: every cited memory is claimed live)"
    end = min(answer_seq, verified)
    for record_seq, old_seq in supersessions:
        if record_seq >= end or not live:
            break
        if old_seq in live and _by_the_person(event_at, record_seq):
            problems.append(
                f"cited memory seq {old_seq} is claimed live{without}, but the ledger's record at seq {record_seq} superseded it before the answer (seq {answer_seq})"
            )
            live.discard(old_seq)
    if any_live and answer_seq > verified:
        problems.append(f"the answer (seq {answer_seq}) lies after the ledger's verified events ({verified}): live states not checked to it")
    n = len(body["memories"])
    if st is None:
        ok = f"the receipt carries no states and names no supersession: the ledger holds no record superseding any of the {n} cited memories before the answer"
    else:
        ok = f"the ledger holds each supersession named, and no other cited memory of the {n} was superseded before the answer"
    return _row("ledger.states", problems, ok, "states the ledger holds")
