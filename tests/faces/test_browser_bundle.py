"""Session bundles in a real browser (issue 13): the way a person takes their memory with them.

A visitor chats two turns, opens the Ledger tab and presses Export bundle: the download is their session's bundle,
which `bundle.verify_file` verifies with the server's key, and Export Markdown downloads the conversation. On the
Import tab the same file, uploaded and imported, shows every check passing and the imported session, which search
finds words in. A second app (another data directory, another key) refuses the same file until "import unverified"
is ticked, then imports it labelled UNVERIFIED. `MRE_WRITE_README_SCREENSHOT=1` also rewrites
docs/screenshot-bundle.png (the Import tab after the import).

Without chromium or playwright these tests skip with the install command — except under CI=true.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import app
import bundle
from webui import ids

from ..browser_support import WAIT_MS, markdown, offline_app, open_tab, read_grid, settled, toasts
from .test_browser import ROOT, open_visitor, send, session_id_shown, shot

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.browser

SCREENSHOT = ROOT / "docs" / "screenshot-bundle.png"
MESSAGES = ("My bike is a green Brompton", "What colour is my bike?")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[app.Running]:
    with offline_app(tmp_path_factory.mktemp("bundle-data")) as running:
        yield running


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory: pytest.TempPathFactory) -> Iterator[app.Running]:
    with offline_app(tmp_path_factory.mktemp("bundle-elsewhere"), mcp=False) as running:
        yield running


def download(page: Page, elem_id: str, folder: Path) -> Path:
    with page.expect_download(timeout=WAIT_MS) as info:
        page.locator(f"#{elem_id}").click()
    path = folder / info.value.suggested_filename
    info.value.save_as(str(path))
    return path


def import_file(page: Page, path: Path, *, unverified: bool = False) -> str:
    """Upload `path` on the Import tab, tick "import unverified" if asked, press Import; the result's text."""
    from playwright.sync_api import expect

    open_tab(page, ids.TAB_IMPORT)
    box = page.locator(f"#{ids.IMPORT_UPLOAD}")
    if not box.get_by_label(path.name, exact=True).count():
        box.locator("input[type=file]").set_input_files(str(path))
        box.get_by_label(path.name, exact=True).wait_for()
    tick = page.locator(f"#{ids.IMPORT_UNVERIFIED} input[type=checkbox]")
    if tick.is_checked() != unverified:
        tick.click()
    result = markdown(page, ids.IMPORT_RESULT)
    before = result.inner_text()
    page.locator(f"#{ids.IMPORT_BUTTON}").click()
    expect(result).not_to_have_text(before)
    settled(page, ids.IMPORT_RESULT)
    return result.inner_text()


def write_screenshot(page: Page) -> None:
    """The Import tab from the result down to the search results (docs/guides/bundles.md's picture of an import)."""
    page.mouse.move(0, 0)
    page.locator(f"#{ids.IMPORT_RESULT}").scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    assert toasts(page) == []
    top = page.locator(f"#{ids.IMPORT_UPLOAD}").bounding_box()
    bottom = page.locator(f"#{ids.IMPORTED_RESULTS}").bounding_box()
    assert top is not None and bottom is not None
    scroll = page.evaluate("() => window.scrollY")
    y = top["y"] + scroll - 12
    width = page.viewport_size["width"] if page.viewport_size else 1280
    height = bottom["y"] + scroll + bottom["height"] + 16 - y
    page.screenshot(path=str(SCREENSHOT), full_page=True, clip={"x": 0, "y": y, "width": width, "height": height})


def test_export_downloads_a_bundle_that_verifies_and_importing_it_shows_every_check_and_the_session(
    browser: Browser, server: app.Running, elsewhere: app.Running, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    v = open_visitor(browser, server.url)
    page = v.page
    try:
        for m in MESSAGES:
            send(page, m)
        session = session_id_shown(page)

        # Export bundle on the Ledger tab: a download of this session, verified with the server's key.
        open_tab(page, ids.TAB_LEDGER)
        page.locator(f"#{ids.EXPORT_BUNDLE}").click()
        expect(page.locator(f"#{ids.BUNDLE_DOWNLOAD}")).to_be_visible()
        expect(markdown(page, ids.EXPORT_STATUS)).to_contain_text("4 events, 2 receipts")
        path = download(page, ids.BUNDLE_DOWNLOAD, tmp_path)
        assert path.name == f"session-{session}.mre.zip"
        report = bundle.verify_file(path, [server.service.engine.key.public_key])
        assert report.verdict == "verified" and report.session == session and report.events == 4

        # Export Markdown: the conversation to read.
        page.locator(f"#{ids.EXPORT_MARKDOWN}").click()
        expect(page.locator(f"#{ids.MARKDOWN_DOWNLOAD}")).to_be_visible()
        md = download(page, ids.MARKDOWN_DOWNLOAD, tmp_path)
        assert md.name == f"session-{session}.md" and "green Brompton" in md.read_text("utf-8")

        # Import it here: every check passes, the imported session is listed and search finds its words.
        result = import_file(page, path)
        assert result.startswith("✅ Imported") and "Every check passed" in result
        checks = read_grid(page, ids.IMPORT_REPORT)
        names = [row[0] for row in checks]
        assert {"manifest.signature", "members.hashes", "ledger.chain", "checkpoint.covers_ledger"} <= set(names)
        assert sum(n.startswith("receipt ") for n in names) == 2
        assert all(row[1] == "✅ pass" for row in checks)
        (origin,) = [o for o in bundle.list_imported(server.service.data_dir) if o.session == session]
        assert origin.local.startswith(session) and origin.verdict == "verified"
        expect(markdown(page, ids.IMPORTED_LIST)).to_contain_text(origin.local)
        page.locator(f"#{ids.IMPORTED_QUERY} textarea").fill("Brompton")
        page.locator(f"#{ids.IMPORTED_SEARCH_BUTTON}").click()
        expect(markdown(page, ids.IMPORTED_STATUS)).to_contain_text(f"Imported session {origin.local} (read-only)")
        expect(page.locator(f"#{ids.IMPORTED_RESULTS}")).to_contain_text("green Brompton")
        if os.environ.get("MRE_WRITE_README_SCREENSHOT") == "1":
            write_screenshot(page)
        shot(page, "bundle-import.png")
        v.check_clean()
    finally:
        v.context.close()

    # Another app, another key: refused until "import unverified" is ticked, then labelled UNVERIFIED.
    w = open_visitor(browser, elsewhere.url)
    try:
        refused = import_file(w.page, path)
        assert refused.startswith("⛔ Not imported") and "not signed by this app's key" in refused
        assert bundle.list_imported(elsewhere.service.data_dir) == []
        rows = {row[0]: row for row in read_grid(w.page, ids.IMPORT_REPORT)}
        assert rows["manifest.signature"][1] == "⚪ not verifiable here"
        imported = import_file(w.page, path, unverified=True)
        assert imported.startswith("⚠️ Imported UNVERIFIED")
        (theirs,) = bundle.list_imported(elsewhere.service.data_dir)
        assert theirs.verdict == "unverified" and theirs.session == session
        expect(markdown(w.page, ids.IMPORTED_LIST)).to_contain_text("unverified")
        w.check_clean()
    finally:
        w.context.close()
