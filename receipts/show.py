"""What a receipt says, as a person reads it (pure: a parsed body → a summary → text).

`show` verifies nothing: it reads the body of a well-formed receipt (one that
receipts.body.parse_receipt accepted) and lays it out. Whether any of it is
true is `python -m receipts verify`'s job. Every text in a receipt may come
from a visitor, so `render_text` neutralises control characters and terminal
escape sequences (ESC prints as the four characters ``\\x1b``).

The summary's keys are stable (docs/guides/cli.md, "Reading a receipt": `--json`). Each memory
row has a `state`: "cited" for every format-1 row. A format-2 summary gives
every event row (question, memories, answer) a `state` and its signed
`commit`: "cited" when the copy discloses its text, "withheld" when it does not,
"erased" when the caller knows the ledger erased it too (`erased=`); a withheld
or erased row's `text` is null and nothing else stands in for it.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection, Mapping, Sequence
from typing import Any

SHOW_VERSION = 1
TEXT_LIMIT = 200  # characters of a memory or answer text shown in text mode (JSON keeps all)
NOT_VERIFIED = (
    "show does not verify anything; run `python -m receipts verify RECEIPT --trust PUBKEY [--data DATA_DIR]` for that"
)


CITED, WITHHELD, ERASED = "cited", "withheld", "erased"


def _event_row(event: Mapping[str, Any], erased: Collection[int] = (), v2: bool = False) -> dict[str, Any]:
    row = {
        "seq": event["seq"],
        "id": event["id"],
        "role": event["role"],
        "ts": event["ts"],
        "text": event.get("text"),
        "digest": event["digest"],
    }
    if v2:
        state = CITED if "text" in event else ERASED if event["seq"] in erased else WITHHELD
        row.update(state=state, commit=event["commit"])
    return row


def summarize(body: Mapping[str, Any], *, erased: Collection[int] = ()) -> dict[str, Any]:
    """The receipt body (as parse_receipt returns it: Receipt.body) as a summary with stable keys.

    `erased`: seqs the caller knows the ledger erased (a format-2 row without a disclosure is
    then "erased" rather than "withheld"); show itself never reads a ledger."""
    response = body["response"]
    cp = body["checkpoint"]
    v2 = body["v"] == 2
    memories = [
        {"rank": m["rank"], "state": CITED, **_event_row(m["event"], erased, v2)} for m in body["memories"]
    ]
    out = {
        "show": SHOW_VERSION,
        "verified": False,
        "note": NOT_VERIFIED,
        "receipt_id": body["receipt_id"],
        "format": body["v"],
        "issued_at": body["issued_at"],
        "session": body["session"],
        "k": body["k"],
        "retrieval": body["retrieval"],
        "question": _event_row(body["query"]["event"], erased, v2),
        "memories": memories,
        "answer": {
            **_event_row(response["event"], erased, v2),
            "sha256": response["sha256"],
            "provider": response["provider"],
            "model": response["model"],
            "fallback_reason": response["fallback_reason"],
        },
        "prompt": {"template": body["prompt"]["template"], "sha256": body["prompt"]["sha256"]},
        "checkpoint": {
            "tree_size": cp["body"]["tree_size"],
            "root": cp["body"]["root"],
            "chain_head": cp["body"]["chain_head"],
            "issued_at": cp["body"]["issued_at"],
            "key_id": cp["key_id"],
        },
    }
    # format 2's additions (FORMAT.md §17, §18, §25), only when the receipt carries them
    if "semantic" in body:
        sm = body["semantic"]
        out["semantic"] = {"method": sm["method"], "model": sm["model"], "model_sha256": sm["model_sha256"]}
    if "consent" in body:
        c = body["consent"]
        approved = set(c["approved"])
        out["consent"] = {
            "decided_by": c["decided_by"],
            "proposed_at": c["proposed_at"],
            "proposed": [
                {"rank": p["rank"], "seq": p["event"]["seq"], "id": p["event"]["id"], "role": p["event"]["role"], "ts": p["event"]["ts"],
                 "digest": p["event"]["digest"], "commit": p["event"]["commit"], "decision": "approved" if p["event"]["seq"] in approved else "withheld"}
                for p in c["proposed"]
            ],
        }
    if "exclusions" in body:
        out["exclusions"] = [
            {"seq": e["seq"], "id": e["id"], "control_seq": e["control"]["event"]["seq"], "control_ts": e["control"]["event"]["ts"],
             "reason": e["control"]["event"].get("meta", {}).get("control", {}).get("reason")}
            for e in body["exclusions"]["revoked"]
        ]
    if "states" in body:
        out["states"] = state_rows(body["states"])
    return out


def state_rows(states: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """A body's `states` (FORMAT.md §20) as the summary's rows: "superseded" (each cited memory superseded at the
    turn, by rank) and "excluded"; each names the statement that replaced it (`by_seq`, None when the record does
    not say) and the record in force. The web app's stamps read the state through this too. States v2 adds
    "earlier" (issue 32): each cited memory that was an earlier statement, by rank, and the newer statement's seq."""
    rows = {name: [_state_row(e) for e in states[name]] for name in ("superseded", "excluded")}
    if "earlier" in states:
        rows["earlier"] = [{"rank": e["rank"], "seq": e["seq"], "id": e["id"], "newer": e["newer"]} for e in states["earlier"]]
    return rows


