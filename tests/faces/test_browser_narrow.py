"""The app on a phone (390 px wide) and on a desktop, in a real browser: tables a person can read.

At 390 px the stamps table used to wrap one letter per line ("s / e / q") and on a desktop "se q",
"assistan t". Here, after two turns, every header cell and every short cell (seq, role, digest prefix,
ids, scores, time) of the stamps, Manual search and Ledger tables is measured in the page: its text
lies on one line (the line boxes of its text, from `Range.getClientRects`) and is not cut off
(`scrollWidth` ≤ `clientWidth`). Only text columns may wrap, at word boundaries, and a table wider
than the screen scrolls sideways. Also: the chat's trash icon (which emptied the view only) is gone,
and a refused search clears the last one's results.

`MRE_WRITE_NARROW_SCREENSHOT=1` rewrites docs/screenshot-narrow.png (the chat tab at 390 px).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import app
from webui import ids
from webui.inputs import MAX_QUERY_CHARS

from ..browser_support import (
    WAIT_MS,
    is_loopback,
    markdown,
    offline_app,
    read_grid,
)
from .test_browser import send, wait_for_session

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
SCREENSHOT = ROOT / "docs" / "screenshot-narrow.png"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
MESSAGES = ("My cat is called Miso and she sleeps on the red sofa", "What is my cat called?")

# For every cell of the table under `sel`: its text, column, how many lines its text takes and by how
# many pixels it overflows its box. Lines are counted from the text's line boxes (rects whose tops
# differ by more than half a line), so an inline <code> with its own padding is still one line.
MEASURE = """
([sel, cellSel]) => {
  const root = document.querySelector(sel);
  if (!root) return null;
  const lines = (el) => {
    const range = document.createRange();
    range.selectNodeContents(el);
    const rects = [...range.getClientRects()].filter(r => r.width > 0 && r.height > 0).sort((a, b) => a.top - b.top);
    const lh = parseFloat(getComputedStyle(el).lineHeight) || parseFloat(getComputedStyle(el).fontSize) * 1.2;
    let n = 0, top = -Infinity;
    for (const r of rects) { if (r.top - top > lh / 2) { n += 1; top = r.top; } }
    return n;
  };
  return [...root.querySelectorAll(cellSel)].filter(el => el.innerText.trim()).map(el => {
    const cell = el.closest('[role=gridcell], [role=columnheader], th, td');
    const col = cell.dataset.col ?? cell.dataset.heading ?? String(cell.cellIndex);
    return {text: el.innerText.trim(), header: cell.matches('[role=columnheader], th'), col: Number(col),
            lines: lines(el), overflow: el.scrollWidth - el.clientWidth};
  });
}
"""
GRID_CELLS = "[role=columnheader] span, [role=gridcell] span"
MD_CELLS = "th, td"


def measure(page: Page, elem_id: str, cells: str) -> list[dict[str, Any]]:
    found = page.evaluate(MEASURE, [f"#{elem_id}", cells])
    assert found, f"#{elem_id}: no table cells found"
    return list(found)


def split_cells(cells: list[dict[str, Any]], text_cols: set[int]) -> list[str]:
    """Every header, and every cell outside the text columns, that takes more than one line or is cut off."""
    return [
        f"{'header' if c['header'] else 'cell'} {c['text']!r} (column {c['col']}): "
        f"{c['lines']} lines, {c['overflow']} px cut off"
        for c in cells
        if (c["header"] or c["col"] not in text_cols) and (c["lines"] != 1 or c["overflow"] > 1)
    ]


def open_tab(page: Page, name: str) -> None:
    """Click a tab; on a phone the later tabs sit in Gradio's "More tabs" menu."""
    tab = page.get_by_role("tab", name=name)
    if tab.is_visible():
        tab.click()
    else:
        page.get_by_role("button", name="More tabs").click()
        page.locator("button:visible", has_text=re.compile(f"^{re.escape(name)}$")).last.click()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[app.Running]:
    with offline_app(tmp_path_factory.mktemp("narrow-data"), mcp=False) as running:
        yield running


