"""Correct this in a real browser (issue 12): the way a person does it.

A visitor says "I live in Leeds", opens the Ledger tab, selects that row, types "I live in Bristol" beside
Correct this and clicks it: the status says seq N superseded by seq M, the ledger shows the old statement struck
through naming the new seq, and History lists both, oldest first. Correct this with nothing typed is a toast and
appends nothing. A refused Revoke or Correct this (a reason repeating the memory's word) is a status line beside the
control and a toast — no "Error" overlay, the reason and the new statement typed stay editable (issue 28 §6).
`MRE_WRITE_README_SCREENSHOT=1` also rewrites docs/screenshot-supersede.png (the ledger view with the old fact struck
through, and its history).

Without chromium or playwright these tests skip with the install command — except under CI=true.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

import app
from ledger.supersessions import VISITOR, supersession_of
from webui import ids

from ..browser_support import WAIT_MS, markdown, offline_app, open_tab, read_grid, settled, toasts
from .test_browser import ROOT, open_visitor, send, session_id_shown, shot

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.browser

SCREENSHOT = ROOT / "docs" / "screenshot-supersede.png"
OLD = "I live in Leeds"
NEW = "I live in Bristol"

# The computed text-decoration of the grid cell holding `text` (or of anything inside it): "line-through" when struck.
_DECORATION = """
([sel, text]) => {
  const cells = [...document.querySelectorAll(sel + ' [role=gridcell]')].filter(c => c.innerText.includes(text));
  return cells.map(c => [c, ...c.querySelectorAll('*')].some(
    e => getComputedStyle(e).textDecorationLine.includes('line-through')));
}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[app.Running]:
    with offline_app(tmp_path_factory.mktemp("supersede-data")) as running:
        yield running


def struck(page: Page, elem_id: str, text: str) -> list[bool]:
    return list(page.evaluate(_DECORATION, [f"#{elem_id}", text]))


def write_screenshot(page: Page) -> None:
    """The ledger table and the history under it, clipped to them (docs/guides/facts.md's picture of a fact changing)."""
    page.mouse.move(0, 0)
    page.locator(f"#{ids.LEDGER_STATUS}").scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    assert toasts(page) == []
    top = page.locator(f"#{ids.LEDGER_STATUS}").bounding_box()
    bottom = page.locator(f"#{ids.MEMORY_HISTORY}-ledger").bounding_box()
    assert top is not None and bottom is not None
    scroll = page.evaluate("() => window.scrollY")  # bounding boxes are in the viewport; a full-page clip is not
    y = top["y"] + scroll - 12
    width = page.viewport_size["width"] if page.viewport_size else 1280
    height = bottom["y"] + scroll + bottom["height"] + 16 - y
    page.screenshot(path=str(SCREENSHOT), full_page=True, clip={"x": 0, "y": y, "width": width, "height": height})


