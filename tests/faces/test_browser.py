"""A real browser (Playwright driving Debian's chromium) against the app on a free loopback port.

One visitor chats three turns (the offline stand-in answers), then every tab is checked the way
a person would use it: the stamps under the answer, the receipt downloaded and verified on the
Verify tab, a tampered copy failing, search, the ledger, a reload resuming the session, and a
second visitor seeing nothing of the first. Screenshots of each tab go to test-artifacts/
(gitignored), the submit→stamps timings to test-artifacts/browser_timings.json.

Without chromium or playwright these tests skip with the install command — except under CI=true,
where that is a failure. `MRE_WRITE_README_SCREENSHOT=1` also rewrites docs/screenshot-chat.png,
`MRE_WRITE_RECEIPT_SCREENSHOT=1` docs/screenshot-receipt.png (the Verify tab's "What this receipt says").
"""

from __future__ import annotations

import json
import os
import platform
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import app
from receipts.body import parse_receipt
from receipts.show import summarize
from storage.files.receipts.api import verify_bytes
from webui import ids

from ..browser_support import (
    INSTALL_TIMER,
    READ_TIMER,
    RECEIPT_ID,
    TIMER_DONE,
    WAIT_MS,
    is_loopback,
    markdown,
    offline_app,
    open_tab,
    read_grid,
    receipt_body,
    settled,
    tamper_memory_text,
    text_of,
    toasts,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
README_SCREENSHOT = ROOT / "docs" / "screenshot-chat.png"
RECEIPT_SCREENSHOT = ROOT / "docs" / "screenshot-receipt.png"  # MRE_WRITE_RECEIPT_SCREENSHOT=1 rewrites it
VIEWPORT = {"width": 1280, "height": 900}

FIRST = "My cat is called Miso"
MESSAGES = (FIRST, "Miso sleeps on the red sofa", "What is my cat called?")
WORD = "Miso"  # from the first message: search finds it; another visitor must not


# -- fixtures --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[app.Running]:
    with offline_app(tmp_path_factory.mktemp("browser-data")) as running:
        yield running


@dataclass
class Visitor:
    """One browser context (one visitor) with its page, and what went wrong in it."""

    context: BrowserContext
    page: Page
    off_loopback: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def check_clean(self) -> None:
        """No request left loopback, no script error, no error toast."""
        assert self.off_loopback == [], f"requests off loopback: {self.off_loopback}"
        assert self.errors == [], f"errors in the page: {self.errors}"
        assert toasts(self.page) == [], f"toasts on the page: {toasts(self.page)}"


def open_visitor(browser: Browser, url: str) -> Visitor:
    context = browser.new_context(accept_downloads=True, viewport=VIEWPORT)  # type: ignore[arg-type]
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    v = Visitor(context, page)
    context.on("request", lambda req: None if is_loopback(req.url) else v.off_loopback.append(req.url))
    page.on("pageerror", lambda exc: v.errors.append(f"pageerror: {exc}"))
    page.on("console", lambda msg: v.errors.append(f"console.error: {msg.text}") if msg.type == "error" else None)
    page.goto(url, wait_until="load")
    wait_for_session(page)
    return v


def wait_for_session(page: Page) -> str:
    """The page has loaded and `start` (demo.load) has filled in the session; returns the session id shown."""
    page.locator(f"#{ids.CHAT_INPUT} textarea").wait_for(state="visible")
    return session_id_shown(page)


def session_id_shown(page: Page) -> str:
    """The public session id from the "Your session" accordion (opened to read it, then closed again)."""
    from playwright.sync_api import expect

    toggle = page.get_by_role("button", name="Your session")
    toggle.click()
    shown = page.locator(f"#{ids.SESSION_ID}")
    expect(shown).to_contain_text(re.compile(r"Session id:\s*[0-9a-f]{32}"))
    m = re.search(r"Session id:\s*([0-9a-f]{32})", shown.inner_text())
    assert m, "the session id is not shown"
    toggle.click()
    expect(shown).to_be_hidden()
    return m.group(1)


@dataclass
class Turn:
    message: str
    receipt_id: str
    stamps: str
    timing: dict[str, Any]


def send(page: Page, message: str) -> Turn:
    """Type a message, click Send, wait for the stamps to change; time click → stamps (in the page)."""
    from playwright.sync_api import expect

    shown = RECEIPT_ID.search(text_of(page, ids.STAMPS))
    page.evaluate(
        INSTALL_TIMER,
        [f"#{ids.CHAT_SEND}", f"#{ids.STAMPS}", f"#{ids.CHAT_HISTORY}", shown.group(0) if shown else None],
    )
    page.locator(f"#{ids.CHAT_INPUT} textarea").fill(message)
    started = time.perf_counter()
    page.locator(f"#{ids.CHAT_SEND}").click()
    page.wait_for_function(TIMER_DONE, timeout=WAIT_MS)
    wall = time.perf_counter() - started
    t = page.evaluate(READ_TIMER)
    rid = t["receipt_id"]
    settled(page, ids.STAMPS)
    stamps = text_of(page, ids.STAMPS)
    assert rid in stamps, stamps
    expect(page.locator(f"#{ids.CHAT_INPUT} textarea")).to_have_value("")
    expect(page.locator(f"#{ids.RECEIPT_DOWNLOAD}")).to_contain_text(rid[:13])  # the button offers this turn's receipt
    timing = {
        "message": message,
        "click_to_first_update_ms": round(t["first"] - t["click"], 1) if t["first"] is not None else None,
        "click_to_stamps_dom_ms": round(t["stamps"] - t["click"], 1),
        "click_to_stamps_painted_ms": round(t["painted"] - t["click"], 1),
        "wall_clock_click_to_seen_ms": round(wall * 1000, 1),
    }
    return Turn(message, rid, stamps, timing)


def shot(page: Page, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=True)
    return path


def upload(page: Page, path: Path) -> None:
    """Put a file into the Verify tab's upload, which runs Verify by itself. A file already in the box is left
    there: uploading it again would start a second verification racing whatever the test clicks next."""
    box = page.locator(f"#{ids.VERIFY_UPLOAD}")
    if box.get_by_label(path.name, exact=True).count():  # Gradio's file preview labels the row with the file name
        return
    clear = box.get_by_role("button", name="Clear")
    if clear.count():
        clear.first.click()
    box.locator("input[type=file]").set_input_files(str(path))
    box.get_by_label(path.name, exact=True).wait_for()


def rows_by_check(page: Page) -> dict[str, list[str]]:
    """The raw check rows, which sit in a collapsed accordion below the grouped summary: opened first."""
    toggle = page.locator(f"#{ids.VERIFY_RAW} button.label-wrap")
    if "open" not in (toggle.get_attribute("class") or "").split():
        toggle.click()
    rows = read_grid(page, ids.VERIFY_REPORT)
    assert rows, "the verification report is empty"
    return {row[0]: row for row in rows}


@dataclass
class Session:
    """The first visitor after three turns, with the last turn's downloaded receipt."""

    visitor: Visitor
    turns: list[Turn]
    receipt_path: Path
    receipt: bytes
    body: dict[str, Any]

    @property
    def page(self) -> Page:
        return self.visitor.page


@pytest.fixture(scope="module")
def session(browser: Browser, server: app.Running, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    v = open_visitor(browser, server.url)
    try:
        turns = [send(v.page, m) for m in MESSAGES]
        record_timings(browser, turns)
        with v.page.expect_download(timeout=WAIT_MS) as info:
            v.page.locator(f"#{ids.RECEIPT_DOWNLOAD}").click()
        download = info.value
        assert download.suggested_filename == f"{turns[-1].receipt_id}.json"
        path = tmp_path_factory.mktemp("downloads") / download.suggested_filename
        download.save_as(str(path))
        raw = path.read_bytes()
        yield Session(v, turns, path, raw, receipt_body(raw))
    finally:
        v.context.close()


def record_timings(browser: Browser, turns: list[Turn]) -> None:
    """Print the submit→stamps times and write them to test-artifacts/browser_timings.json (recorded, not asserted)."""
    ARTIFACTS.mkdir(exist_ok=True)
    painted = sorted(t.timing["click_to_stamps_painted_ms"] for t in turns)
    out = {
        "what": (
            "click on Send -> the stamps show the new receipt (MutationObserver on the stamps Markdown, then the next "
            "animation frame), measured in the page with performance.now(); offline stand-in, server and browser on loopback"
        ),
        "click_to_stamps_painted_ms": {"min": painted[0], "median": painted[len(painted) // 2], "max": painted[-1]},
        "turns": [t.timing for t in turns],
        "chromium": browser.version,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }
    (ARTIFACTS / "browser_timings.json").write_text(json.dumps(out, indent=2) + "\n")
    for t in turns:
        print(
            f"\nsubmit→stamps {t.timing['click_to_stamps_painted_ms']:.0f} ms to paint "
            f"({t.timing['click_to_stamps_dom_ms']:.0f} ms to the DOM; first update of the chat after "
            f"{t.timing['click_to_first_update_ms']} ms) for {t.message!r}"
        )


# -- the tests -----------------------------------------------------------------------------------------
def test_a_sent_message_gets_an_answer_and_stamps_listing_the_memories_it_was_handed(session: Session) -> None:
    from playwright.sync_api import expect

    page = session.page
    open_tab(page, ids.TAB_CHAT)
    last = session.turns[-1]
    body = session.body
    assert body["receipt_id"] == last.receipt_id
    # The answer is in the chat, from the visibly labelled offline stand-in.
    bot = page.locator(f"#{ids.CHAT_HISTORY} [data-testid=bot]")
    expect(bot.filter(has_text="From what we talked about before")).not_to_have_count(0)
    assert "offline stand-in" in last.stamps and "no language model wrote this answer" in last.stamps
    # The stamps: every memory of the receipt, with its seq, role and digest prefix, best first.
    rows = [
        [c.inner_text().strip() for c in r.locator("td").all()]
        for r in page.locator(f"#{ids.STAMPS} table tbody tr").all()
    ]
    expected = [
        [str(m["rank"]), str(m["event"]["seq"]), m["event"]["role"], m["event"]["digest"][:12] + "…"]
        for m in body["memories"]
    ]
    assert len(rows) == len(expected) >= 2
    assert [[r[0], r[1], r[2], r[4]] for r in rows] == expected
    assert [FIRST, "0", "user"] in [[r[3], r[1], r[2]] for r in rows]
    assert f"{len(expected)} of K=8 memories handed to the model" in last.stamps
    # Every turn had its own stamps; the second and third were handed earlier memories.
    assert len({t.receipt_id for t in session.turns}) == 3
    assert "No stored memory matched" in session.turns[0].stamps
    assert all("memories handed to the model" in t.stamps for t in session.turns[1:])
    session.visitor.check_clean()
    shot(page, "tab-chat.png")
    if os.environ.get("MRE_WRITE_README_SCREENSHOT") == "1":
        write_readme_screenshot(page)


def write_readme_screenshot(page: Page) -> None:
    """The Chat tab after three turns: the last question and answer in the chat, its stamps below."""
    page.mouse.move(0, 0)  # no hover effects
    page.locator(f"#{ids.CHAT_HISTORY} [role=log]").evaluate("e => { e.scrollTop = e.scrollHeight; }")
    page.wait_for_timeout(300)
    assert toasts(page) == []
    page.screenshot(path=str(README_SCREENSHOT), full_page=True)


def test_the_downloaded_receipt_verifies_on_the_verify_tab_with_every_check_passing(
    session: Session, server: app.Running
) -> None:
    from playwright.sync_api import expect

    page = session.page
    # The download is byte for byte the receipt the app stored for this session.
    stored = (
        server.service.data_dir
        / "sessions"
        / session.body["session"]
        / "receipts"
        / f"{session.body['receipt_id']}.json"
    )
    assert session.receipt == stored.read_bytes()
    open_tab(page, ids.TAB_VERIFY)
    verdict = markdown(page, ids.VERIFY_VERDICT)
    upload(page, session.receipt_path)  # uploading runs the verification
    expect(verdict).to_contain_text("✅ Verified")
    expect(verdict).to_contain_text(session.body["receipt_id"])
    expect(verdict).to_contain_text("this session's ledger")
    # Above the checks: what the receipt says, as a person reads it (the question, memory#1…, the answer).
    panel = verdict.locator("h3", has_text="What this receipt says")
    expect(panel).to_be_visible()
    said = summarize(parse_receipt(session.receipt).body)  # what `python -m receipts show` reads (any format)
    expect(verdict).to_contain_text(f"The question (seq {said['question']['seq']}, user")
    expect(verdict).to_contain_text(f"“{MESSAGES[-1]}”")
    expect(verdict).to_contain_text(f"memory#1 (seq {said['memories'][0]['seq']}, ")
    expect(verdict).to_contain_text(f"“{said['memories'][0]['text']}”")
    expect(verdict).to_contain_text("from offline/")
    heading = verdict.locator("h2", has_text="Verified")
    assert panel.bounding_box()["y"] < heading.bounding_box()["y"]  # type: ignore[index]
    if os.environ.get("MRE_WRITE_RECEIPT_SCREENSHOT") == "1":
        page.mouse.move(0, 0)
        verdict.screenshot(path=str(RECEIPT_SCREENSHOT))  # the panel, and the verdict and its groups below it
    # The grouped summary reads as sentences; the raw rows are collapsed until asked for.
    seq = session.body["memories"][0]["event"]["seq"]
    expect(verdict).to_contain_text(f"memory 1 (seq {seq}) is exactly what is in the signed ledger")
    expect(page.locator(f"#{ids.VERIFY_RAW} [data-testid=accordion-content]")).to_be_hidden()
    assert_all_pass(rows_by_check(page))
    # Make the verdict something else, then the Verify button brings the verified report back.
    page.locator(f"#{ids.TAMPER_BUTTON}").click()
    expect(verdict).to_contain_text("Tampered copy")
    page.locator(f"#{ids.VERIFY_BUTTON}").click()
    expect(verdict).to_contain_text("✅ Verified")
    rows = rows_by_check(page)
    assert_all_pass(rows)
    session.visitor.check_clean()
    shot(page, "tab-verify.png")


def assert_all_pass(rows: dict[str, list[str]]) -> None:
    # Own session: the ledger checks run too, so nothing is "not verifiable here".
    assert {
        "envelope.signature",
        "checkpoint.signature",
        "memory#1.digest",
        "prompt.hash",
        "ledger.chain",
        "ledger.events",
    } <= set(rows)
    bad = {name: row[1] for name, row in rows.items() if row[1] != "✅ pass"}
    assert bad == {}, f"checks that did not pass: {bad}"


def test_the_tamper_button_shows_which_check_catches_the_changed_byte(
    session: Session, server: app.Running, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    page = session.page
    open_tab(page, ids.TAB_VERIFY)
    upload(page, session.receipt_path)
    verdict = markdown(page, ids.VERIFY_VERDICT)
    expect(verdict).to_contain_text("✅ Verified")
    expect(page.locator(f"#{ids.TAMPER_TARGET} input")).to_have_value(re.compile("memory"))  # the default target
    page.locator(f"#{ids.TAMPER_BUTTON}").click()
    expect(verdict).to_contain_text("🔨 Tampered copy: caught")
    expect(verdict).to_contain_text("memory#1.disclosure.text")  # format 2: the text beside the signature
    caught = re.search(r"Caught by \d+ checks?:\s*(.*)", verdict.inner_text())
    assert caught and "memory#1.content" in caught.group(1), verdict.inner_text()
    rows = rows_by_check(page)
    assert rows["memory#1.content"][1] == "❌\ufe0f FAIL"
    assert rows["memory#1.content"][3] and rows["memory#1.content"][4], (
        "expected and found are shown for the failed check"
    )
    # The tampered copy can be downloaded, and it fails offline too.
    button = page.locator(f"#{ids.TAMPER_DOWNLOAD}")
    expect(button).to_be_enabled()
    with page.expect_download(timeout=WAIT_MS) as info:
        button.click()
    copy = tmp_path / info.value.suggested_filename
    info.value.save_as(str(copy))
    offline = verify_bytes(copy.read_bytes(), trusted=[server.service.engine.key.public_key])
    assert offline.verdict == "failed" and "memory#1.content" in {c.name for c in offline.failed}
    session.visitor.check_clean()
    shot(page, "tab-verify-tamper-button.png")


def test_an_uploaded_tampered_copy_fails_and_the_failing_check_is_shown(session: Session, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    page = session.page
    tampered, number = tamper_memory_text(session.receipt, FIRST)
    path = tmp_path / "tampered-receipt.json"
    path.write_bytes(tampered)
    json.loads(tampered)  # still valid JSON: only a memory's text changed, in its disclosure (format 2)
    open_tab(page, ids.TAB_VERIFY)
    upload(page, path)
    verdict = markdown(page, ids.VERIFY_VERDICT)
    expect(verdict).to_contain_text("❌ Failed")
    expect(verdict).to_contain_text(f"memory#{number}.content")
    rows = rows_by_check(page)
    failed = {name for name, row in rows.items() if row[1] == "❌\ufe0f FAIL"}
    assert {f"memory#{number}.content", "prompt.hash"} <= failed  # the signature still holds: it never covered the text
    assert rows[f"memory#{number}.content"][3] != rows[f"memory#{number}.content"][4]  # expected vs found commitment
    session.visitor.check_clean()
    shot(page, "tab-verify-tampered-upload.png")


def test_manual_search_finds_a_word_from_the_first_message(session: Session) -> None:
    from playwright.sync_api import expect

    page = session.page
    open_tab(page, ids.TAB_SEARCH)
    page.locator(f"#{ids.SEARCH_QUERY} textarea").fill(WORD)
    page.locator(f"#{ids.SEARCH_BUTTON}").click()
    expect(markdown(page, ids.SEARCH_STATUS)).to_contain_text(re.compile(r"\d+ results? \(K=8\)"))
    rows = read_grid(page, ids.SEARCH_RESULTS)
    texts = [r[4] for r in rows]
    assert FIRST in texts, texts
    hit = rows[texts.index(FIRST)]
    first_event = next(m["event"] for m in session.body["memories"] if m["event"]["text"] == FIRST)
    assert (
        hit[1] == first_event["id"][:16] + "…"  # event ids are shown as prefixes, like every hash
        and hit[2] == "0"
        and hit[3] == "user"
        and hit[7] == first_event["digest"][:12] + "…"
    )
    # issue 31: the order is by match (own words, neighbours, echo), then score; within a kind the score never rises
    kinds = ["own words", "neighbours", "echo"]
    assert [row[5] for row in rows] == sorted((row[5] for row in rows), key=kinds.index), rows
    scores = [float(row[6]) for row in rows]
    assert scores[0] == 1.0 and all(0 < x <= 1 for x in scores)
    assert all(scores[i] >= scores[i + 1] for i in range(len(rows) - 1) if rows[i][5] == rows[i + 1][5]), rows
    expect(markdown(page, ids.SEARCH_STATUS)).to_contain_text("by match first")
    # "explain each hit": why each ranked where it did, under the table; unticked, nothing.
    page.locator(f"#{ids.SEARCH_EXPLAIN} input[type=checkbox]").check()
    expect(markdown(page, ids.SEARCH_EXPLANATION)).to_contain_text("Why each hit ranked where it did")
    expect(markdown(page, ids.SEARCH_EXPLANATION)).to_contain_text("matched:")
    page.locator(f"#{ids.SEARCH_EXPLAIN} input[type=checkbox]").uncheck()
    expect(markdown(page, ids.SEARCH_EXPLANATION)).not_to_contain_text("matched:")
    session.visitor.check_clean()
    shot(page, "tab-search.png")


def ledger_view(page: Page) -> tuple[str, list[list[str]]]:
    from playwright.sync_api import expect

    open_tab(page, ids.TAB_LEDGER)  # selecting the tab loads the ledger
    status = markdown(page, ids.LEDGER_STATUS)
    expect(status).to_contain_text("Chain intact")
    return status.inner_text(), read_grid(page, ids.LEDGER_EVENTS)


def test_the_ledger_tab_shows_the_events_an_intact_chain_and_the_key_id(session: Session, server: app.Running) -> None:
    from playwright.sync_api import expect

    page = session.page
    status, rows = ledger_view(page)
    n = 2 * len(MESSAGES)
    assert f"all {n} events re-verified from genesis" in status
    assert [r[0] for r in rows] == [str(i) for i in range(n)]
    assert [r[1] for r in rows] == ["user", "assistant"] * len(MESSAGES)
    assert [rows[i][3] for i in range(0, n, 2)] == list(MESSAGES)
    first_event = next(m["event"] for m in session.body["memories"] if m["event"]["text"] == FIRST)
    assert rows[0][4] == first_event["digest"][:12] + "…" and rows[0][5] == first_event["chain"][:12] + "…"
    expect(page.locator(f"#{ids.LEDGER_KEY_ID}")).to_contain_text(server.service.key_id)
    expect(page.locator(f"#{ids.LEDGER_PUBLIC_KEY}")).to_contain_text(server.service.key_id)
    # the checkpoint signed after the last append (the last answer's, so the one its receipt carries)
    expect(page.locator(f"#{ids.LEDGER_CHECKPOINT}")).to_contain_text(session.body["checkpoint"]["body"]["root"])
    session.visitor.check_clean()
    shot(page, "tab-ledger.png")


def test_a_reload_resumes_the_same_session(session: Session) -> None:
    from playwright.sync_api import expect

    page = session.page
    before_id = session_id_shown(page)
    before_status, before_rows = ledger_view(page)
    page.reload(wait_until="load")
    assert wait_for_session(page) == before_id == session.body["session"]
    # The chat comes back with the last answer's stamps and receipt.
    expect(markdown(page, ids.STAMPS)).to_contain_text(session.turns[-1].receipt_id)
    expect(page.locator(f"#{ids.RECEIPT_DOWNLOAD}")).to_contain_text(session.turns[-1].receipt_id[:13])
    for m in MESSAGES:
        expect(page.locator(f"#{ids.CHAT_HISTORY} [data-testid=user]").filter(has_text=m)).to_have_count(1)
    status, rows = ledger_view(page)
    head = re.search(r"Head:\s*(\S+)", status)
    assert head and head.group(1) == re.search(r"Head:\s*(\S+)", before_status).group(1)  # type: ignore[union-attr]
    assert rows == before_rows and len(rows) == 2 * len(MESSAGES)
    session.visitor.check_clean()
    shot(page, "reload-ledger.png")


def test_a_second_visitor_finds_nothing_of_the_first_visitors_session(
    session: Session, browser: Browser, server: app.Running
) -> None:
    from playwright.sync_api import expect

    other = open_visitor(browser, server.url)  # a fresh browser context: its own localStorage, so its own session
    try:
        page = other.page
        assert session_id_shown(page) != session.body["session"]
        assert (
            page.locator(f"#{ids.CHAT_HISTORY} [data-testid=user], #{ids.CHAT_HISTORY} [data-testid=bot]").count() == 0
        )
        assert RECEIPT_ID.search(text_of(page, ids.STAMPS)) is None
        open_tab(page, ids.TAB_SEARCH)
        page.locator(f"#{ids.SEARCH_QUERY} textarea").fill(WORD)
        page.locator(f"#{ids.SEARCH_BUTTON}").click()
        expect(markdown(page, ids.SEARCH_STATUS)).to_contain_text("No results")
        assert read_grid(page, ids.SEARCH_RESULTS) == []
        shot(page, "second-visitor-search.png")
        open_tab(page, ids.TAB_LEDGER)
        expect(markdown(page, ids.LEDGER_STATUS)).to_contain_text("no events yet")
        assert read_grid(page, ids.LEDGER_EVENTS) == []
        # Handed the first visitor's receipt, the second can check it offline, never against the first's ledger.
        open_tab(page, ids.TAB_VERIFY)
        upload(page, session.receipt_path)
        verdict = markdown(page, ids.VERIFY_VERDICT)
        expect(verdict).to_contain_text("another session")
        rows = rows_by_check(page)
        not_here = {name for name, row in rows.items() if row[1] == "⚪ not verifiable here"}
        assert {"ledger.events", "ledger.chain"} <= not_here and all(name.startswith("ledger.") for name in not_here)
        assert not [name for name, row in rows.items() if row[1] == "❌\ufe0f FAIL"]
        other.check_clean()
        shot(page, "second-visitor-verify.png")
    finally:
        other.context.close()


def test_manual_search_as_of_searches_the_memory_as_it_stood(session: Session) -> None:
    """Issue 34: the "as of" box, in a real browser: as of 1 event, only the first message existed."""
    from playwright.sync_api import expect

    page = session.page
    open_tab(page, ids.TAB_SEARCH)
    page.locator(f"#{ids.SEARCH_QUERY} textarea").fill(WORD)
    page.locator(f"#{ids.SEARCH_AS_OF} textarea").fill("1")
    page.locator(f"#{ids.SEARCH_BUTTON}").click()
    expect(markdown(page, ids.SEARCH_STATUS)).to_contain_text("As of 1 events")
    rows = read_grid(page, ids.SEARCH_RESULTS)
    assert [r[2] for r in rows] == ["0"] and rows[0][4] == FIRST, rows
    page.locator(f"#{ids.SEARCH_AS_OF} textarea").fill("")
    page.locator(f"#{ids.SEARCH_BUTTON}").click()
    expect(markdown(page, ids.SEARCH_STATUS)).not_to_contain_text("As of")
    session.visitor.check_clean()
