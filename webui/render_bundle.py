"""Bundles (issue 13) → what the Ledger tab's export and the Import tab show (pure)."""

from __future__ import annotations

import re
from typing import Any

from bundle import BundleReport, Exported, Origin
from webui.bundles import MAX_BUNDLE_UPLOAD_BYTES, ImportOutcome
from webui.render import RANK_ORDER, short_ts
from webui.render_verify import STATUS_LABEL
from webui.text import md, md_code, short

EXPORT_LABEL = "📦 Export bundle"
EXPORT_MARKDOWN_LABEL = "📝 Export Markdown"
BUNDLE_DOWNLOAD_LABEL = "⬇ Download the bundle"
MARKDOWN_DOWNLOAD_LABEL = "⬇ Download the Markdown"
IMPORT_LABEL = "📥 Import"
UNVERIFIED_LABEL = "import unverified: a bundle from another server (not signed by this app's key)"
IMPORTED_PICK_LABEL = "Your imported sessions (read-only)"
NO_IMPORTS = "No imported sessions yet."
BUNDLE_HEADERS = ["check", "result", "what it checks", "expected", "found"]
BUNDLE_WIDTHS = ["22%", "12%", "42%", "12%", "12%"]

EXPORT_HELP = (
    "**Take your memory with you.** *Export bundle* writes this session — its ledger as stored, its latest signed "
    "checkpoint, every receipt and erasure certificate — as one zip whose manifest this app signs. Check it anywhere "
    "with `python -m bundle verify FILE --trust signing.pub`; import it here (the Import tab) or on another server. "
    "*Export Markdown* is the conversation for people to read. Both hold only this session."
)
IMPORT_HELP = (
    "Upload a session bundle (`.mre.zip`, up to "
    f"{MAX_BUNDLE_UPLOAD_BYTES // (1024 * 1024)} MB here; bigger ones with `python -m bundle import` on the server). "
    "Every check runs first — the manifest's signature by this app's key, each member's hash, the ledger from genesis, "
    "the checkpoint, every receipt — and **nothing is imported unless all of them pass**. The imported session gets "
    "a new local id, is indexed, and can be searched here, read-only; a receipt of it verifies on the Verify tab. "
    "Imports are yours: other visitors do not see them."
)


_ID = re.compile(r"[A-Za-z0-9_:.-]{1,100}")


def _id(value: str) -> str:
    """A session id, local id or key id as inline code (they are plain; anything else is fenced safely)."""
    return f"`{value}`" if _ID.fullmatch(value) else md_code(value)


def export_markdown(done: Exported) -> str:
    """The line under Export bundle once the file is ready."""
    return (
        f"Bundle of session {_id(done.session)} ready: {done.events:,} events, {done.receipts:,} receipts, "
        f"{done.certificates:,} erasure certificates — {done.bytes:,} bytes, sha256 `{short(done.sha256, 16)}`. "
        "Verify it with `python -m bundle verify FILE --trust signing.pub` (the key is below)."
    )


def markdown_ready(session: str, events: int) -> str:
    return f"Markdown of session {_id(session)} ready: {events:,} events."


def bundle_rows(report: BundleReport | None) -> list[list[Any]]:
    """One row per check of the bundle; expected and found only where a check failed."""
    if report is None:
        return []
    return [[c.name, STATUS_LABEL.get(c.status, c.status), c.message, c.expected or "", c.found or ""] for c in report.checks]


def _counts(report: BundleReport) -> str:
    failed, na = len(report.failed), len(report.not_verifiable)
    return f"{len(report.checks) - failed - na} passed, {failed} failed, {na} not verifiable here"


def import_markdown(outcome: ImportOutcome) -> str:
    """The Import tab's result: what was imported (or why nothing was), above the rows."""
    report = outcome.report
    if outcome.imported is None:
        rows = f" The checks are below ({_counts(report)})." if report is not None else " No check could run."
        why = outcome.refused or "refused"
        if report is not None and report.failed:
            first = report.failed[0]
            why = f"check {md_code(first.name)} failed ({md(first.message, 300)})"
            n = len(report.failed)
            why += f" and {n - 1} more" if n > 1 else ""
        else:
            why = md(why, 600)
        return f"## ⛔ Not imported\n\n{why}.\n\nNothing was imported.{rows}"
    done = outcome.imported
    o = done.origin
    where = (
        f"Session {_id(o.session)} ({o.events:,} events, signed by {_id(o.signer)}) is your imported session "
        f"{_id(o.local)}."
    )
    if done.duplicate:
        return f"## ↩️ Already imported\n\n{where} Nothing changed."
    if o.verdict == "verified":
        head = f"## ✅ Imported\n\nEvery check passed ({_counts(done.report)}). {where} {done.indexed:,} events indexed."
    else:
        head = (
            f"## ⚠️ Imported UNVERIFIED\n\nNothing failed, but the bundle is **not signed by this app's key** "
            f"({_counts(done.report)}): it is consistent with the key it carries, {_id(o.signer)}, which this app does "
            f"not know. {where} {done.indexed:,} events indexed; it is labelled unverified wherever it is shown."
        )
    return f"{head}\n\nSearch it below; its receipts verify on the Verify tab."


def imported_choices(origins: list[Origin]) -> list[tuple[str, str]]:
    """(label, local id) for the imported-sessions dropdown."""
    return [(imported_label(o), o.local) for o in origins]


def imported_label(o: Origin) -> str:
    mark = "" if o.verdict == "verified" else " · ⚠️ UNVERIFIED"
    return f"{o.local[-16:]} · session {o.session[:12]}… · {o.events:,} events · imported {short_ts(o.imported_at)}{mark}"


def imported_list_markdown(origins: list[Origin]) -> str:
    if not origins:
        return NO_IMPORTS
    lines = ["| imported session | from session | events | signed by | verdict | imported |", "|---|---|---|---|---|---|"]
    for o in origins:
        verdict = "✅ verified" if o.verdict == "verified" else "⚠️ unverified"
        lines.append(
            f"| {_id(o.local)} | {_id(o.session)} | {o.events:,} | {_id(o.signer)} | {verdict} | {md(short_ts(o.imported_at))} |"
        )
    return "\n".join(lines)


def imported_search_status(o: Origin, n: int, k: int, reason: str | None) -> str:
    mark = "" if o.verdict == "verified" else " ⚠️ **unverified import**:"
    if n:
        found = f"{n} result{'s' if n != 1 else ''} (K={k}), best first: {RANK_ORDER}"
    else:
        found = f"no results: {md(reason or 'nothing matched', 300)}."
    return f"Imported session {_id(o.local)} (read-only):{mark} {found}"


def imported_note(o: Origin) -> str:
    """The Verify tab's line for a receipt checked against an imported session."""
    note = f"Checked against the imported session {_id(o.local)} (session {_id(o.session)} as its bundle carried it)."
    if o.verdict != "verified":
        note += (
            " ⚠️ That import is **unverified**: the key its receipts are checked with came in the bundle itself, not "
            "from this app."
        )
    return note