def earlier_words(said: str, newer: int) -> str:
    """How a receipt reads an earlier statement (FORMAT.md §20, states v2), in the CLI and the web app alike."""
    return f"earlier statement (said {said}), replaced by seq {newer}"


def _state_row(e: Mapping[str, Any]) -> dict[str, Any]:
    """One entry of `states` (FORMAT.md §20): the statement, and the supersession record in force."""
    rec = e["by"]["event"]
    s = rec.get("meta", {}).get("supersession", {}) if isinstance(rec.get("meta"), dict) else {}
    new = s.get("new", {}) if isinstance(s.get("new"), dict) else {}
    row = {"seq": e["seq"], "id": e["id"], "record_seq": rec["seq"], "record_ts": rec["ts"], "by_seq": new.get("seq"), "by_id": new.get("id"),
           "decided_by": s.get("decided_by"), "checked_by": s.get("checked_by"), "reason": s.get("reason")}
    return {"rank": e["rank"], **row} if "rank" in e else row


def neutralise(text: str) -> str:
    """`text` with every control or format character (C0, DEL, C1, bidi overrides, …) and the
    backslash written as a visible escape, so a terminal shows it and acts on none of it."""
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            n = ord(ch)
            out.append(f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}")
        else:
            out.append(ch)
    return "".join(out)


def shorten(text: str, limit: int = TEXT_LIMIT) -> str:
    """The first `limit` characters of the neutralised text, with a marker saying how much was cut."""
    safe = neutralise(text)
    if len(safe) <= limit:
        return safe
    return f"{safe[:limit]}… [{len(safe) - limit} more characters; --json has the full text]"


def _quoted(text: str | None, row: Mapping[str, Any] | None = None) -> str:
    if text is None:
        state = (row or {}).get("state", WITHHELD)
        commit = str((row or {}).get("commit", ""))[:16]
        why = "erased from the ledger" if state == ERASED else "withheld from this copy"
        return f"[{why}: not disclosed; only its commitment {commit}… is signed]"
    return f"“{shorten(text)}”"


