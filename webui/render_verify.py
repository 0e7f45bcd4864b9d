"""A verification report → the table and verdict the Verify tab shows (pure)."""

from __future__ import annotations

from typing import Any

from receipts.certificate import Certificate
from receipts.certificate_check import CertificateReport
from receipts.groups import group_report
from receipts.verify import ERASED, FAIL, NOT_VERIFIABLE, PASS, WITHHELD, Report
from webui.tamper import Tampered
from webui.text import md

REPORT_HEADERS = ["check", "result", "what it checks", "expected", "found", "where"]
REPORT_WIDTHS = ["15%", "11%", "34%", "14%", "14%", "12%"]
STATUS_LABEL = {
    PASS: "✅ pass",
    FAIL: "❌\ufe0f FAIL",  # a word beside every mark: without a colour-emoji font each mark is an empty box
    NOT_VERIFIABLE: "⚪ not verifiable here",
    WITHHELD: "🔒 withheld from this copy",
    ERASED: "🗑️ erased",
}
GROUP_ICON = {PASS: "✅ pass", FAIL: "❌\ufe0f FAIL", NOT_VERIFIABLE: "⚪ n/a", WITHHELD: "🔒 withheld", ERASED: "🗑️ erased"}
RAW_ROWS_LABEL = "All checks, one row each (what the summary above groups)"

# Why a receipt was checked the way it was (shown with the verdict).
MODE_LEDGER = "ledger"
MODE_OTHER_SESSION = "other_session"
MODE_NO_LEDGER = "no_ledger"
MODE_IMPORTED = "imported"  # a receipt of a session the visitor imported from a bundle (issue 13)
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
    MODE_IMPORTED: (
        "Checked against **a session you imported** from a bundle: its ledger as the bundle carried it, and the "
        "signing key the bundle carried (kept for that session at import)."
    ),
}


def report_rows(report: Report | CertificateReport) -> list[list[Any]]:
    """One row per check; expected and found only where a check failed."""
    return [
        [c.name, STATUS_LABEL.get(c.status, c.status), c.message, c.expected or "", c.found or "", c.where or ""]
        for c in report.checks
    ]


def certificate_markdown(cert: Certificate, report: CertificateReport, mode: str) -> str:
    """An erasure certificate on the Verify tab: what it says it erased (hashes only), then the verdict."""
    b = cert.body
    if cert.scope == "events":
        seqs = ", ".join(str(e["seq"]) for e in b["erased"])
        says = (
            f"Erased from session `{md(cert.session)}`: **{len(b['erased'])} event(s)**, seq {md(seqs)}; "
            f"receipts redacted: {len(b['receipts']['redacted'])}, withdrawn: {len(b['receipts']['withdrawn'])}; "
            f"the erasure record{'s are' if len(b['records']) > 1 else ' is'} seq "
            f"{md(', '.join(str(r['event']['seq']) for r in b['records']))}. Issued {md(str(b['issued_at']))}."
        )
    else:
        says = (
            f"Session `{md(cert.session)}` deleted whole: **{md(str(b['counts']['events']))} events**, "
            f"{md(str(b['counts']['receipts']))} receipts. Issued {md(str(b['issued_at']))}."
        )
    counts = f"{len(report.checks) - len(report.failed) - len(report.not_verifiable)} passed, {len(report.failed)} failed, {len(report.not_verifiable)} not verifiable here"
    if report.verdict == "verified":
        head = f"## ✅ Verified erasure certificate\nEvery check that could run passed ({counts})."
    elif report.verdict == "failed":
        names = ", ".join(f"`{c.name}`" for c in report.failed[:12])
        head = f"## ❌ Failed\nThis erasure certificate does not hold: {names} ({counts})."
    else:
        head = f"## ⚠️ Unverified\nNothing failed, but not everything could be checked ({counts})."
    note = CERTIFICATE_NOTES[mode]
    return "\n\n".join([head, f"### What this certificate says\n{says}", note])  # the verdict first (issue 31)


CERTIFICATE_NOTES = {
    MODE_LEDGER: "Checked against the app's public key **and this data directory's ledger** (the erased lines and the chain today).",
    MODE_OTHER_SESSION: (
        "Checked **offline** (signatures and proofs): it is not about your session, whose ledger alone is consulted "
        "on your behalf."
    ),
}


def groups_markdown(report: Report) -> str:
    """The checks grouped by what they are about (receipts.groups), one plain sentence each, as a table."""
    lines = ["| result | about | what the checks show | checks |", "|---|---|---|---|"]
    for g in group_report(report):
        lines.append(f"| {GROUP_ICON[g.status]} | **{md(g.title)}** | {md(g.sentence, 600)} | {len(g.checks)} |")
    return "\n".join(lines)


def signer_of(raw: bytes) -> str | None:
    """The key id the receipt's (first) signature names, or None when it cannot be read (the checks say why)."""
    import json

    try:
        sig = json.loads(raw)["signatures"][0]["keyid"]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    return sig if isinstance(sig, str) else None


def verdict_line(report: Report, mode: str, signer: str | None) -> str:
    """The one line a person reads first (issue 31): verified or not, and what — before what the receipt says.

    Verified: how many memories, the question and the answer are exactly what was signed, and by which key.
    Failed: the first part that does not hold (a memory, the question, the answer, the signature, the ledger), in
    the sentence of its group (receipts.groups), and how many other parts fail with it."""
    groups = group_report(report)
    if report.verdict == "verified":
        n = sum(1 for g in groups if g.title.startswith("memory "))
        memories = "no memories" if n == 0 else ("this memory" if n == 1 else f"these {n} memories")
        held = "the signed ledger holds" if mode in (MODE_LEDGER, MODE_IMPORTED) else "was signed"
        key = f", signed by key `{md(signer, 80)}`" if signer else ""
        return f"### ✅ Verified: {memories}, this question and this answer are exactly what {held}{key}."
    failing = [g for g in groups if g.status == FAIL]
    if report.verdict == "failed":
        specific = [g for g in failing if g.title != "the receipt as a whole"] or failing
        if not specific:
            names = ", ".join(c.name for c in report.failed[:3])
            return f"### ❌ Failed: {md(names, 200)}"
        more = len(specific) - 1
        tail = f" (and {more} other part{'s' if more != 1 else ''}: {md(', '.join(g.title for g in specific[1:4]), 200)})" if more else ""
        return f"### ❌ Failed: {md(specific[0].sentence, 300)}{tail}"
    return "### ⚠️ Unverified: nothing failed, but not everything could be checked here (see the checks below)."


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
        [
            head,
            f"Receipt `{report.receipt_id}` of session `{report.session}`.",
            groups_markdown(report),
            MODE_NOTES[mode],
        ]
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
    "app's public key, each memory's digest and Merkle proof, the prompt hash, and — for your own session — the ledger. "
    "An erasure certificate (from Forget…) is checked here too."
)
