"""Helpers for tests/faces/test_browser.py: finding the browser, reading Gradio's components from the DOM, timing.

Everything here reads the page the way a visitor sees it (rendered text), keyed by the
elem_ids in webui/ids.py. Gradio internals are touched in two places only, both marked:
the Dataframe's virtual-scroll rows (`[role=row][data-index]`) and the toast test id.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import socket
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

    import app

CHROMIUM = "/usr/bin/chromium"
INSTALL_HINT = "chromium not found: apt-get install -y chromium (and pip install playwright)"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # Belt and braces for "loopback only": anything not on loopback goes to a dead proxy and fails
    # (Chromium always bypasses proxies for localhost/127.0.0.1, so the app itself is unaffected).
    "--proxy-server=http://127.0.0.1:9",
]
WAIT_MS = 20_000  # every wait in the browser tests: generous, finite
RECEIPT_ID = re.compile(r"rcpt_[0-9a-f]{32}")
TOAST = "toast-body"  # Gradio's data-testid for a toast (gr.Error / gr.Warning / gr.Info)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def launched_browser() -> Iterator[Browser]:
    """Debian's chromium, headless, loopback only, every wait WAIT_MS (the `browser` fixture in conftest.py)."""
    require_browser()
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=WAIT_MS)
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=WAIT_MS)
        try:
            yield b
        finally:
            b.close()


@contextlib.contextmanager
def offline_app(
    data: Path, *, mcp: bool = True, port: int | None = None, env: Mapping[str, str] | None = None, witnesses: Any = None
) -> Iterator[app.Running]:
    """The app on a free loopback port with the offline stand-in (no GROQ_API_KEY: never the network) and a key
    of the data directory's own; `env` stays set for the server's lifetime (Gradio reads GRADIO_TEMP_DIR late);
    `witnesses` the tlog-policy its turns are cosigned under (what WITNESS_POLICY names)."""
    import app as app_module
    from webui.config import Config

    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("GROQ_API_KEY", raising=False)
        mp.delenv("RECEIPT_SIGNING_KEY", raising=False)
        mp.setenv("GRADIO_ANALYTICS_ENABLED", "False")
        for name, value in (env or {}).items():
            mp.setenv(name, value)
        running = app_module.start(
            Config(data, "127.0.0.1", free_port() if port is None else port, None, 16, mcp, witnesses=witnesses), quiet=True
        )
        try:
            yield running
        finally:
            running.stop()


def require_browser() -> None:
    """Skip with the install hint when chromium or playwright is missing — or fail, under CI=true."""
    problems = []
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        problems.append("the playwright package is not installed")
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        problems.append(
            f"{CHROMIUM} is missing"
            + (f" (found {shutil.which('chromium')} instead)" if shutil.which("chromium") else "")
        )
    if not problems:
        return
    why = f"{INSTALL_HINT} — {'; '.join(problems)}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why}. CI=true: the browser tests must run in CI.", pytrace=False)
    pytest.skip(why)


def is_loopback(url: str) -> bool:
    if url.startswith(("data:", "blob:", "about:")):
        return True
    m = re.match(r"^[a-z][a-z0-9+.-]*://(\[[^\]]*\]|[^/:?#]*)", url, re.I)
    host = (m.group(1) if m else "").lower()
    return host in ("127.0.0.1", "localhost", "[::1]")


# -- reading the page ---------------------------------------------------------------------------
# A Gradio Dataframe renders only the rows in view (virtual scrolling): scroll through it and
# collect every row by its index, so a 31-row verification report is read completely.
_READ_GRID = """
async (sel) => {
  const root = document.querySelector(sel);
  if (!root) return null;
  const grid = root.querySelector('[role=grid]');
  if (!grid) return null;
  const total = Math.max(0, Number(grid.getAttribute('aria-rowcount') || '1') - 1);
  const frame = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const scrollable = [grid, ...grid.querySelectorAll('*')].find(e => {
    const oy = getComputedStyle(e).overflowY;
    return (oy === 'auto' || oy === 'scroll') && e.scrollHeight > e.clientHeight + 1;
  });
  const rows = new Map();
  const grab = () => root.querySelectorAll('[role=row][data-index]').forEach(r => {
    rows.set(Number(r.dataset.index), [...r.querySelectorAll('[role=gridcell]')].map(c => c.innerText.trim()));
  });
  if (scrollable) { scrollable.scrollTop = 0; await frame(); }
  grab();
  for (let i = 0; scrollable && rows.size < total && i < 500; i++) {
    const before = scrollable.scrollTop;
    scrollable.scrollTop = before + Math.max(40, scrollable.clientHeight / 2);
    await frame();
    grab();
    if (scrollable.scrollTop === before) break;  // at the bottom
  }
  if (scrollable) scrollable.scrollTop = 0;
  return {total, rows: [...rows.entries()].sort((a, b) => a[0] - b[0]).map(e => e[1])};
}
"""