def _state_lines(states: Mapping[str, Any], mems: Sequence[Mapping[str, Any]]) -> list[str]:
    n = neutralise

    def why(e: Mapping[str, Any]) -> str:
        checked = f", checked by {n(str(e['checked_by']))}" if e["checked_by"] else ""
        reason = f", reason “{shorten(str(e['reason']))}”" if e["reason"] else ""
        return f"superseded by seq {e['by_seq']} (record at seq {e['record_seq']}, {n(e['record_ts'])}; decided by {n(str(e['decided_by']))}{checked}{reason})"

    sup, out = states["superseded"], states["excluded"]
    cited = len(mems)
    if "earlier" not in states:
        lines = ["", f"memory states at the turn: {cited - len(sup)} live, {len(sup)} superseded (marked in the prompt)"]
        lines += [f"  memory#{e['rank']}  seq {e['seq']}: {why(e)}" for e in sup]
    else:
        was, said = states["earlier"], {m["rank"]: m["ts"] for m in mems}
        lines = ["", f"memory states at the turn: {cited - len(sup) - len(was)} live, {len(sup)} superseded, "
                     f"{len(was)} earlier statement(s) (marked in the prompt)"]
        marked = [(e["rank"], f"  memory#{e['rank']}  seq {e['seq']}: {why(e)}") for e in sup]
        marked += [(e["rank"], f"  memory#{e['rank']}  seq {e['seq']}: {earlier_words(n(str(said.get(e['rank'], '?'))), e['newer'])}") for e in was]
        lines += [line for _, line in sorted(marked)]
    if out:
        lines.append(f"left out of retrieval because superseded: {len(out)}")
        lines += [f"  seq {e['seq']} ({n(e['id'])}): {why(e)}" for e in out]
    return lines


def render_text(summary: Mapping[str, Any]) -> str:
    """The summary as a person reads it; every visitor-controlled text neutralised."""
    n = neutralise
    q = summary["question"]
    a = summary["answer"]
    cp = summary["checkpoint"]
    mems = summary["memories"]
    lines = [
        f"receipt {n(summary['receipt_id'])} (format {summary['format']}), issued {n(summary['issued_at'])}",
        f"session {n(summary['session'])}",
        "",
        f"the question (seq {q['seq']}, {n(q['role'])}, {n(q['ts'])}):",
        f"  {_quoted(q['text'], q)}",
        "",
        f"memories handed to the model: {len(mems)} (asked for up to {summary['k']}, retrieval {n(summary['retrieval'])})",
    ]
    if "semantic" in summary:  # FORMAT.md §25: the search was hybrid
        sm = summary["semantic"]
        lines.append(f"searched by words and by meaning: {n(sm['method'])}, model {n(sm['model'])} (sha256 {n(sm['model_sha256'])})")
    if not mems:
        lines.append("  (none)")
    for m in mems:
        lines.append(
            f"  memory#{m['rank']}  seq {m['seq']}, {n(m['role'])}, {n(m['ts'])}, digest {n(m['digest'])[:12]}"
        )
        lines.append(f"      {_quoted(m['text'], m)}")
    if "consent" in summary:
        c = summary["consent"]
        props = c["proposed"]
        withheld = [p for p in props if p["decision"] == "withheld"]
        lines.append("")
        lines.append(
            f"a person decided (ask me first; proposed at {n(c['proposed_at'])}, decided by {n(c['decided_by'])}): "
            f"{len(props)} proposed, {len(props) - len(withheld)} approved, {len(withheld)} withheld"
        )
        for p in props:
            tail = "approved" if p["decision"] == "approved" else f"withheld — its words are not in this receipt, only its commitment {n(p['commit'])[:16]}…"
            lines.append(f"  proposed#{p['rank']}  seq {p['seq']}, {n(p['role'])}, {n(p['ts'])}: {tail}")
    if "exclusions" in summary:
        lines.append("")
        lines.append(f"left out of retrieval because revoked: {len(summary['exclusions'])}")
        for e in summary["exclusions"]:
            why = f", reason “{shorten(e['reason'])}”" if e["reason"] else ""
            lines.append(f"  seq {e['seq']} ({n(e['id'])}): excluded because of the revocation at seq {e['control_seq']} ({n(e['control_ts'])}{why})")
    if "states" in summary:
        lines += _state_lines(summary["states"], mems)
    who = f"{n(a['provider'])}/{n(a['model'])}"
    if a["fallback_reason"] is not None:
        who += f" (offline fallback: {shorten(a['fallback_reason'])})"
    lines += [
        "",
        f"the answer (seq {a['seq']}, {n(a['ts'])}), from {who}:",
        f"  {_quoted(a['text'], a)}",
        f"  sha256 {n(a['sha256'])[:16]}…",
        "",
        f"checkpoint: {cp['tree_size']} events, root {n(cp['root'])[:16]}…, signed by {n(cp['key_id'])} at {n(cp['issued_at'])}",
        "",
        f"note: {summary['note']}",
    ]
    return "\n".join(lines)