@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["390px", "1280px"])
def test_every_header_and_short_cell_stays_on_one_line(browser: Browser, server: app.Running, viewport: dict) -> None:
    from playwright.sync_api import expect

    context = browser.new_context(viewport=viewport)  # type: ignore[arg-type]
    context.set_default_timeout(WAIT_MS)
    off_loopback: list[str] = []
    context.on("request", lambda req: None if is_loopback(req.url) else off_loopback.append(req.url))
    page = context.new_page()
    try:
        page.goto(server.url, wait_until="load")
        wait_for_session(page)
        for m in MESSAGES:
            send(page, m)

        # The chat's trash icon emptied the view only (a reload brought everything back): it is not offered.
        toolbar = page.locator(f"#{ids.CHAT_HISTORY} .top-panel")
        expect(toolbar.get_by_role("button", name="Copy conversation")).to_be_visible()
        expect(toolbar.get_by_role("button", name="Clear")).to_be_hidden()
        assert (
            page.locator(f"#{ids.CHAT_HISTORY} button:visible", has=page.locator("rect[y='2'][width='8']")).count() == 0
        )

        # The stamps: # | seq | role | memory | digest — only the memory (column 3) wraps.
        stamps = measure(page, ids.STAMPS, MD_CELLS)
        # (no "assistant" row: the stand-in's reply is never handed back as a memory; the Ledger below has one)
        assert {"seq", "role", "digest", "user"} <= {c["text"] for c in stamps}
        assert split_cells(stamps, {3}) == []
        if viewport is PHONE:
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "narrow-chat.png"), full_page=True)
            if os.environ.get("MRE_WRITE_NARROW_SCREENSHOT") == "1":
                page.locator(f"#{ids.STAMPS}").scroll_into_view_if_needed()
                page.screenshot(path=str(SCREENSHOT))

        # Manual search: text is column 4.
        open_tab(page, "Search")
        page.locator(f"#{ids.SEARCH_QUERY} textarea").fill("Miso")
        page.locator(f"#{ids.SEARCH_BUTTON}").click()
        expect(markdown(page, ids.SEARCH_STATUS)).to_contain_text(re.compile(r"\d+ results? \(K=8\)"))
        assert read_grid(page, ids.SEARCH_RESULTS)
        results = measure(page, ids.SEARCH_RESULTS, GRID_CELLS)
        assert {"rank", "event id", "seq", "role", "match", "own words", "score", "digest", "chain"} <= {
            c["text"] for c in results
        }
        assert split_cells(results, {4}) == []

        # A refused query replaces the last status and empties the results.
        page.locator(f"#{ids.SEARCH_QUERY} textarea").fill("x" * (MAX_QUERY_CHARS + 1))
        page.locator(f"#{ids.SEARCH_BUTTON}").click()
        expect(markdown(page, ids.SEARCH_STATUS)).to_contain_text(f"over the limit of {MAX_QUERY_CHARS}")
        expect(markdown(page, ids.SEARCH_STATUS)).not_to_contain_text("results")
        assert read_grid(page, ids.SEARCH_RESULTS) == []

        # The ledger: seq | role | time | text | digest | chain — text is column 3.
        open_tab(page, "Ledger")
        expect(markdown(page, ids.LEDGER_STATUS)).to_contain_text("Chain intact")
        assert len(read_grid(page, ids.LEDGER_EVENTS)) == 2 * len(MESSAGES)
        events = measure(page, ids.LEDGER_EVENTS, GRID_CELLS)
        assert {"seq", "role", "time (UTC)", "digest", "chain", "assistant"} <= {c["text"] for c in events}
        assert split_cells(events, {3}) == []
        if viewport is PHONE:
            page.screenshot(path=str(ARTIFACTS / "narrow-ledger.png"), full_page=True)
        assert off_loopback == []
    finally:
        context.close()