def test_correct_this_from_the_ledger_strikes_the_old_fact_through_and_history_lists_both(
    browser: Browser, server: app.Running
) -> None:
    from playwright.sync_api import expect

    v = open_visitor(browser, server.url)
    page = v.page
    try:
        send(page, OLD)
        session = session_id_shown(page)
        open_tab(page, ids.TAB_LEDGER)
        rows = read_grid(page, ids.LEDGER_EVENTS)
        index = next(i for i, row in enumerate(rows) if row[1] == "user" and row[3] == OLD)
        old_seq = int(rows[index][0])
        page.locator(f"#{ids.LEDGER_EVENTS} [role=row][data-index='{index}'] [role=gridcell]").nth(3).click()
        seq_box = page.locator(f"#{ids.FORGET_LEDGER_SEQ} textarea, #{ids.FORGET_LEDGER_SEQ} input").first
        expect(seq_box).to_have_value(str(old_seq))

        # Nothing typed: a toast, nothing appended.
        before = server.service.engine.ledger.head(session)[0]
        page.locator(f"#{ids.CORRECT_BUTTON}-ledger").click()
        expect(page.get_by_test_id("toast-body").first).to_contain_text("type the statement that holds now")
        assert server.service.engine.ledger.head(session)[0] == before
        for close in page.locator("[data-testid=toast-close]").all():
            close.click()

        page.locator(f"#{ids.CORRECT_TEXT}-ledger textarea").fill(NEW)
        page.locator(f"#{ids.CORRECT_BUTTON}-ledger").click()
        new_seq, record_seq = before, before + 1
        status = markdown(page, ids.CONTROL_LEDGER_STATUS)
        expect(status).to_contain_text(f"seq {old_seq} superseded by seq {new_seq}: “{NEW}”", timeout=WAIT_MS)
        expect(page.locator(f"#{ids.CORRECT_TEXT}-ledger textarea")).to_have_value("")

        # The ledger: the new user statement and a supersession record decided by the visitor.
        events = list(server.service.engine.ledger.events(session))
        assert (events[new_seq].role, events[new_seq].text) == ("user", NEW)
        record = supersession_of(events[record_seq].role, events[record_seq].text, events[record_seq].meta, record_seq)
        assert record is not None and (record.old_seq, record.new_seq, record.decided_by) == (old_seq, new_seq, VISITOR)

        # The ledger view: the old statement struck through, naming the seq that replaced it; the new one not.
        expect(page.locator(f"#{ids.LEDGER_EVENTS}")).to_contain_text(f"superseded by seq {new_seq}")
        settled(page, ids.LEDGER_EVENTS)
        texts = [row[3] for row in read_grid(page, ids.LEDGER_EVENTS)]
        assert f"superseded by seq {new_seq} · {OLD}" in texts and NEW in texts
        assert struck(page, ids.LEDGER_EVENTS, f"superseded by seq {new_seq}") == [True]
        assert struck(page, ids.LEDGER_EVENTS, NEW) == [False]

        # History, one click away: both statements, oldest first, the old one struck through.
        page.locator(f"#{ids.HISTORY_BUTTON}-ledger").click()
        history = markdown(page, f"{ids.MEMORY_HISTORY}-ledger")
        expect(history).to_contain_text("2 statements, oldest first")
        body = history.inner_text()
        assert body.index(OLD) < body.index(NEW) and f"superseded by seq {new_seq}" in body and "visitor" in body
        expect(history.locator("del, s").first).to_have_text(OLD)
        if os.environ.get("MRE_WRITE_README_SCREENSHOT") == "1":
            write_screenshot(page)
        shot(page, "supersede-ledger.png")
        v.check_clean()
    finally:
        v.context.close()


def test_manual_search_hides_the_superseded_fact_unless_history_is_asked(browser: Browser, server: app.Running) -> None:
    from playwright.sync_api import expect

    v = open_visitor(browser, server.url)
    page = v.page
    try:
        send(page, "My dev server port is 3000")
        session = session_id_shown(page)
        server.service.engine.ledger.head(session)
        open_tab(page, ids.TAB_SEARCH)
        page.locator(f"#{ids.SEARCH_QUERY} textarea").fill("dev server port")
        page.locator(f"#{ids.SEARCH_BUTTON}").click()
        expect(page.locator(f"#{ids.SEARCH_RESULTS}")).to_contain_text("3000")
        rows = read_grid(page, ids.SEARCH_RESULTS)
        seq = next(row[2] for row in rows if row[3] == "user" and "port is 3000" in row[4])
        page.locator(f"#{ids.FORGET_SEARCH_SEQ} textarea").fill(seq)
        page.locator(f"#{ids.CORRECT_TEXT}-search textarea").fill("My dev server port is 8080")
        page.locator(f"#{ids.CORRECT_BUTTON}-search").click()
        expect(markdown(page, ids.CONTROL_SEARCH_STATUS)).to_contain_text(f"seq {seq} superseded by seq")
        settled(page, ids.SEARCH_RESULTS)
        expect(page.locator(f"#{ids.SEARCH_RESULTS}")).to_contain_text("8080")
        texts = [row[4] for row in read_grid(page, ids.SEARCH_RESULTS)]
        assert not any(t.endswith("port is 3000") for t in texts), texts
        page.locator(f"#{ids.SEARCH_INCLUDE_SUPERSEDED} input[type=checkbox]").check()
        expect(page.locator(f"#{ids.SEARCH_RESULTS}")).to_contain_text("superseded by seq")
        assert struck(page, ids.SEARCH_RESULTS, "superseded by seq") == [True]
        v.check_clean()
    finally:
        v.context.close()


