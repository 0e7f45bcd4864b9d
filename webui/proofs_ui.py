"""The Gradio edge of the Verify tab's tlog-proofs and witness policy (issue 33). The rules are receipts.tlog_proof's
(`tlog_proof_for`: the same bytes `python -m receipts tlog-proof RECEIPT SEQ` prints) and receipts.cosignature's;
what is shown is webui/render_proofs.py's.

A proof's note is signed by the app's key, which signs a note only over a checkpoint it signed itself: a receipt of
another key (an imported session's, another app's) gets a sentence saying so, never a proof. A refusal is said in
the status line beside the proof (the Verify tab says outcomes in place, never as an error overlay).
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from receipts.body import MalformedReceipt, parse_receipt
from receipts.note import NotSigned
from receipts.tlog_proof import NoProof, tlog_proof_for
from webui import render_proofs as rp
from webui.handlers import edge
from webui.inputs import BadInput, read_upload
from webui.service import Service


def make_proof(service: Service, raw: bytes, seq: int) -> tuple[str, str, str]:
    """(proof text, download name, status) of the event at `seq` the receipt `raw` cites, signed by the app's key.
    MalformedReceipt, NoProof or NotSigned otherwise."""
    receipt = parse_receipt(raw)
    text = tlog_proof_for(receipt, seq, service.engine.key)
    size = int(receipt.signed_body["checkpoint"]["body"]["tree_size"])
    return text, f"{receipt.receipt_id}-seq{seq}.tlog-proof", rp.proof_ready(seq, receipt.receipt_id, size)


class ProofsUI:
    """One method per event of the tlog-proof panel; webui/wiring.py wires components to them."""

    def __init__(self, service: Service) -> None:
        self.service = service

    def _none(self, status: str, choices: list[tuple[str, str]] | None = None) -> tuple[Any, ...]:
        pick = gr.Dropdown(choices=choices or [], value=None) if choices is not None else gr.skip()
        return pick, "", gr.DownloadButton(value=None, interactive=False), status

    @edge
    def offer(self, path: object) -> tuple[Any, ...]:
        """After Verify. Outputs: (the cited events to pick, the first one's proof text, its download, status)."""
        try:
            raw = read_upload(path)
            body = parse_receipt(raw).signed_body
        except (BadInput, MalformedReceipt):  # not a receipt (an erasure certificate, junk): the verdict says why
            return self._none(rp.PROOFS_HELP, [])
        choices = rp.cited_choices(body)
        first = body["memories"][0]["event"]["seq"] if body["memories"] else body["query"]["event"]["seq"]
        return (gr.Dropdown(choices=choices, value=str(first)), *self._proof(raw, int(first)))

    @edge
    def show(self, path: object, seq: object) -> tuple[Any, ...]:
        """A pick. Outputs: (proof text, download, status)."""
        if not isinstance(seq, str) or not seq.isdigit():
            return self._none(rp.PROOFS_HELP)[1:]
        try:
            raw = read_upload(path)
        except BadInput as exc:
            return self._none(rp.no_proof(str(exc)))[1:]
        return self._proof(raw, int(seq))

    def _proof(self, raw: bytes, seq: int) -> tuple[Any, ...]:
        try:
            text, name, status = make_proof(self.service, raw, seq)
        except (MalformedReceipt, NoProof) as exc:
            return self._none(rp.no_proof(str(exc)))[1:]
        except NotSigned:
            return self._none(rp.no_proof(
                f"this receipt's checkpoint is not signed by this app's key ({self.service.key_id}); its tlog-proof is made "
                "with the key that signed it: python -m receipts tlog-proof RECEIPT SEQ --data DATA_DIR"
            ))[1:]
        copy = self.service.downloads.put(name, text.encode("utf-8"))
        return text, gr.DownloadButton(label=rp.DOWNLOAD_LABEL, value=copy, interactive=True), status

    def cleared(self) -> tuple[Any, ...]:
        return self._none(rp.PROOFS_HELP, [])


__all__ = ["ProofsUI", "make_proof"]
