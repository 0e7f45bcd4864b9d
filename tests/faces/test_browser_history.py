"""History the visitor can hold us to, in a real browser (issue 17 §6): the checkpoint the page keeps.

Three visitors each take turns and the page keeps the latest signed checkpoint
it was shown (a BrowserState in localStorage). Then the operator, with the app
stopped, rewrites one visitor's older event and recomputes every digest and
chain hash after it, and drops the last events of another's — re-signing the
latest checkpoint with the app's own key each time, so `ledger verify` passes —
and starts the app again on the same port. On reload the first two pages say
"this history changed since you last saw it" and offer both checkpoints; the
third visitor, whose history was left alone, sees no warning, before or after
another turn. Last, a running app whose ledger is edited in place says FAILED
on the Verify tab and refuses the next turn.

Without chromium or playwright these tests skip with the install command — except under CI=true.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import app
from receipts import checkpoints as C
from storage.files.ledger.store import Ledger
from storage.files.receipts import checkpoint_files as C_files
from webui import ids
from webui.config import Config

from ..browser_support import WAIT_MS, free_port, markdown, open_tab, toasts
from ..history_support import edit_in_place, rewrite_and_recompute, truncate
from .test_browser import Visitor, open_visitor, rows_by_check, send, session_id_shown, upload

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.browser

WARNING = "This history changed since you last saw it"


class Server:
    """The app on one fixed loopback port (localStorage is per origin), which the operator can stop and start again."""

    def __init__(self, data: Path) -> None:
        self.data, self.port = data, free_port()
        self.running: app.Running | None = None

    def start(self) -> None:
        with pytest.MonkeyPatch.context() as mp:
            mp.delenv("GROQ_API_KEY", raising=False)  # the offline stand-in, never the network
            mp.delenv("RECEIPT_SIGNING_KEY", raising=False)
            mp.setenv("GRADIO_ANALYTICS_ENABLED", "False")
            self.running = app.start(Config(self.data, "127.0.0.1", self.port, None, 16, True), quiet=True)

    def stop(self) -> None:
        if self.running is not None:
            self.running.stop()
            self.running = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("history-data"))
    s.start()
    try:
        yield s
    finally:
        s.stop()


def history_status(page: Page, pattern: str) -> str:
    """Wait until the history check after the last load or turn has shown `pattern` (in the session box)."""
    from playwright.sync_api import expect

    shown = page.locator(f"#{ids.HISTORY_STATUS} [data-testid=markdown]")
    expect(shown).to_contain_text(re.compile(pattern))
    return shown.inner_text()


def open_session_box(page: Page) -> None:
    """Open "Your session" (where the history status line lives) if it is closed."""
    if not page.locator(f"#{ids.SESSION_ID}").is_visible():
        page.get_by_role("button", name="Your session").click()
    page.locator(f"#{ids.HISTORY_STATUS}").wait_for(state="visible")


# What a page open across the operator's stop and restart may log (Gradio's client noticing the server went away,
# then the reload aborting its old stream), depending on timing: the stop's, not the app's.
RESTART_NOISE = ("Server stopped unexpectedly", "Connection errored out", "AbortError: signal is aborted without reason")


def reload(v: Visitor) -> None:
    v.page.reload(wait_until="load")
    v.page.locator(f"#{ids.CHAT_INPUT} textarea").wait_for(state="visible")
    open_session_box(v.page)
    v.errors[:] = [e for e in v.errors if not any(noise in e for noise in RESTART_NOISE)]


def download(page: Page, elem_id: str, into: Path) -> bytes:
    with page.expect_download(timeout=WAIT_MS) as info:
        page.locator(f"#{elem_id}").click()
    path = into / info.value.suggested_filename
    info.value.save_as(str(path))
    return path.read_bytes()


@dataclass
class Seen:
    """A visitor whose page was shown (and kept) the checkpoint `kept`."""

    visitor: Visitor
    session: str
    kept: dict[str, Any]

    @property
    def page(self) -> Page:
        return self.visitor.page


def visit(browser: Browser, server: Server, messages: tuple[str, ...]) -> Seen:
    v = open_visitor(browser, server.url)
    session = session_id_shown(v.page)
    open_session_box(v.page)
    for m in messages:
        send(v.page, m)
    n = 2 * len(messages)
    history_status(v.page, rf"(keeps the signed checkpoint of {n} events|\u2192 {n} events)")
    kept = C_files.latest(server.data, session)
    assert kept is not None and kept["body"]["tree_size"] == n
    return Seen(v, session, kept)


@dataclass
class World:
    rewritten: Seen
    truncated: Seen
    honest: Seen
    resigned: dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def world(browser: Browser, server: Server) -> Iterator[World]:
    """Three visitors see their checkpoints; the operator stops the app, rewrites one history and truncates another."""
    rewritten = visit(browser, server, ("My cat is called Miso", "What is my cat called?"))
    truncated = visit(browser, server, ("My sister lives in Porto", "Where does my sister live?"))
    honest = visit(browser, server, ("I drink oolong tea",))
    assert server.running is not None
    key = server.running.service.engine.key
    server.stop()  # the operator works on the data directory with the app stopped, and starts it again after
    resigned = {
        rewritten.session: rewrite_and_recompute(server.data, rewritten.session, 0, "My cat is called Rex!", key),
        truncated.session: truncate(server.data, truncated.session, 2, key),
    }
    ledger = Ledger(server.data)
    assert ledger.verify(rewritten.session).ok and ledger.verify(truncated.session).ok  # the ledger alone cannot tell
    server.start()
    try:
        yield World(rewritten, truncated, honest, resigned)
    finally:
        for seen in (rewritten, truncated, honest):
            seen.visitor.context.close()


def assert_warned(seen: Seen, resigned: dict[str, Any], reason: str, tmp_path: Path) -> str:
    from playwright.sync_api import expect

    page = seen.page
    reload(seen.visitor)
    box = markdown(page, ids.HISTORY_WARNING)
    expect(box).to_contain_text(WARNING)
    text = box.inner_text()
    assert re.search(reason, text), text
    assert "⚠️" in history_status(page, "history changed")
    # Both checkpoints to download: the one this browser kept, byte for byte as signed, and the server's current one.
    assert C.parse_checkpoint(download(page, ids.HISTORY_KEPT_DOWNLOAD, tmp_path)) == seen.kept
    assert C.parse_checkpoint(download(page, ids.HISTORY_CURRENT_DOWNLOAD, tmp_path)) == resigned
    assert seen.visitor.errors == [] and seen.visitor.off_loopback == []
    return text


def test_a_rewritten_and_recomputed_history_raises_the_warning_on_reload(world: World, tmp_path: Path) -> None:
    seen = world.rewritten
    assert_warned(seen, world.resigned[seen.session], r"no longer extends the checkpoint of 4 events", tmp_path)


def test_a_truncated_history_raises_the_warning_on_reload(world: World, tmp_path: Path) -> None:
    seen = world.truncated
    text = assert_warned(seen, world.resigned[seen.session], r"holds 2 events, fewer than the 4", tmp_path)
    # The kept checkpoint stays the evidence: a second reload warns again.
    reload(seen.visitor)
    from playwright.sync_api import expect

    expect(markdown(seen.page, ids.HISTORY_WARNING)).to_contain_text(WARNING)
    assert text


def test_an_untouched_history_shows_no_warning_after_a_restart_a_reload_and_a_turn(world: World) -> None:
    from playwright.sync_api import expect

    seen = world.honest
    page = seen.page
    reload(seen.visitor)
    assert "extends the checkpoint you kept (2 → 2 events)" in history_status(page, r"2 → 2 events").replace("\\", "")
    expect(page.locator(f"#{ids.HISTORY_BOX}")).to_be_hidden()
    send(page, "What tea do I drink?")
    assert "(2 → 4 events)" in history_status(page, r"2 → 4 events")
    expect(page.locator(f"#{ids.HISTORY_BOX}")).to_be_hidden()
    assert toasts(page) == []
    seen.visitor.check_clean()


def test_a_running_app_whose_ledger_is_edited_in_place_fails_verification_and_refuses_the_next_turn(
    browser: Browser, server: Server, world: World, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    seen = visit(browser, server, ("My bike is green",))
    page = seen.page
    try:
        receipt = tmp_path / "receipt.json"
        receipt.write_bytes(download(page, ids.RECEIPT_DOWNLOAD, tmp_path))
        open_tab(page, ids.TAB_VERIFY)
        upload(page, receipt)
        verdict = markdown(page, ids.VERIFY_VERDICT)
        expect(verdict).to_contain_text("✅ Verified")  # and the verifier's cache is warm
        edit_in_place(server.data, seen.session, 0, b"green", b"grean")  # same length, mtime put back
        page.locator(f"#{ids.VERIFY_BUTTON}").click()
        expect(verdict).to_contain_text("❌ Failed")
        failed = {name for name, row in rows_by_check(page).items() if row[1] == "❌\ufe0f FAIL"}
        assert "ledger.chain" in failed, failed
        # The next turn is refused with the line that changed: no answer, no new event, no new receipt.
        receipts = sorted((server.data / "sessions" / seen.session / "receipts").iterdir())
        lines = (server.data / "sessions" / seen.session / "events.jsonl").read_bytes()
        open_tab(page, ids.TAB_CHAT)
        page.locator(f"#{ids.CHAT_INPUT} textarea").fill("What colour is my bike?")
        page.locator(f"#{ids.CHAT_SEND}").click()
        toast = page.get_by_test_id("toast-body").filter(has_text=re.compile(r"line 1 \(seq 0\) changed"))
        expect(toast.first).to_be_visible()
        note = page.locator(f"#{ids.CHAT_HISTORY} [data-testid=bot]").filter(has_text="⚠️ note")
        expect(note).to_have_count(1)  # collapsed: "No answer: …" under it
        expect(markdown(page, ids.HISTORY_WARNING)).to_contain_text(WARNING)  # the check after the turn names it too
        assert sorted((server.data / "sessions" / seen.session / "receipts").iterdir()) == receipts
        assert (server.data / "sessions" / seen.session / "events.jsonl").read_bytes() == lines
    finally:
        seen.visitor.context.close()