ERROR_OVERLAY = "[data-testid=status-tracker] span.error"  # Gradio's "Error" overlay on an output of a failed event


def test_a_refused_revoke_or_correction_leaves_the_row_usable_keeps_the_text_typed_and_says_why_beside_it(
    browser: Browser, server: app.Running
) -> None:
    """Issue 28 §6, beyond the Forget panel: Revoke, then Correct this, with a reason that repeats the memory's word.
    Each is refused in the status line beside the buttons (and a toast); no output of the page carries Gradio's
    "Error" overlay (gr.Error put one on the status line and on the new-statement box); the reason and the new
    statement stay as typed and editable; nothing is appended. The reason is then edited in place and both go
    through, the ledger view refreshed after each."""
    from playwright.sync_api import expect

    v = open_visitor(browser, server.url)
    page = v.page
    try:
        send(page, OLD)
        session = session_id_shown(page)
        open_tab(page, ids.TAB_LEDGER)
        rows = read_grid(page, ids.LEDGER_EVENTS)
        old_seq = next(row[0] for row in rows if row[1] == "user" and row[3] == OLD)
        page.locator(f"#{ids.FORGET_LEDGER_SEQ} textarea, #{ids.FORGET_LEDGER_SEQ} input").first.fill(old_seq)
        reason = page.locator(f"#{ids.CONTROL_REASON}-ledger textarea")
        new_text = page.locator(f"#{ids.CORRECT_TEXT}-ledger textarea")
        status = markdown(page, ids.CONTROL_LEDGER_STATUS)
        typed = "that was about Leeds"
        reason.fill(typed)
        before = server.service.engine.ledger.head(session)[0]

        def usable_after_refusal(said: str) -> None:
            expect(status).to_contain_text(said)
            expect(status).to_contain_text("repeats a word")
            assert "Leeds" not in status.inner_text()
            expect(page.get_by_test_id("toast-body").first).to_contain_text("repeats a word")
            for elem in (ids.CONTROL_LEDGER_STATUS, f"{ids.CORRECT_TEXT}-ledger", f"{ids.CONTROL_REASON}-ledger"):
                settled(page, elem)
            settled(page, ids.LEDGER_EVENTS)
            expect(page.locator(ERROR_OVERLAY)).to_have_count(0)
            expect(reason).to_have_value(typed)
            expect(reason).to_be_editable()
            expect(new_text).to_be_editable()
            for button in (f"{ids.CORRECT_BUTTON}-ledger", ids.REVOKE_LEDGER_BUTTON, ids.RESTORE_LEDGER_BUTTON):
                expect(page.locator(f"#{button}")).to_be_enabled()
            assert server.service.engine.ledger.head(session)[0] == before
            for close in page.locator("[data-testid=toast-close]").all():
                close.click()

        page.locator(f"#{ids.REVOKE_LEDGER_BUTTON}").click()
        usable_after_refusal("Not revoked")

        new_text.fill(NEW)
        page.locator(f"#{ids.CORRECT_BUTTON}-ledger").click()
        usable_after_refusal("Not corrected")
        expect(new_text).to_have_value(NEW)  # the statement typed stays
        shot(page, "control-refused-reason.png")

        # The reason is edited in place: the revoke goes through and the ledger is refreshed (labelled revoked) …
        reason.fill("moved house")
        page.locator(f"#{ids.REVOKE_LEDGER_BUTTON}").click()
        expect(status).to_contain_text("Revoked")
        expect(page.locator(f"#{ids.LEDGER_EVENTS}")).to_contain_text("⛔ revoked")
        # … and so does the correction, still typed: the box is emptied, the old statement struck through.
        page.locator(f"#{ids.CORRECT_BUTTON}-ledger").click()
        expect(status).to_contain_text(f"seq {old_seq} superseded by seq")
        expect(new_text).to_have_value("")
        expect(page.locator(f"#{ids.LEDGER_EVENTS}")).to_contain_text(f"superseded by seq {before + 1}")
        expect(page.locator(ERROR_OVERLAY)).to_have_count(0)
        v.check_clean()
    finally:
        v.context.close()
