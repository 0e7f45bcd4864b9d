"""A verification report → the table and verdict the Verify tab shows (pure)."""

from __future__ import annotations

from typing import Any

from receipts.groups import group_report
from receipts.verify import ERASED, FAIL, NOT_VERIFIABLE, PASS, WITHHELD, Report

from .tamper import Tampered
from .text import md

REPORT_HEADERS = ["check", "result", "what it checks", "expected", "found", "where"]
REPORT_WIDTHS = ["15%", "11%", "34%", "14%", "14%", "12%"]
STATUS_LABEL = {
    PASS: "✅ pass",
    FAIL: "❌\ufe0f fail",
    NOT_VERIFIABLE: "⚪ not verifiable here",
    WITHHELD: "🔒 withheld from this copy",
    ERASED: "🗑️ erased",
}
GROUP_ICON = {PASS: "✅", FAIL: "❌\ufe0f", NOT_VERIFIABLE: "⚪", WITHHELD: "🔒", ERASED: "🗑️"}
RAW_ROWS_LABEL = "All checks, one row each (what the summary above groups)"

# Why a receipt was checked the way it was (shown with the verdict).
MODE_LEDGER = "ledger"
MODE_OTHER_SESSION = "other_session"
MODE_NO_LEDGER = "no_ledger"
MODE_NOTES = {
    MODE_LEDGER: "Checked against the app's public key **and this session's ledger** (the ledger checks re-walk it from genesis).",
    MODE_OTHER_SESSION: (
        "Checked **offline**: this receipt belongs to another session, whose ledger is never consulted "
        "on your behalf. Signature and Merkle proofs were checked; the ledger checks are not verifiable here."
    ),
    MODE_NO_LEDGER: (
        "Checked **offline**: this session has no ledger here any more (it may have been deleted by the "
        "retention setting). Signature and Merkle proofs were checked; the ledger checks are not verifiable here."
    ),
}


def report_rows(report: Report) -> list[list[Any]]:
    """One row per check; expected and found only where a check failed."""
    return [
        [c.name, STATUS_LABEL.get(c.status, c.status), c.message, c.expected or "", c.found or "", c.where or ""]
        for c in report.checks
    ]


def groups_markdown(report: Report) -> str:
    """The checks grouped by what they are about (receipts.groups), one plain sentence each, as a table."""
    lines = ["| | about | what the checks show | checks |", "|---|---|---|---|"]
    for g in group_report(report):
        lines.append(f"| {GROUP_ICON[g.status]} | **{md(g.title)}** | {md(g.sentence, 600)} | {len(g.checks)} |")
    return "\n".join(lines)


def verdict_markdown(report: Report, mode: str) -> str:
    failed, na = report.failed, report.not_verifiable
    passed = len(report.checks) - len(failed) - len(na) - len(report.withheld)
    counts = f"{passed} passed, {len(failed)} failed, {len(na)} not verifiable here"
    if report.withheld:
        counts += f", {len(report.withheld)} withheld or erased"
    if report.verdict == "verified":
        head = f"## ✅ Verified\nEvery check that could run passed ({counts})."
    elif report.verdict == "failed":
        names = ", ".join(f"`{c.name}`" for c in failed[:12]) + (" …" if len(failed) > 12 else "")
        head = f"## ❌ Failed\n{len(failed)} check{'s' if len(failed) != 1 else ''} failed: {names} ({counts})."
    else:
        head = f"## ⚠️ Unverified\nNothing failed, but the signatures could not be checked against a trusted key ({counts})."
    return "\n\n".join(
        [head, f"Receipt `{report.receipt_id}` of session `{report.session}`.", groups_markdown(report), MODE_NOTES[mode]]
    )


def malformed_markdown(message: str) -> str:
    """An upload that is not a receipt at all: a parse error, a different outcome from a failed check."""
    return f"## ⛔ Not a receipt\n\n{md(message, 500)}\n\nNothing was verified. Upload a receipt file downloaded from the Chat tab."


def refused_markdown(message: str) -> str:
    return f"## ⛔ Cannot verify\n\n{md(message, 500)}"


def tamper_markdown(t: Tampered, report: Report, mode: str) -> str:
    caught = report.failed
    names = ", ".join(f"`{c.name}`" for c in caught) or "**none**"
    note = f"  \n_Note: {md(t.note)}._" if t.note else ""
    head = (
        f"## 🔨 Tampered copy: {'caught' if caught else 'NOT caught'}\n\n"
        f"Changed one byte in `{t.where}` (byte {t.offset} of the {t.part}): "
        f"`{t.before}` → `{t.after}`.{note}\n\n"
        f"**Caught by {len(caught)} check{'s' if len(caught) != 1 else ''}:** {names}.\n\n"
        f"Verdict on the copy: **{report.verdict}**."
    )
    return "\n\n".join([head, groups_markdown(report), MODE_NOTES[mode]])


VERIFY_HELP = (
    "Upload a receipt (the ⬇ button under an answer saves one). Every check runs here: the signature against the "
    "app's public key, each memory's digest and Merkle proof, the prompt hash, and — for your own session — the ledger."
)
