"""The Verify tab with witnesses and tlog-proofs, in a real browser (issue 33).

An app whose turns a witness cosigns (the spec witness of tests/witness_support.py on 127.0.0.1, the policy handed to
the app as WITNESS_POLICY would be): a visitor chats, downloads the receipt and uploads it on the Verify tab; the
report shows the witness's row and the quorum; the tlog-proof panel offers each memory's proof, whose download is
byte for byte what `python -m receipts tlog-proof RECEIPT SEQ` prints, carrying the cosignature; a pasted policy
naming another witness key fails the quorum.

Without chromium or playwright these tests skip with the install command — except under CI=true.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import app
from cli import prog_receipts as receipts_cli
from receipts.cosignature import parse_policy, witness_key
from receipts.keys import SigningKey
from receipts.note import NoteVerifier, verifier
from storage.local import load_or_create
from webui import ids

from ..browser_support import WAIT_MS, markdown, offline_app, open_tab, receipt_body, settled
from ..witness_support import Witness, serving
from .test_browser import open_visitor, rows_by_check, send, upload

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.browser


class _AnySession(dict):  # type: ignore[type-arg]
    """The witness's logs: every session's origin under the app's key (a browser's session id is not known ahead)."""

    def __init__(self, log: NoteVerifier) -> None:
        super().__init__()
        self.log = log

    def get(self, origin: str, default: Any = None) -> Any:
        return self.log if origin.startswith(self.log.name + "/") else default


@pytest.fixture(scope="module")
def witnessed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data = tmp_path_factory.mktemp("witness-data") / "data"
    log = verifier(load_or_create(data).public_key)  # the app's key, made first: the policy names it
    w = Witness("w1.example/w", SigningKey.from_seed(bytes([8]) * 32), _AnySession(log))
    with serving(w):
        policy = f"log {log.vkey()}\nwitness w1 {w.public.vkey()} {w.url}\nquorum w1\n"
        with offline_app(data, mcp=False, witnesses=parse_policy(policy)) as running:
            yield {"running": running, "data": data, "policy": policy, "witness": w}


def test_the_verify_tab_shows_the_witness_rows_and_offers_each_memorys_tlog_proof(
    browser: Browser, witnessed: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from playwright.sync_api import expect

    running: app.Running = witnessed["running"]
    v = open_visitor(browser, running.url)
    page = v.page
    try:
        send(page, "My canoe is painted yellow")
        send(page, "What colour is my canoe?")
        assert witnessed["witness"].requests, "the witness was never asked"
        with page.expect_download(timeout=WAIT_MS) as info:
            page.locator(f"#{ids.RECEIPT_DOWNLOAD}").click()
        receipt = tmp_path / info.value.suggested_filename
        info.value.save_as(str(receipt))
        body = receipt_body(receipt.read_bytes())
        assert [c["name"] for c in body["witnesses"]["cosignatures"]] == ["w1.example/w"]

        # the app's policy: the cosignature is checked, a row per witness and the quorum
        open_tab(page, ids.TAB_VERIFY)
        upload(page, receipt)
        verdict = markdown(page, ids.VERIFY_VERDICT)
        expect(verdict).to_contain_text("Witnesses")
        settled(page, ids.VERIFY_VERDICT)
        assert "Verified" in verdict.inner_text()
        rows = rows_by_check(page)
        assert rows["witness.w1"][1].endswith("pass") and rows["witness.quorum"][1].endswith("pass"), rows

        # each memory's tlog-proof: the panel offers the first memory; its download is the CLI's bytes
        page.locator(f"#{ids.VERIFY_PROOFS} button.label-wrap").first.click()
        seq = body["memories"][0]["event"]["seq"]
        expect(page.locator(f"#{ids.PROOF_TEXT}")).to_contain_text("c2sp.org/tlog-proof@v1")
        expect(page.locator(f"#{ids.PROOF_TEXT}")).to_contain_text("w1.example/w")
        expect(markdown(page, ids.PROOF_STATUS)).to_contain_text(f"seq {seq}")
        with page.expect_download(timeout=WAIT_MS) as info:
            page.locator(f"#{ids.PROOF_DOWNLOAD}").click()
        proof = tmp_path / info.value.suggested_filename
        info.value.save_as(str(proof))
        capsys.readouterr()
        assert receipts_cli.main(["tlog-proof", str(receipt), str(seq), "--data", str(witnessed["data"])]) == 0
        assert proof.read_text("utf-8") == capsys.readouterr().out

        # the question's proof, picked from the list
        q = body["query"]["event"]["seq"]
        page.locator(f"#{ids.PROOF_PICK} input").click()
        page.get_by_role("option", name=f"the question (seq {q})").click()
        expect(markdown(page, ids.PROOF_STATUS)).to_contain_text(f"seq {q}")
        expect(page.locator(f"#{ids.PROOF_TEXT}")).to_contain_text(f"index {q}")

        # a pasted policy naming another key for w1: the cosignature no longer counts, the quorum fails
        other = witness_key(SigningKey.from_seed(bytes([9]) * 32).public_key, "w1.example/w").vkey()
        lines = witnessed["policy"].split("\n")
        lines[1] = f"witness w1 {other}"
        page.locator(f"#{ids.VERIFY_POLICY_BOX} button.label-wrap").first.click()
        page.locator(f"#{ids.VERIFY_POLICY} textarea").fill("\n".join(lines))
        page.locator(f"#{ids.VERIFY_BUTTON}").click()
        expect(verdict).to_contain_text("Failed")
        settled(page, ids.VERIFY_VERDICT)
        assert "witness.quorum" in verdict.inner_text()
        assert not v.errors and not v.off_loopback, (v.errors, v.off_loopback)
    finally:
        v.context.close()