def read_grid(page: Page, elem_id: str) -> list[list[str]]:
    """Every row of the Dataframe with this elem_id, as rendered text; waits until all rows are read."""
    settled(page, elem_id)
    last: Any = None
    for _ in range(40):
        last = page.evaluate(_READ_GRID, f"#{elem_id}")
        if last is not None and len(last["rows"]) == last["total"]:
            return [list(r) for r in last["rows"]]
        page.wait_for_timeout(100)
    raise AssertionError(f"#{elem_id}: could not read all rows of the table (last read: {last!r})")


def markdown(page: Page, elem_id: str) -> Locator:
    """The rendered text of a gr.Markdown (without the status tracker Gradio puts beside it while an event runs)."""
    return page.locator(f"#{elem_id} [data-testid=markdown]")


def text_of(page: Page, elem_id: str) -> str:
    return markdown(page, elem_id).inner_text()


def settled(page: Page, elem_id: str) -> None:
    """Wait until no event is running for this component (Gradio hides its status tracker: class `hide`)."""
    from playwright.sync_api import expect

    expect(page.locator(f"#{elem_id} > [data-testid=status-tracker]")).to_have_class(re.compile(r"\bhide\b"))


def open_tab(page: Page, tab_elem_id: str) -> None:
    """Gradio gives each tab button the id `<tab elem_id>-button`."""
    page.locator(f"#{tab_elem_id}-button").click()
    page.locator(f"#{tab_elem_id}").wait_for(state="visible")


def toasts(page: Page) -> list[str]:
    return [t.inner_text() for t in page.get_by_test_id(TOAST).all()]


# -- timing submit → stamps ---------------------------------------------------------------------
# Installed just before the click: records (performance.now()) the click itself, the first
# server update of the chat (the pending answer), the stamps' DOM update and the next paint.
INSTALL_TIMER = """
([sendSel, stampsSel, chatSel, beforeId]) => {
  const t = window.__mreTimer = {click: null, first: null, stamps: null, painted: null};
  document.querySelector(sendSel).addEventListener('click', () => { t.click = performance.now(); }, {capture: true, once: true});
  // The rendered Markdown only: while an event runs, Gradio's status tracker adds its own text beside it.
  const stamps = document.querySelector(stampsSel), chat = document.querySelector(chatSel);
  const shown = () => { const m = stamps.querySelector('[data-testid=markdown]'); return m ? m.innerText : ''; };
  const onStamps = new MutationObserver(() => {
    const id = (shown().match(/rcpt_[0-9a-f]{32}/) || [null])[0];
    if (t.click !== null && t.stamps === null && id !== null && id !== beforeId) {
      t.stamps = performance.now();
      t.receipt_id = id;
      onStamps.disconnect();
      requestAnimationFrame(() => { t.painted = performance.now(); });
    }
  });
  onStamps.observe(stamps, {subtree: true, childList: true, characterData: true});
  const onChat = new MutationObserver(() => {
    if (t.click !== null && t.first === null && chat.innerText.includes('\u23f3')) { t.first = performance.now(); onChat.disconnect(); }
  });
  onChat.observe(chat, {subtree: true, childList: true, characterData: true});
}
"""
TIMER_DONE = "() => window.__mreTimer && window.__mreTimer.painted !== null"
READ_TIMER = "() => window.__mreTimer"


# -- receipts -------------------------------------------------------------------------------------
def receipt_body(raw: bytes) -> dict[str, Any]:
    """What the receipt says (receipts.body.Receipt.body): format 2 with its disclosed texts merged in."""
    from receipts.body import parse_receipt

    return parse_receipt(raw).body


def tamper_memory_text(raw: bytes, text: str) -> tuple[bytes, int]:
    """A copy of the receipt with one character of the memory whose text is `text` changed: in its disclosure
    (format 2, beside the signature) or inside the signed (base64) payload (format 1); the file stays valid
    JSON. Returns (copy, that memory's 1-based number)."""
    envelope = json.loads(raw)
    number = next(i + 1 for i, m in enumerate(receipt_body(raw)["memories"]) if m["event"].get("text") == text)
    if "disclosures" in envelope:
        (d,) = [d for d in envelope["disclosures"] if d["text"] == text]
        d["text"] = text[:-1] + ("a" if text[-1] != "a" else "b")
        return (json.dumps(envelope, indent=2, sort_keys=True) + "\n").encode("utf-8"), number
    payload = envelope["payload"]
    urlsafe = "-" in payload or "_" in payload
    decoded = (base64.urlsafe_b64decode if urlsafe else base64.b64decode)(payload)
    needle = json.dumps({"text": text}, ensure_ascii=False, separators=(",", ":"))[1:-1].encode("utf-8")  # "text":"…"
    assert decoded.count(needle) == 1, f"{needle!r} occurs {decoded.count(needle)} times in the payload"
    at = decoded.index(needle) + len(needle) - 2  # the last character of the text
    flipped = bytearray(decoded)
    flipped[at] = ord("a") if flipped[at] != ord("a") else ord("b")
    envelope["payload"] = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(bytes(flipped)).decode("ascii")
    return (json.dumps(envelope, indent=2, sort_keys=True) + "\n").encode("utf-8"), number
