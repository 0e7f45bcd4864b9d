"""Forgetting a memory in a real browser (issue 10, the app): the way a person does it.

A visitor chats two turns, the first holding a marker word; on the Ledger tab they select that row, press
Forget…, read the confirmation (the memory and the answers that go with it), confirm, and download the
erasure certificate, which verifies offline and against the data directory. The chat then reads
[forgotten] where the words were — and still does after a reload, when searching for the marker finds
nothing. A second visitor shares a receipt with the memory withheld (the Verify tab reads it [withheld]),
forgets it from the turn's list (Cancel first, which changes nothing), then forgets the whole session and
downloads its certificate. Screenshots go to test-artifacts/ (gitignored).

Without chromium or playwright these tests skip with the install command — except under CI=true.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import app
from receipts.verify import PASS
from storage.files.receipts.certificate_io import verify_certificate_bytes
from webui import ids

from ..browser_support import (
    WAIT_MS,
    markdown,
    offline_app,
    open_tab,
    read_grid,
    settled,
    toasts,
)
from ..forget_support import MARKER, files_with_marker
from .test_browser import open_visitor, send, session_id_shown, shot, upload, wait_for_session

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.browser

MESSAGES = (f"My locker code word is {MARKER}", "What is my locker code word?")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[app.Running]:
    # Gradio's file cache of its own: the grep below covers all of it, and the machine's shared /tmp/gradio
    # holds other runs' copies of the same marker.
    cache = str(tmp_path_factory.mktemp("gradio-cache"))
    with offline_app(tmp_path_factory.mktemp("forget-data"), env={"GRADIO_TEMP_DIR": cache}) as running:
        yield running


def test_a_memory_forgotten_from_the_ledger_tab_reads_forgotten_and_search_no_longer_finds_it(
    browser: Browser, server: app.Running, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    v = open_visitor(browser, server.url)
    page = v.page
    try:
        for message in MESSAGES:
            send(page, message)
        expect(page.locator(f"#{ids.CHAT_HISTORY}")).to_contain_text(MARKER)

        # The Ledger tab: select the memory's row, then Forget….
        open_tab(page, ids.TAB_LEDGER)
        rows = read_grid(page, ids.LEDGER_EVENTS)
        index = next(i for i, row in enumerate(rows) if MARKER in row[3])
        seq = rows[index][0]
        page.locator(f"#{ids.LEDGER_EVENTS} [role=row][data-index='{index}'] [role=gridcell]").nth(3).click()
        expect(page.locator(f"#{ids.FORGET_LEDGER_SEQ} textarea, #{ids.FORGET_LEDGER_SEQ} input").first).to_have_value(
            seq
        )
        page.locator(f"#{ids.FORGET_LEDGER_BUTTON}").click()

        # The confirmation lists the memory and the answers that go with it; nothing is erased yet.
        preview = markdown(page, ids.FORGET_PREVIEW)
        expect(preview).to_contain_text("Answers that go with it")
        expect(preview).to_contain_text(MARKER)
        assert any(
            MARKER.encode() in p.read_bytes() for p in (server.service.data_dir / "sessions").rglob("events.jsonl")
        )
        assert files_with_marker(*server.service.cache_dirs), "the receipt downloads are in the app's caches"
        shot(page, "forget-confirm.png")
        page.locator(f"#{ids.FORGET_CONFIRM}").click()
        expect(preview).to_contain_text("Forgotten:")
        settled(page, ids.LEDGER_EVENTS)

        # The certificate downloads and verifies, offline and against the data directory.
        with page.expect_download(timeout=WAIT_MS) as info:
            page.locator(f"#{ids.FORGET_CERTIFICATE}").click()
        assert re.fullmatch(r"erasure-[0-9a-f]{32}-\d+\.json", info.value.suggested_filename)
        path = tmp_path / info.value.suggested_filename
        info.value.save_as(str(path))
        raw = path.read_bytes()
        key = server.service.engine.key.public_key
        for data_dir in (None, server.service.data_dir):
            report = verify_certificate_bytes(raw, trusted=[key], data_dir=data_dir)
            assert report.verdict == "verified", [c for c in report.checks if c.status != PASS]

        # The ledger and the chat read [forgotten]; the marker is gone from the page and from every file we own.
        expect(page.locator(f"#{ids.LEDGER_EVENTS}")).to_contain_text("[forgotten]")
        assert all(MARKER not in cell for row in read_grid(page, ids.LEDGER_EVENTS) for cell in row)
        page.locator(f"#{ids.FORGET_CANCEL}").click()  # "Close"
        expect(page.locator(f"#{ids.FORGET_BOX}")).to_be_hidden()
        open_tab(page, ids.TAB_CHAT)
        chat = page.locator(f"#{ids.CHAT_HISTORY}")
        expect(chat).to_contain_text("[forgotten]")
        expect(chat).not_to_contain_text(MARKER)
        expect(chat).to_contain_text(MESSAGES[1])  # the question that was not named stays
        assert files_with_marker(server.service.data_dir, *server.service.cache_dirs) == []
        shot(page, "forget-chat.png")

        # After a reload: still [forgotten], and search does not find the marker.
        page.reload(wait_until="load")
        wait_for_session(page)
        expect(chat).to_contain_text("[forgotten]")
        expect(chat).not_to_contain_text(MARKER)
        open_tab(page, ids.TAB_SEARCH)
        page.locator(f"#{ids.SEARCH_QUERY} textarea").fill(MARKER)
        page.locator(f"#{ids.SEARCH_BUTTON}").click()
        expect(markdown(page, ids.SEARCH_STATUS)).to_contain_text("No results")
        assert read_grid(page, ids.SEARCH_RESULTS) == []
        v.check_clean()
        assert toasts(page) == []
    finally:
        v.context.close()


def test_withholding_a_memory_forgetting_from_the_turn_and_forgetting_the_whole_session(
    browser: Browser, server: app.Running, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    v = open_visitor(browser, server.url)
    page = v.page
    try:
        for message in MESSAGES:
            send(page, message)
        old_session = session_id_shown(page)

        # Withhold the memory from a shared copy: the Verify tab reads it [withheld].
        page.locator(f"#{ids.TURN_SHARE_TOOLS} button.label-wrap").click()
        page.locator(f"#{ids.WITHHOLD_PICK} label").filter(has_text=MARKER).click()
        expect(page.locator(f"#{ids.WITHHELD_DOWNLOAD}")).to_contain_text("without seq 0")
        with page.expect_download(timeout=WAIT_MS) as info:
            page.locator(f"#{ids.WITHHELD_DOWNLOAD}").click()
        assert info.value.suggested_filename.endswith("-withheld.json")
        copy = tmp_path / info.value.suggested_filename
        info.value.save_as(str(copy))
        open_tab(page, ids.TAB_VERIFY)
        upload(page, copy)
        verdict = markdown(page, ids.VERIFY_VERDICT)
        expect(verdict).to_contain_text("[withheld]")
        expect(verdict).to_contain_text("Verified")

        # Forget the memory from the turn's list; Cancel first changes nothing.
        open_tab(page, ids.TAB_CHAT)
        page.locator(f"#{ids.TURN_TOOLS} button.label-wrap").click()  # the memory tools: an accordion of their own
        page.locator(f"#{ids.FORGET_TURN_PICK} input").click()
        page.get_by_role("option").filter(has_text="memory#1 · seq 0").click()
        page.locator(f"#{ids.FORGET_TURN_BUTTON}").click()
        expect(markdown(page, ids.FORGET_PREVIEW)).to_contain_text("Answers that go with it")
        page.locator(f"#{ids.FORGET_CANCEL}").click()
        expect(page.locator(f"#{ids.FORGET_BOX}")).to_be_hidden()
        expect(page.locator(f"#{ids.CHAT_HISTORY}")).to_contain_text(MARKER)
        page.locator(f"#{ids.FORGET_TURN_BUTTON}").click()
        page.locator(f"#{ids.FORGET_CONFIRM}").click()
        expect(markdown(page, ids.FORGET_PREVIEW)).to_contain_text("Forgotten:")
        expect(page.locator(f"#{ids.CHAT_HISTORY}")).to_contain_text("[forgotten]")
        expect(page.locator(f"#{ids.CHAT_HISTORY}")).not_to_contain_text(MARKER)
        page.locator(f"#{ids.FORGET_CANCEL}").click()

        # Forget the whole session (the danger zone): a certificate, then a new, empty session.
        page.get_by_role("button", name="Your session").click()
        page.locator(f"#{ids.FORGET_SESSION_BUTTON}").click()
        expect(markdown(page, ids.FORGET_PREVIEW)).to_contain_text("Forget this whole session?")
        page.locator(f"#{ids.FORGET_CONFIRM}").click()
        expect(markdown(page, ids.FORGET_PREVIEW)).to_contain_text("Session forgotten")
        with page.expect_download(timeout=WAIT_MS) as info:
            page.locator(f"#{ids.FORGET_CERTIFICATE}").click()
        path = tmp_path / info.value.suggested_filename
        info.value.save_as(str(path))
        report = verify_certificate_bytes(path.read_bytes(), trusted=[server.service.engine.key.public_key])
        assert report.verdict == "verified" and report.scope == "session"
        expect(page.locator(f"#{ids.SESSION_ID}")).not_to_contain_text(old_session)
        assert not server.service.engine.ledger.exists(old_session)
        expect(page.locator(f"#{ids.CHAT_HISTORY}")).not_to_contain_text(MESSAGES[1])
        v.check_clean()
    finally:
        v.context.close()


ERROR_OVERLAY = "[data-testid=status-tracker] span.error"  # Gradio's "Error" overlay on an output of a failed event


def test_a_refused_reason_leaves_the_panel_usable_keeps_the_reason_and_says_why_beside_it(
    browser: Browser, server: app.Running
) -> None:
    """Issue 28 §6: a reason repeating a word of the memory is refused — the preview, the reason box, Forget it for
    good and Cancel stay usable (no "Error" overlay on any of them), the typed reason stays, the refusal is written
    in the panel under the reason; the reason is then edited and the forget goes through."""
    from playwright.sync_api import expect

    v = open_visitor(browser, server.url)
    page = v.page
    try:
        send(page, MESSAGES[0])
        open_tab(page, ids.TAB_LEDGER)
        rows = read_grid(page, ids.LEDGER_EVENTS)
        seq = next(row[0] for row in rows if MARKER in row[3])
        page.locator(f"#{ids.FORGET_LEDGER_SEQ} textarea, #{ids.FORGET_LEDGER_SEQ} input").first.fill(seq)
        page.locator(f"#{ids.FORGET_LEDGER_BUTTON}").click()
        preview = markdown(page, ids.FORGET_PREVIEW)
        expect(preview).to_contain_text(MARKER)

        reason_box = page.locator(f"#{ids.FORGET_REASON} textarea")
        typed = f"it mentioned {MARKER} by mistake"
        reason_box.fill(typed)
        page.locator(f"#{ids.FORGET_CONFIRM}").click()
        status = markdown(page, ids.FORGET_STATUS)
        expect(status).to_contain_text("repeats a word")
        settled(page, ids.FORGET_PREVIEW)
        for elem in (ids.FORGET_PREVIEW, ids.FORGET_REASON, ids.FORGET_STATUS):
            settled(page, elem)
        expect(page.locator(f"#{ids.FORGET_BOX}").locator(ERROR_OVERLAY)).to_have_count(0)
        expect(page.locator(ERROR_OVERLAY)).to_have_count(0)
        expect(preview).to_contain_text(MARKER)  # the preview is still there, not an overlay
        expect(reason_box).to_have_value(typed)
        expect(reason_box).to_be_editable()
        expect(page.locator(f"#{ids.FORGET_CONFIRM}")).to_be_enabled()
        shot(page, "forget-refused-reason.png")
        assert any(MARKER.encode() in p.read_bytes() for p in (server.service.data_dir / "sessions").rglob("events.jsonl"))

        # The reason is edited in place; the status line goes with the next answer.
        reason_box.fill("a private detail")
        page.locator(f"#{ids.FORGET_CONFIRM}").click()
        expect(preview).to_contain_text("Forgotten:")
        expect(status).not_to_contain_text("repeats a word")
        page.locator(f"#{ids.FORGET_CANCEL}").click()  # "Close"
        expect(page.locator(f"#{ids.FORGET_BOX}")).to_be_hidden()
        assert not any(
            MARKER.encode() in p.read_bytes() for p in (server.service.data_dir / "sessions").rglob("events.jsonl")
        )
    finally:
        v.context.close()


def test_cancel_still_works_after_a_refused_reason(browser: Browser, server: app.Running) -> None:
    """From the Chat tab's Forget… (the same panel): after the refusal, Cancel is clickable and closes the panel,
    and nothing was forgotten."""
    from playwright.sync_api import expect

    v = open_visitor(browser, server.url)
    page = v.page
    try:
        send(page, MESSAGES[0])
        send(page, MESSAGES[1])
        page.locator(f"#{ids.TURN_TOOLS} button.label-wrap").click()
        page.locator(f"#{ids.FORGET_TURN_PICK} input").click()
        page.get_by_role("option").filter(has_text="memory#1 · seq 0").click()
        page.locator(f"#{ids.FORGET_TURN_BUTTON}").click()
        expect(markdown(page, ids.FORGET_PREVIEW)).to_contain_text("Answers that go with it")
        page.locator(f"#{ids.FORGET_REASON} textarea").fill(f"{MARKER} again")
        page.locator(f"#{ids.FORGET_CONFIRM}").click()
        expect(markdown(page, ids.FORGET_STATUS)).to_contain_text("repeats a word")
        expect(page.locator(ERROR_OVERLAY)).to_have_count(0)
        page.locator(f"#{ids.FORGET_CANCEL}").click(timeout=5_000)
        expect(page.locator(f"#{ids.FORGET_BOX}")).to_be_hidden()
        expect(page.locator(f"#{ids.CHAT_HISTORY}")).to_contain_text(MARKER)
    finally:
        v.context.close()
