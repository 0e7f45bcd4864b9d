"""What a new user meets first, in a real browser at 390 and 1280 px (issue 31): the page loads at its top with the
Verify tab in reach; Verify opens with one verdict line (✅ Verified: … / ❌ Failed: naming what) before what the
receipt says; every mark of the grouped checks has a word beside it; on a phone those checks are stacked, not
squeezed to a letter per line; a refusal replaces the control's status line; a pasted key that opens nothing says so.

`MRE_WRITE_VERIFY_SCREENSHOTS=1` rewrites docs/screenshot-verify-1280.png and docs/screenshot-verify-390.png (the
Verify tab's first screen after Verify).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import app
from webui import ids
from webui.render import UNKNOWN_KEY_NOTE
from webui.sessions import new_session_key

from ..browser_support import RECEIPT_ID, WAIT_MS, is_loopback, markdown, offline_app, tamper_memory_text, text_of
from .test_browser import send, session_id_shown, upload, wait_for_session

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
ERROR_OVERLAY = "[data-testid=status-tracker] span.error"  # Gradio's "Error" overlay on an output of a failed event
MESSAGES = ("My sister is called Ines and she lives in Porto", "What is my sister called?")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[app.Running]:
    with offline_app(tmp_path_factory.mktemp("first-screen"), mcp=False) as running:
        yield running


def click_tab(page: Page, name: str) -> None:
    page.get_by_role("tab", name=name, exact=True).click()


def receipt_file(server: app.Running, page: Page) -> Path:
    rid = RECEIPT_ID.search(text_of(page, ids.STAMPS))
    assert rid is not None
    return server.service.data_dir / "sessions" / session_id_shown(page) / "receipts" / f"{rid.group(0)}.json"


@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["390px", "1280px"])
def test_the_first_screen_shows_the_tabs_and_verify_opens_with_its_verdict(
    browser: Browser, server: app.Running, viewport: dict, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    context = browser.new_context(viewport=viewport)  # type: ignore[arg-type]
    context.set_default_timeout(WAIT_MS)
    off_loopback: list[str] = []
    context.on("request", lambda req: None if is_loopback(req.url) else off_loopback.append(req.url))
    page = context.new_page()
    try:
        page.goto(server.url, wait_until="load")
        page.locator(f"#{ids.CHAT_INPUT} textarea").wait_for(state="visible")
        page.wait_for_timeout(500)  # what focus on load would do, it has done by now
        assert page.evaluate("window.scrollY") == 0, "the page scrolled on load (the message box took focus)"
        verify_tab = page.get_by_role("tab", name="Verify", exact=True)
        expect(verify_tab).to_be_visible()
        box = verify_tab.bounding_box()
        assert box is not None and box["x"] + box["width"] <= viewport["width"] and box["y"] < viewport["height"]
        wait_for_session(page)
        for m in MESSAGES:
            send(page, m)
        receipt = receipt_file(server, page)

        click_tab(page, "Verify")
        verdict = markdown(page, ids.VERIFY_VERDICT)
        upload(page, receipt)
        expect(verdict).to_contain_text("What this receipt says")
        first = verdict.locator("h3").first
        expect(first).to_contain_text(re.compile(r"^✅ Verified: (?:this memory|these \d+ memories), this question and this answer are exactly what the signed ledger holds, signed by key ed25519:"))
        fb = first.bounding_box()
        assert fb is not None and fb["y"] + fb["height"] <= viewport["height"], "the verdict line is below the fold"
        # A word beside every mark of the grouped checks.
        checks = verdict.locator("table").first  # the grouped checks ("Why these memories" below has a table of its own)
        results = [c.inner_text().strip() for c in checks.locator("td:first-child").all()]
        assert results and all(r == "✅ pass" for r in results), results
        # Each group's sentence keeps a readable width: stacked on a phone, a column on a desktop.
        widths = [c.bounding_box()["width"] for c in checks.locator("td:nth-child(3)").all()]  # type: ignore[index]
        assert widths and min(widths) >= (300 if viewport is PHONE else 250), widths
        if os.environ.get("MRE_WRITE_VERIFY_SCREENSHOTS") == "1":
            page.mouse.move(0, 0)
            page.evaluate("window.scrollTo(0, 0)")
            page.screenshot(path=str(ROOT / "docs" / f"screenshot-verify-{viewport['width']}.png"))

        # A tampered memory: the first line names the memory that fails.
        copy, number = tamper_memory_text(receipt.read_bytes(), MESSAGES[0])
        bad = tmp_path / "tampered.json"
        bad.write_bytes(copy)
        upload(page, bad)
        expect(first).to_contain_text(re.compile(rf"^❌ Failed: memory {number} \(seq \d+\) does not verify"))
        assert any(c.inner_text().strip() == "❌\ufe0f FAIL" for c in verdict.locator("td:first-child").all())
        assert off_loopback == []
    finally:
        context.close()


def test_revoking_twice_replaces_the_status_line_with_the_refusal(browser: Browser, server: app.Running) -> None:
    from playwright.sync_api import expect

    context = browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    try:
        page.goto(server.url, wait_until="load")
        wait_for_session(page)
        for m in MESSAGES:
            send(page, m)
        page.locator(f"#{ids.TURN_TOOLS} button.label-wrap").click()
        page.locator(f"#{ids.FORGET_TURN_PICK} input").click()
        page.get_by_role("option").filter(has_text="memory#1").first.click()
        status = markdown(page, ids.CONTROL_TURN_STATUS)
        page.locator(f"#{ids.REVOKE_TURN_BUTTON}").click()
        expect(status).to_contain_text("Revoked")
        page.locator(f"#{ids.REVOKE_TURN_BUTTON}").click()
        expect(status).to_contain_text("Not revoked")
        expect(status).to_contain_text("already revoked")
        expect(status).not_to_contain_text("✅")
        expect(page.locator(ERROR_OVERLAY)).to_have_count(0)  # no red "Error" pill across the line
        # the issue's own steps: Ledger, revoke seq 2 twice
        click_tab(page, "Ledger")
        status = markdown(page, ids.CONTROL_LEDGER_STATUS)
        seq = page.locator(f"#{ids.FORGET_LEDGER_SEQ} textarea, #{ids.FORGET_LEDGER_SEQ} input").first
        seq.fill("2")
        page.locator(f"#{ids.REVOKE_LEDGER_BUTTON}").click()
        expect(status).to_contain_text("Revoked")
        expect(status).to_contain_text("seq 2")
        page.locator(f"#{ids.REVOKE_LEDGER_BUTTON}").click()
        expect(status).to_contain_text("Not revoked")
        expect(status).to_contain_text("already revoked")
        expect(status).not_to_contain_text("✅")
        expect(status).not_to_contain_text("Control event at seq")
        expect(page.locator(ERROR_OVERLAY)).to_have_count(0)
    finally:
        context.close()


def test_a_pasted_key_that_opens_nothing_says_it_is_a_new_session(browser: Browser, server: app.Running) -> None:
    from playwright.sync_api import expect

    context = browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    try:
        page.goto(server.url, wait_until="load")
        wait_for_session(page)
        send(page, MESSAGES[0])
        mine = page.locator(f"#{ids.SESSION_KEY} input, #{ids.SESSION_KEY} textarea").first
        page.get_by_role("button", name="Your session").click()
        kept = mine.input_value()
        mine.fill(new_session_key())
        mine.press("Enter")
        note = markdown(page, ids.SESSION_ID)
        expect(note).to_contain_text("no history under this key — check it if you expected one")
        expect(page.get_by_test_id("toast-body").filter(has_text=UNKNOWN_KEY_NOTE)).to_have_count(1)
        mine.fill(kept)  # the key with a history opens it without the note
        mine.press("Enter")
        expect(note).not_to_contain_text("no history under this key")
    finally:
        context.close()
