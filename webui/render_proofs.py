"""What the Verify tab says about tlog-proofs and witness policies (issue 33), pure: labels, the choices of cited
events, and the witness lines of a report. The rules are receipts.tlog_proof's and receipts.cosignature's."""

from __future__ import annotations

from typing import Any

from receipts.report import FAIL, PASS, Report
from webui.text import md, md_code

PROOFS_LABEL = "C2SP tlog-proof of each memory"
PICK_LABEL = "Memory (or the question, the answer)"
CODE_LABEL = ".tlog-proof (the bytes `python -m receipts tlog-proof RECEIPT SEQ` prints)"
DOWNLOAD_LABEL = "⬇ Download the .tlog-proof"
POLICY_ACCORDION = "Witness policy (optional)"
POLICY_LABEL = "A c2sp.org/tlog-policy: paste it here to check the receipt's witness cosignatures"
POLICY_PLACEHOLDER = "log <vkey>\nwitness w1 <vkey> [<url>]\nquorum w1"
PROOFS_HELP = (
    "Verify a receipt first. Each memory it cites then has a **tlog-proof** (c2sp.org/tlog-proof@v1): its inclusion path "
    "and the receipt's checkpoint as a signed note, with any witness cosignatures. Anyone checks it with the memory's "
    "ledger line and the app's verifier key: `python -m receipts verify-proof PROOF EVENTLINE --vkey KEY`."
)


def policy_note(app_has_one: bool) -> str:
    if app_has_one:
        return "This app names witnesses (WITNESS_POLICY): their cosignatures are checked under its policy unless you paste another here."
    return "This app names no witnesses. Paste a policy to check the cosignatures a receipt carries."


def cited_choices(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, seq as text) of each event a receipt's signed body cites: the memories, then the question and the answer."""
    out = [(f"memory {i} (seq {m['event']['seq']})", str(m["event"]["seq"])) for i, m in enumerate(body["memories"], 1)]
    out.append((f"the question (seq {body['query']['event']['seq']})", str(body["query"]["event"]["seq"])))
    out.append((f"the answer (seq {body['response']['event']['seq']})", str(body["response"]["event"]["seq"])))
    return out


def proof_ready(seq: int, receipt_id: str, size: int) -> str:
    return (
        f"tlog-proof of seq {seq} in receipt {md_code(receipt_id[:60])}: its path to the root of {size} events, and the "
        "checkpoint as a signed note. Check it with the memory's ledger line: "
        "`python -m receipts verify-proof PROOF EVENTLINE --vkey \"$(python -m receipts pubkey DATA_DIR --vkey)\"`."
    )


def no_proof(reason: str) -> str:
    return f"No tlog-proof here: {md(reason, 400)}"


def witness_markdown(report: Report) -> str:
    """A short section naming each witness row of a report (`witness.*`), or "" when it has none."""
    rows = [c for c in report.checks if c.name.startswith("witness.")]
    if not rows:
        return ""
    mark = {PASS: "✅", FAIL: "❌"}
    lines = [f"- {mark.get(c.status, '➖')} {md_code(c.name[:80])}: {md(c.message, 300)}" for c in rows]
    return "**Witnesses**\n\n" + "\n".join(lines)


__all__ = [
    "CODE_LABEL",
    "DOWNLOAD_LABEL",
    "PICK_LABEL",
    "POLICY_ACCORDION",
    "POLICY_LABEL",
    "POLICY_PLACEHOLDER",
    "PROOFS_HELP",
    "PROOFS_LABEL",
    "cited_choices",
    "no_proof",
    "policy_note",
    "proof_ready",
    "witness_markdown",
]
