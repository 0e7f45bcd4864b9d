"""The Verify tab's "What this receipt says" panel (pure: a receipts.show summary → Markdown).

Every text in a receipt may be a visitor's (a memory, the question, the answer,
even the ids of a forged upload): all of it goes through `md`, which flattens it
to one line, HTML-escapes it and escapes Markdown punctuation. The panel says
what the receipt claims; the verdict below it says whether that holds.

Each memory row has a `state` (receipts.show): "cited" rows carry their text; a
format-2 receipt may mark a row "withheld" (its text left out of this copy) or
"erased" (forgotten since), with no text — those are shown as such, never as an
empty quote. A memory the receipt's `states` lists as superseded when it was handed
to the model (issue 12) says so after its text, naming the seq that replaced it; one it
lists as an earlier statement (states v2, issue 32) says when it was said and which seq replaced it.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import Any

from receipts.body import MalformedReceipt, parse_receipt
from receipts.show import earlier_words, summarize
from webui.text import md, short

log = logging.getLogger("webui")

PANEL_TITLE = "What this receipt says"
TAMPERED_TITLE = "What the tampered copy says"
TEXT_LIMIT = 300  # characters of each text shown; `python -m receipts show --json` has them whole
# A row's state → how its missing text is shown.
NO_TEXT = {"withheld": "[withheld]", "erased": "[forgotten]"}
UNREADABLE = "_This receipt could not be laid out here; `python -m receipts show RECEIPT` reads it._\n\n---\n\n"


def _field(row: Mapping[str, Any], name: str) -> str:
    value = row.get(name)
    return "?" if value is None else md(str(value))


def _when(row: Mapping[str, Any]) -> str:
    return f"seq {_field(row, 'seq')}, {_field(row, 'role')}, {_field(row, 'ts')}"


def _text(row: Mapping[str, Any]) -> str:
    """The row's text, quoted; a withheld or forgotten row (no text) says so instead."""
    state = str(row.get("state") or "cited")
    text = row.get("text")
    if state in NO_TEXT or not isinstance(text, str):
        return f"**{NO_TEXT.get(state, f'[{md(state)}]' if state != 'cited' else '[no text]')}**"
    return f"“{md(text, TEXT_LIMIT)}”"


def _digest(row: Mapping[str, Any]) -> str:
    d = row.get("digest")
    return f", digest {md(short(d))}" if isinstance(d, str) else ""


def _superseded(entry: Mapping[str, Any] | None) -> str:
    """After a cited memory's text: that it was superseded when it was handed to the model, and by which seq (the
    receipt's `states`, issue 12); "" for a memory the receipt claims live."""
    if entry is None:
        return ""
    return f" (superseded at that turn by seq {_field(entry, 'by_seq')})"


def _earlier(entry: Mapping[str, Any] | None, said: Any) -> str:
    """After a cited memory's text: that it was an earlier statement of what the question asked, when it was said
    and which newer statement replaced it (the receipt's `states.earlier`, issue 32); "" otherwise."""
    if entry is None:
        return ""
    return f" ({md(earlier_words(str(said), entry.get('newer', '?')))})"


def panel_markdown(summary: Mapping[str, Any], title: str = PANEL_TITLE) -> str:
    """The summary as a short Markdown panel: when, session, the question, memory#1…K, the answer, the checkpoint."""
    q, a, cp = summary["question"], summary["answer"], summary["checkpoint"]
    mems = summary["memories"]
    lines = [
        f"### {md(title)}",
        f"Receipt {_field(summary, 'receipt_id')}, issued {_field(summary, 'issued_at')}, "
        f"session {_field(summary, 'session')}. *This panel reads the receipt; the checks below say whether it holds.*",
        "",
        f"**The question** ({_when(q)}): {_text(q)}",
        "",
        f"**Memories handed to the model** ({len(mems)} of up to {_field(summary, 'k')}):"
        if mems
        else "**Memories handed to the model:** none",
    ]
    if mems:
        lines.append("")
    dead = {str(e.get("rank")): e for e in summary.get("states", {}).get("superseded", [])}
    was = {str(e.get("rank")): e for e in summary.get("states", {}).get("earlier", [])}
    for m in mems:
        rank = _field(m, "rank")
        state = str(m.get("state") or "cited")
        tag = "" if state == "cited" else f" — {md(state)}"
        superseded = _superseded(dead.get(str(m.get("rank")))) + _earlier(was.get(str(m.get("rank"))), m.get("ts", "?"))
        lines.append(f"{rank}. memory\\#{rank} ({_when(m)}{_digest(m)}{tag}): {_text(m)}{superseded}")
    who = f"{_field(a, 'provider')}/{_field(a, 'model')}"
    if a.get("fallback_reason") is not None:
        who += f" (offline fallback: {md(str(a['fallback_reason']), TEXT_LIMIT)})"
    sha = a.get("sha256")
    sha_part = f", sha256 {md(short(sha))}" if isinstance(sha, str) else ""
    lines += [
        "",
        f"**The answer** ({_when(a)}, from {who}{sha_part}): {_text(a)}",
        "",
        f"**Checkpoint:** {_field(cp, 'tree_size')} events, root {md(short(str(cp.get('root', '?'))))}, "
        f"signed by {_field(cp, 'key_id')} at {_field(cp, 'issued_at')}",
    ]
    return "\n".join(lines)


def panel_for(raw: bytes, title: str = PANEL_TITLE, *, erased: Collection[int] = ()) -> str:
    """The panel for a receipt file's bytes, followed by a rule; "" when they are not a well-formed receipt
    (the verdict below then says why). `erased`: the cited seqs the ledger erased (known only when the receipt
    was checked against it): their rows read [forgotten] rather than [withheld]. A well-formed receipt the
    panel cannot lay out gets a one-line note: the verification below it still runs."""
    try:
        body = parse_receipt(raw).body
    except MalformedReceipt:
        return ""
    try:
        summary = summarize(body, erased=erased)
        return panel_markdown(summary, title) + "\n\n---\n\n"
    except Exception as exc:  # noqa: BLE001 - the panel is a reading aid: it never hides the verdict
        # the class only: a message (or a traceback's) could quote a field of the receipt, a memory's words
        log.error("receipt panel: could not lay out the receipt (%s)", type(exc).__name__)
        return UNREADABLE
