"""Ask me first in a real browser (issue 11): the way a person does it.

A visitor says three things, turns on "Ask me before memories reach the model" (a reload finds it still on: the
setting is the session's, kept on the server), asks a question, sees the
proposed memories all ticked, unticks two and sends: the downloaded receipt verifies (offline and against the
data directory) and lists exactly those two as withheld, and the prompt hash covers the approved ones only
(`consent.prompt`). Then another question, Cancel: no assistant event, no receipt, no answer on screen.
`MRE_WRITE_README_SCREENSHOT=1` also rewrites docs/screenshot-consent.png (the consent step, before Send).

Without chromium or playwright these tests skip with the install command — except under CI=true.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import app
from control.settings import get_consent
from receipts.verify import PASS
from storage.files.receipts.api import verify_bytes
from webui import ids
from webui import render_controls as rc

from ..browser_support import (
    RECEIPT_ID,
    WAIT_MS,
    offline_app,
    receipt_body,
    text_of,
    toasts,
)
from .test_browser import ROOT, open_visitor, send, session_id_shown, shot

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.browser

SCREENSHOT = ROOT / "docs" / "screenshot-consent.png"
MEMORIES = ("My cat Miso likes tuna", "My cat Miso sleeps on the radiator", "My cat Miso was born in March")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[app.Running]:
    with offline_app(tmp_path_factory.mktemp("consent-data")) as running:
        yield running


def propose(page: Page, question: str) -> list[tuple[str, int]]:
    """With the setting on: type the question, Send, and wait for the proposal; (label, seq) of each tick box."""
    from playwright.sync_api import expect

    page.locator(f"#{ids.CHAT_INPUT} textarea").fill(question)
    page.locator(f"#{ids.CHAT_SEND}").click()
    box = page.locator(f"#{ids.CONSENT_BOX}")
    expect(box).to_be_visible()
    expect(page.locator(f"#{ids.CONSENT_PICK} label").first).to_be_visible()
    labels = [t.strip() for t in page.locator(f"#{ids.CONSENT_PICK} label").all_inner_texts()]
    found = []
    for label in labels:
        m = re.search(r"seq (\d+)", label)
        assert m, label
        found.append((label, int(m.group(1))))
    return found


def counts(server: app.Running, session: str) -> tuple[int, int]:
    """(events in the ledger, receipts on disk) of the session."""
    folder = server.service.data_dir / "sessions" / session / "receipts"
    return server.service.engine.ledger.head(session)[0], len(list(folder.glob("*.json")))


def test_unticked_memories_are_withheld_from_the_model_and_the_receipt_says_so_and_cancel_sends_nothing(
    browser: Browser, server: app.Running, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    v = open_visitor(browser, server.url)
    page = v.page
    try:
        for text in MEMORIES:
            send(page, text)
        session = session_id_shown(page)
        note = page.locator(f"#{ids.CONSENT_NOTE}")
        expect(note).to_contain_text("off")
        page.locator(f"#{ids.CONSENT_TOGGLE} input[type=checkbox]").check()
        expect(note).to_contain_text("is on for this session")
        # The setting is the session's, kept on the server: a reload finds it on (it used to come back off).
        deadline = time.monotonic() + WAIT_MS / 1000
        while not get_consent(server.service.data_dir, session) and time.monotonic() < deadline:
            page.wait_for_timeout(50)
        assert get_consent(server.service.data_dir, session), "the setting is stored on the server"
        page.reload()
        expect(page.locator(f"#{ids.CONSENT_TOGGLE} input[type=checkbox]")).to_be_checked()
        expect(note).to_contain_text("is on for this session")
        assert session_id_shown(page) == session

        before = counts(server, session)
        proposed = propose(page, "What do you know about my cat Miso?")
        # the three memories, never the offline stand-in's answers that quote them (issue 31: boilerplate, not memories)
        assert sorted(seq for _label, seq in proposed) == [0, 2, 4], proposed
        assert counts(server, session) == before, "a proposal appends nothing"
        boxes = page.locator(f"#{ids.CONSENT_PICK} input[type=checkbox]")
        assert all(boxes.nth(i).is_checked() for i in range(len(proposed))), "every proposed memory starts ticked"
        expect(page.locator(f"#{ids.CONSENT_PROPOSAL}")).to_contain_text("would reach the model")

        withheld = [proposed[1][1], proposed[2][1]]
        boxes.nth(1).uncheck()
        boxes.nth(2).uncheck()
        if os.environ.get("MRE_WRITE_README_SCREENSHOT") == "1":
            page.mouse.move(0, 0)
            page.locator(f"#{ids.CONSENT_BOX}").scroll_into_view_if_needed()
            page.wait_for_timeout(300)
            assert toasts(page) == []
            page.screenshot(path=str(SCREENSHOT), full_page=True)
        shot(page, "consent-step.png")

        shown = RECEIPT_ID.search(text_of(page, ids.STAMPS))
        page.locator(f"#{ids.CONSENT_SEND}").click()
        expect(page.locator(f"#{ids.CONSENT_BOX}")).to_be_hidden()
        stamps = page.locator(f"#{ids.STAMPS}")
        expect(stamps).to_contain_text("withheld from the model")
        rid = RECEIPT_ID.search(text_of(page, ids.STAMPS))
        assert rid and (shown is None or rid.group(0) != shown.group(0))
        expect(stamps).to_contain_text(f"withheld from the model: seq {withheld[0]}, seq {withheld[1]}")
        expect(page.locator(f"#{ids.RECEIPT_DOWNLOAD}")).to_contain_text(rid.group(0)[:13])
        with page.expect_download(timeout=WAIT_MS) as info:
            page.locator(f"#{ids.RECEIPT_DOWNLOAD}").click()
        path = tmp_path / "receipt.json"
        info.value.save_as(path)
        raw = path.read_bytes()
        body = receipt_body(raw)
        assert body["consent"]["withheld"] == withheld
        assert body["consent"]["approved"] == [s for _label, s in proposed if s not in withheld]
        assert [m["event"]["seq"] for m in body["memories"]] == body["consent"]["approved"]
        trusted = [server.service.engine.key.public_key]
        for data_dir in (None, server.service.data_dir):
            report = verify_bytes(raw, trusted=trusted, data_dir=data_dir)
            assert report.verdict == "verified", [c for c in report.checks if c.status != PASS]
            assert {c.name: c.status for c in report.checks}["consent.prompt"] == PASS

        # Cancel: nothing sent, nothing stored, no answer on screen; the question goes back into the box.
        before = counts(server, session)
        answers = page.locator(f"#{ids.CHAT_HISTORY} .message-row.bot-row, #{ids.CHAT_HISTORY} .bot").count()
        question = "Does my cat Miso like fish?"
        propose(page, question)
        page.locator(f"#{ids.CONSENT_CANCEL}").click()
        expect(page.locator(f"#{ids.CONSENT_BOX}")).to_be_hidden()
        expect(page.locator(f"#{ids.CHAT_HISTORY}")).to_contain_text(rc.CANCELLED_TITLE)
        expect(page.locator(f"#{ids.CHAT_INPUT} textarea")).to_have_value(question)
        assert counts(server, session) == before, "cancel appends no event and writes no receipt"
        events = list(server.service.engine.ledger.events(session))
        assert [e.role for e in events].count("assistant") == 4 and question not in [e.text for e in events]
        assert (
            page.locator(f"#{ids.CHAT_HISTORY} .message-row.bot-row, #{ids.CHAT_HISTORY} .bot").count() <= answers + 1
        )
        assert rc.CONSENT_LABEL in page.locator(f"#{ids.CONSENT_TOGGLE}").inner_text()
        v.check_clean()
    finally:
        v.context.close()


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 900}, {"width": 390, "height": 844}], ids=["1280px", "390px"])
def test_the_proposal_reads_as_the_next_turn_below_the_last_turns_stamps_and_is_brought_into_view(
    browser: Browser, server: app.Running, viewport: dict
) -> None:
    """Issue 31: the proposal showed above the previous turn's stamps, which then read as if they were its own. It now
    comes after everything about the last turn (its stamps, its receipt, the tools on its memories), and Send brings
    it into view."""
    from playwright.sync_api import expect

    context = browser.new_context(viewport=viewport)  # type: ignore[arg-type]
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    try:
        page.goto(server.url, wait_until="load")
        page.locator(f"#{ids.CHAT_INPUT} textarea").wait_for(state="visible")
        send(page, MEMORIES[0])
        send(page, "Which cat likes tuna?")  # the last turn: its stamps list the memory
        expect(page.locator(f"#{ids.STAMPS}")).to_contain_text("Miso likes tuna")
        page.locator(f"#{ids.CONSENT_TOGGLE} input[type=checkbox]").check()
        expect(page.locator(f"#{ids.CONSENT_NOTE}")).to_contain_text("is on for this session")
        page.evaluate("window.scrollTo(0, 0)")
        propose(page, "What does Miso like?")
        box = page.locator(f"#{ids.CONSENT_BOX}")
        expect(box).to_be_in_viewport()
        top = box.bounding_box()
        assert top is not None
        for before in (ids.STAMPS, ids.RECEIPT_DOWNLOAD, ids.TURN_SHARE_TOOLS, ids.TURN_TOOLS):
            above = page.locator(f"#{before}").bounding_box()
            assert above is not None and above["y"] + above["height"] <= top["y"] + 1, (before, above, top)
    finally:
        context.close()
