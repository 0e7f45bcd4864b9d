"""What the forgetting panel and the turn tools show (pure: domain values → Markdown and choices; no Gradio, no I/O).

The confirmation lists exactly what `control.forget.forget` would erase: the
named events, the answers that go with them (their receipts cited what is
forgotten), and the stored receipts redacted or withdrawn. Event texts are the
visitor's: they go through `md`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from control.forget import ForgetResult
from control.plan import Plan
from ledger import Event
from webui.text import md, short

TEXT_LIMIT = 160
CONFIRM_LABEL = "🗑 Forget it for good"
CONFIRM_SESSION_LABEL = "🗑 Forget the whole session for good"
CANCEL_LABEL = "Cancel"
CLOSE_LABEL = "Close"
CERTIFICATE_LABEL = "⬇ Download the erasure certificate"
WITHHELD_LABEL = "⬇ Download a copy with the ticked memories withheld"
NO_TURN = "_Ask something first: the memories of the latest answer are listed here._"
KEPT = (
    "The chain, the Merkle tree and every receipt still verify: an erased line keeps its digest, so only the words "
    "go. You get a **signed erasure certificate** listing what was erased (hashes, never the words); check it with "
    "`python -m receipts verify CERT --trust signing.pub`."
)


def _event_line(ev: Event, why: str) -> str:
    return f"- seq {ev.seq} · {md(ev.role, 20)}{why}: “{md(ev.text, TEXT_LIMIT)}”"


def preview_markdown(plan: Plan, events: Sequence[Event], *, changed: bool = False) -> str:
    """The confirmation of forgetting events: every event that goes and why, and the receipts it touches."""
    by_seq = {ev.seq: ev for ev in events}
    lines = []
    if changed:
        lines += ["⚠️ **What would be forgotten changed since you were asked** (a new answer cited it). Look again:", ""]
    n = len(plan.erase)
    lines += [f"### Forget {n} event{'s' if n != 1 else ''}? Nothing is erased until you confirm.", ""]
    for s in plan.named:
        if s in by_seq:
            lines.append(_event_line(by_seq[s], ""))
    if plan.cascaded:
        lines += [
            "",
            "**Answers that go with it** — their receipts cited what you forget, and their text may repeat it:",
        ]
        for s in plan.cascaded:
            if s in by_seq:
                lines.append(_event_line(by_seq[s], " (answer)"))
    lines += ["", _receipts_line(sorted(plan.redact), plan.withdraw), "", KEPT]
    return "\n".join(lines)


def _receipts_line(redacted: Sequence[str], withdrawn: Sequence[str]) -> str:
    parts = []
    if redacted:
        parts.append(
            f"**{len(redacted)} stored receipt{'s' if len(redacted) != 1 else ''} redacted** (the forgotten texts are "
            f"dropped; the signature still holds): {', '.join(f'`{short(r, 17)}`' for r in redacted)}"
        )
    if withdrawn:
        parts.append(
            f"**{len(withdrawn)} old-format receipt{'s' if len(withdrawn) != 1 else ''} withdrawn** (deleted: its texts "
            f"are inside its signature): {', '.join(f'`{short(r, 17)}`' for r in withdrawn)}"
        )
    return "  \n".join(parts) if parts else "No stored receipt cites it."


def session_preview_markdown(session: str, events: int, receipts: int) -> str:
    return "\n".join(
        [
            "### ⚠️ Forget this whole session? Nothing is deleted until you confirm.",
            "",
            f"Session `{md(session)}`: its **{events} events** and **{receipts} receipts**, its Merkle tree and index "
            "rows are deleted for good, and a new empty session starts. You get a **signed certificate** holding only "
            "hashes (the session's final checkpoint and counts): download it before you leave.",
        ]
    )


def result_markdown(result: ForgetResult, copies_removed: int = 0) -> str:
    """What was done, then where the certificate is."""
    copies = (
        f" {copies_removed} cached cop{'ies' if copies_removed != 1 else 'y'} of its receipts deleted too."
        if copies_removed
        else ""
    )
    if result.record_seq is None:
        return (
            f"✅ **Session forgotten:** {len(result.erased)} events and its receipts are deleted.{copies} "
            "A new session has started. Download the certificate below: it is the proof that it happened."
        )
    seqs = ", ".join(f"{s} ({md(result.roles.get(s, '?'), 20)})" for s in result.erased)
    lines = [
        f"✅ **Forgotten:** {len(result.erased)} event(s) erased — seq {seqs}. They read **[forgotten]** from now on."
    ]
    if result.cascaded:
        lines.append(f"Answers erased with them: seq {', '.join(map(str, result.cascaded))}.")
    recs = result.record_seqs or (result.record_seq,)
    if len(recs) > 1:
        lines.append(f"The erasure records are seq {recs[0]}–{recs[-1]}, one per 64 events (what was erased, never the words).")
    else:
        lines.append(f"The erasure record is seq {result.record_seq} (what was erased, never the words).")
    lines.append(_receipts_line(result.redacted, result.withdrawn) + copies)
    lines.append("Download the certificate below and keep it: `python -m receipts verify CERT --trust signing.pub`.")
    return "  \n".join(lines)


def interrupted_markdown(what: str) -> str:
    """The status line when a confirmed forget stopped on a server error after the ledger changed and was finished
    again at once (or could not be): what happened, never "nothing was forgotten"."""
    return f"⚠️ **The forget stopped on a server error:** {md(what, 400)}"


def refused_markdown(why: str) -> str:
    """The status line under the reason when a confirmation is refused: nothing was forgotten, and why."""
    return f"⚠️ **Nothing was forgotten:** {md(why, 400)}"


# -- the turn tools (under the stamps) --------------------------------------------------------------
def _text_of(ev: Mapping[str, Any]) -> str | None:
    text = ev.get("text")
    return text if isinstance(text, str) else None


def forget_choices(body: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(label, seq) for what the answer's receipt cites and still holds: the question, each memory, the answer."""
    out = []
    q = body["query"]["event"]
    if (t := _text_of(q)) is not None:
        out.append((f"your question · seq {q['seq']} · {short_text(t)}", int(q["seq"])))
    out += withhold_choices(body)
    a = body["response"]["event"]
    if (t := _text_of(a)) is not None:
        out.append((f"the answer · seq {a['seq']} · {short_text(t)}", int(a["seq"])))
    return out


def withhold_choices(body: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(label, seq) for each memory the receipt discloses: the ones a visitor may leave out of a shared copy."""
    return [
        (f"memory#{m['rank']} · seq {m['event']['seq']} · {short_text(t)}", int(m["event"]["seq"]))
        for m in body["memories"]
        if (t := _text_of(m["event"])) is not None
    ]


def short_text(text: str, limit: int = 60) -> str:
    """A dropdown label's text: one line, cut (dropdown labels are plain text, not Markdown)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
