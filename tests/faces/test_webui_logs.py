"""The app's logs never hold memory text (issue 11's reviewer): a failing turn, consent turn, search, receipt
panel, sweep or start-up, whose exception quotes a marker word, leaves no trace of it in any log record at DEBUG —
message, arguments, exception text or traceback — nor in the start-up error line. The log keeps the class."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import gradio as gr
import pytest

import app
from chat.engine import Engine
from chat.llm import LLM
from webui import render_receipt as rr
from webui.handlers import UI
from webui.retention import Sweeper
from webui.service import Service
from webui.sessions import new_session_key

MARKER = "zanzibarquill"  # a memory's word, as an exception message might quote it


@pytest.fixture
def ui(tmp_path: Path) -> UI:
    return UI(Service(Engine(tmp_path / "data", llm=LLM(api_key=""))))


def boom(*_a: Any, **_k: Any) -> Any:
    raise RuntimeError(f"the memory says {MARKER}")


def leaked(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Every record, formatted with its traceback, that holds the marker."""
    fmt = logging.Formatter("%(name)s %(levelname)s %(message)s")
    return [fmt.format(rec) for rec in caplog.records if MARKER in fmt.format(rec) or MARKER in str(rec.args)]


def classes_logged(caplog: pytest.LogCaptureFixture) -> str:
    return " ".join(rec.getMessage() for rec in caplog.records)


def test_a_turn_failing_inside_the_engine_logs_no_memory_text_and_shows_none(
    ui: UI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    key = new_session_key()
    ui.service.remember(key, f"my word is {MARKER}")
    ui.service.engine.index.search = boom  # type: ignore[method-assign]
    outs = []
    with pytest.raises(gr.Error) as info:
        for out in ui.chat("what is my word?", [], 8, key):
            outs.append(out)
    assert leaked(caplog) == [] and "RuntimeError" in classes_logged(caplog)
    assert MARKER not in info.value.message and "RuntimeError" not in info.value.message
    assert "the turn failed" in info.value.message
    assert MARKER not in str(outs[-1][0][-1]["content"])  # the chat's "No answer" note


def test_an_unexpected_failure_at_the_edge_logs_the_class_and_place_only(
    ui: UI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    ui.service.turn = boom  # type: ignore[method-assign]
    with pytest.raises(gr.Error) as info:
        list(ui.chat("hello", [], 8, new_session_key()))
    assert leaked(caplog) == []
    assert "RuntimeError at test_webui_logs.py" in classes_logged(caplog)
    assert all(rec.exc_info is None and rec.exc_text is None for rec in caplog.records)
    assert MARKER not in info.value.message


def test_a_consent_turn_failing_logs_no_memory_text(ui: UI, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    key = new_session_key()
    ui.service.remember(key, f"my word is {MARKER}")
    _h, _b, waiting, _p, _t, pick = ui.propose("what is my word?", [], 8, key, True)
    ui.service.engine.llm.complete = boom  # type: ignore[method-assign]
    with pytest.raises(gr.Error) as info:
        list(ui.consent_send(key, waiting, [v for _l, v in pick.choices], _h))
    assert leaked(caplog) == [] and MARKER not in info.value.message


def test_a_failing_search_logs_no_query_or_memory_text(ui: UI, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    ui.service.engine.index.search = boom  # type: ignore[method-assign]
    status, _results, _why = ui.search(f"find {MARKER}", 8, new_session_key())
    assert "failed on the server" in status and MARKER not in status
    assert leaked(caplog) == [] and "RuntimeError" in classes_logged(caplog)


def test_a_receipt_panel_that_cannot_be_laid_out_logs_no_text(
    ui: UI, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = new_session_key()
    final = list(ui.chat(f"remember {MARKER}", [], 8, key))[-1]
    raw = Path(final[3].value if isinstance(final[3].value, str) else final[3].value["path"]).read_bytes()
    caplog.set_level(logging.DEBUG)
    monkeypatch.setattr(rr, "summarize", boom)
    assert rr.panel_for(raw) == rr.UNREADABLE
    assert leaked(caplog) == [] and "RuntimeError" in classes_logged(caplog)


def test_a_failing_sweep_logs_no_text(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    Sweeper([boom], 60).run_once()
    assert leaked(caplog) == [] and "RuntimeError" in classes_logged(caplog)


def test_a_start_up_failure_prints_a_fixed_sentence_and_logs_only_the_class(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setattr(app, "start", boom)
    assert app.main(["--data", str(tmp_path / "d")]) == 1
    err = capsys.readouterr().err
    assert MARKER not in err and "RuntimeError" not in err and err.count("\n") == 1
    assert leaked(caplog) == [] and "RuntimeError" in classes_logged(caplog)
