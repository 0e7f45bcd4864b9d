"""A check of the visitor's kept checkpoint (webui/history.py) → what the page shows (pure; no Gradio, no I/O)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webui.history import CHANGED, EMPTY, EXTENDS, FIRST, KEY_CHANGED, UNCHECKED, UNSOUND, HistoryCheck
from webui.text import md, short

WARNING_LEAD = "this history changed since you last saw it"
TITLES = {
    CHANGED: "⚠️ This history changed since you last saw it",
    UNSOUND: "⚠️ The server's history does not match its own signed checkpoint",
    KEY_CHANGED: "⚠️ The app's signing key changed since you last saw this history",
}
KEPT_LABEL = "⬇ Download the checkpoint this browser kept"
CURRENT_LABEL = "⬇ Download the server's current checkpoint"
ACCEPT_LABEL = "Keep the current checkpoint from now on"


def describe(checkpoint: Mapping[str, Any] | None) -> str:
    """`N events, root abcd…, signed <time>` for a signed checkpoint (Markdown)."""
    if checkpoint is None:
        return "none"
    b = checkpoint["body"]
    n = b["tree_size"]
    return f"{n} event{'s' if n != 1 else ''}, root `{short(b['root'])}`, signed {md(b['issued_at'])}"


def warning_markdown(check: HistoryCheck) -> str:
    """The warning box: the plain warning, the reason, what the two downloads are, and what happens next ("" if none)."""
    note = f"_ℹ️ {md(check.note, 400)}._" if check.note else ""
    if not check.warning:
        return note
    lines = [
        f"## {TITLES[check.outcome]}",
        f"**Why:** {md(check.message, 600)}.",
        "",
        f"- **Kept by this browser:** {describe(check.kept)}",
        f"- **On the server now:** {describe(check.current)}",
        "",
        "Download both and keep them: with them anyone can re-check this, e.g. "
        "`python -m ledger verify DATA_DIR SESSION --since checkpoint-kept-….json --trust signing.pub`.",
        "This browser keeps the old checkpoint, so this warning shows again on every visit until today's "
        f"history extends it — or until you press “{ACCEPT_LABEL}”.",
    ]
    if note:
        lines += ["", note]
    return "\n".join(lines)


def status_markdown(check: HistoryCheck) -> str:
    """One line for the session box: what the last check of the kept checkpoint found."""
    what = {
        EMPTY: "no events yet, nothing to check",
        FIRST: md(check.message, 300),
        EXTENDS: f"✅ {md(check.message, 300)}",
        CHANGED: f"⚠️ {WARNING_LEAD}",
        UNSOUND: "⚠️ the server's signed checkpoint does not match its ledger",
        KEY_CHANGED: "⚠️ the app's signing key changed",
        UNCHECKED: md(check.message, 300),
    }.get(check.outcome, md(check.message, 300))
    return f"**History seen by this browser:** {what}"


__all__ = [
    "ACCEPT_LABEL",
    "CURRENT_LABEL",
    "KEPT_LABEL",
    "TITLES",
    "WARNING_LEAD",
    "describe",
    "status_markdown",
    "warning_markdown",
]
