"""What "Correct this" and a memory's history show (pure: domain values → Markdown; no Gradio, no I/O; issue 12).

A superseded statement stays on record: it is struck through (`~~…~~`) and names the statement that replaced
it. Memory texts and reasons are the visitor's: they go through `md`.
"""

from __future__ import annotations

from collections.abc import Sequence

from control.suggestions import Suggestion
from control.supersession import HistoryEntry, SupersedeResult
from webui.render import FORGOTTEN, short_ts
from webui.text import md

CORRECT_LABEL = "✏️ Correct this"
HISTORY_LABEL = "🕘 History"
CORRECT_TEXT_LABEL = "What holds now, for Correct this (the old statement stays on record, struck through)"
INCLUDE_SUPERSEDED_LABEL = "include superseded (history)"
HISTORY_HEADERS = ["seq", "statement", "state", "when (UTC)", "decided by", "reason"]
TEXT_LIMIT = 200
REASON_LIMIT = 200


def result_markdown(result: SupersedeResult, new_text: str) -> str:
    """After Correct this: one line, "seq 4 superseded by seq 9: 'I live in Bristol'", and the record that says so."""
    why = f" Reason: {md(result.reason, REASON_LIMIT)}." if result.reason else ""
    return (
        f"✅ **Corrected:** seq {result.old_seq} superseded by seq {result.new_seq}: “{md(new_text, TEXT_LIMIT)}” — the "
        f"old statement stays on record, struck through, and is no longer served as current. Supersession record at "
        f"seq {result.record_seq}.{why}"
    )


def state_text(e: HistoryEntry) -> str:
    """A statement's state in words: live, or superseded by which seq; revoked and forgotten said too."""
    state = "live (holds now)" if e.superseded_by is None else f"superseded by seq {e.superseded_by}"
    if e.revoked:
        state += " · revoked"
    if e.erased:
        state += " · forgotten"
    return state


def statement_text(e: HistoryEntry) -> str:
    """The statement as the history shows it: struck through once superseded; [forgotten] once its words are gone."""
    if e.text is None:
        return md(FORGOTTEN)
    text = md(e.text, TEXT_LIMIT)
    return f"~~{text}~~" if e.superseded_by is not None else text


def decided_text(e: HistoryEntry) -> str:
    """Who decided its supersession (visitor, rule:…, model:…), at which record; empty while live."""
    if e.decided_by is None:
        return ""
    return f"{md(e.decided_by, 80)} (record seq {e.record_seq})" if e.record_seq is not None else md(e.decided_by, 80)


def history_row(e: HistoryEntry) -> str:
    reason = e.shown_reason or e.reason
    cells = [
        str(e.seq),
        statement_text(e),
        state_text(e),
        md(short_ts(e.ts)),
        decided_text(e),
        md(reason, REASON_LIMIT) if reason else "",
    ]
    return "| " + " | ".join(cells) + " |"


def suggestion_line(x: Suggestion) -> str:
    return (
        f"💡 {md(x.suggested_by, 80)} suggested that seq {x.new_seq} supersedes seq {x.older_seq}; the rules did not read "
        f"them as the same fact, so nothing was recorded. If it holds, pick seq {x.older_seq} and use Correct this."
    )


def history_markdown(entries: Sequence[HistoryEntry], suggested: Sequence[Suggestion] = ()) -> str:
    """A memory's history: every statement of its fact, oldest first, with its state, when, who decided and why;
    then any open suggestion a model made about them (control.suggestions), for the person to confirm or not."""
    if not entries:
        return "_No statement to show._"
    live = sorted({e.live_seq for e in entries if e.live_seq >= 0})
    n = len(entries)
    if n == 1:
        head = f"**History of seq {entries[0].seq}:** one statement, never superseded."
    else:
        now = ", ".join(f"seq {s}" for s in live) if live else "none"
        head = f"**History of this fact:** {n} statements, oldest first. Holds now: {now}."
    lines = [head, "", "| " + " | ".join(HISTORY_HEADERS) + " |", "|" + "---|" * len(HISTORY_HEADERS)]
    lines.extend(history_row(e) for e in entries)
    if suggested:
        lines.extend(["", *(f"- {suggestion_line(x)}" for x in suggested)])
    return "\n".join(lines)
