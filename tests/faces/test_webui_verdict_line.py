"""The Verify tab's first line and the session note, without a browser (issue 31): pure renderers over real reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from chat.engine import Engine
from chat.llm import LLM
from receipts.verify import FAIL, NOT_VERIFIABLE, PASS
from webui import render as r
from webui import render_verify as rv
from webui.handlers import UI
from webui.service import Service
from webui.sessions import new_session_key

from ..browser_support import tamper_memory_text


@pytest.fixture
def service(tmp_path: Path) -> Service:
    return Service(Engine(tmp_path / "data", llm=LLM(api_key="")))


def a_receipt(service: Service) -> tuple[str, bytes]:
    key = new_session_key()
    service.remember(key, "my sister is called Ines")
    service.remember(key, "my brother is called Rui")
    turn = service.turn(key, "what is my sister called?", 4)
    return key, Path(turn.receipt_path).read_bytes()


def test_a_verified_receipt_says_how_many_memories_and_which_key_in_one_line(service: Service) -> None:
    key, raw = a_receipt(service)
    report, mode = service.verify(raw, key)
    line = rv.verdict_line(report, mode, rv.signer_of(raw))
    assert line == (
        "### ✅ Verified: these 2 memories, this question and this answer are exactly what the signed ledger holds, "
        f"signed by key `{service.key_id}`."
    )
    assert "\n" not in line


def test_another_sessions_receipt_is_what_was_signed_not_what_the_ledger_holds(service: Service) -> None:
    _key, raw = a_receipt(service)
    report, mode = service.verify(raw, new_session_key())
    assert mode == rv.MODE_OTHER_SESSION
    line = rv.verdict_line(report, mode, rv.signer_of(raw))
    assert "exactly what was signed" in line and "ledger" not in line


def test_a_changed_memory_is_named_first_not_the_receipt_as_a_whole(service: Service) -> None:
    key, raw = a_receipt(service)
    bad, number = tamper_memory_text(raw, "my brother is called Rui")
    report, mode = service.verify(bad, key)
    line = rv.verdict_line(report, mode, rv.signer_of(bad))
    assert line.startswith(f"### ❌ Failed: memory {number} \\(seq ") and "does not verify" in line  # Markdown-escaped
    assert "\n" not in line


def test_every_mark_has_a_word_beside_it() -> None:
    for status in (PASS, FAIL, NOT_VERIFIABLE):
        assert any(ch.isalpha() for ch in rv.GROUP_ICON[status]), status
        assert any(ch.isalpha() for ch in rv.STATUS_LABEL[status]), status
    assert rv.STATUS_LABEL[FAIL].endswith("FAIL") and rv.GROUP_ICON[PASS] == "✅ pass"


def test_the_verify_handler_puts_the_verdict_before_what_the_receipt_says(service: Service, tmp_path: Path) -> None:
    key, raw = a_receipt(service)
    path = tmp_path / "r.json"
    path.write_bytes(raw)
    shown, _table = UI(service).verify(str(path), key)
    assert shown.startswith("### ✅ Verified: these 2 memories")
    assert shown.index("✅ Verified:") < shown.index("What this receipt says")


def test_a_pasted_key_with_no_history_says_it_opens_a_new_session(service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    import gradio as gr

    toasts: list[str] = []
    monkeypatch.setattr(gr, "Info", lambda message, *a, **k: toasts.append(message))
    ui = UI(service)
    note = ui.resume(new_session_key())[2]
    assert "no history under this key — check it if you expected one" in note
    assert toasts == [r.UNKNOWN_KEY_NOTE]
    key, _raw = a_receipt(service)
    assert "no history under this key" not in ui.resume(key)[2]
    assert "no history" not in ui.new_session()[2]  # a new session asked for is not a surprise
    assert toasts == [r.UNKNOWN_KEY_NOTE]
