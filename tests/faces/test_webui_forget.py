"""Forgetting from the app, handler by handler (no server): every entry point opens one confirmation that lists
what goes; Cancel changes nothing; a refused question is a toast and changes nothing, a refused confirmation is a
status line beside the reason (and a toast) that leaves the panel as it was; Confirm erases, offers a certificate
that verifies, and every view (chat, ledger, search, the app's download copies) forgets too."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gradio as gr
import pytest

from chat.engine import Engine
from chat.llm import LLM
from control import forget as cf
from receipts import withheld_seqs
from receipts.body import parse_receipt
from receipts.verify import PASS
from storage.files.receipts import files
from storage.files.receipts.certificate_io import verify_certificate_bytes
from webui import forget as fg
from webui import render as r
from webui.handlers import UI
from webui.service import Service
from webui.sessions import new_session_key, session_id

from ..forget_support import MARKER, files_with_marker

MEMORY = f"My locker code word is {MARKER}"
QUESTIONS = ("What is my locker code word?", "Tell me the locker code word again")


@pytest.fixture
def ui(tmp_path: Path) -> UI:
    return UI(Service(Engine(tmp_path / "data", llm=LLM(api_key=""))))


def chat(ui: UI, key: str, message: str) -> tuple[Any, ...]:
    return list(ui.chat(message, [], 8, key))[-1]


def snapshot(ui: UI) -> dict[str, str]:
    data = ui.service.data_dir
    return {
        str(p.relative_to(data)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(data.rglob("*"))
        if p.is_file()
    }


def download_path(button: Any) -> str:
    value = button.value
    return value["path"] if isinstance(value, dict) else value


def memory_session(ui: UI) -> tuple[str, int]:
    """The marked memory said in the chat (seq 0) and two questions whose answers cite it, every receipt
    downloaded; (key, the memory's seq). All three answers' receipts cite it (the first as its question)."""
    key = new_session_key()
    chat(ui, key, MEMORY)
    for q in QUESTIONS:
        final = chat(ui, key, q)
        assert MARKER in final[2], "the turn must cite the marked memory"
        assert MARKER.encode() in Path(download_path(final[3])).read_bytes()
    return key, 0


def select(row: list[Any]) -> gr.SelectData:
    return gr.SelectData(None, {"index": [0, 0], "value": row[0], "row_value": row, "selected": True})


def refused(confirm: Callable[[], tuple[Any, ...]]) -> str:
    """The status line of a refused confirmation (also a toast: gr.Warning, a UserWarning outside a request); every
    other output of the panel is left as it is."""
    with pytest.warns(UserWarning):
        out = confirm()
    assert len(out) == 8 and all(v == gr.skip() for v in out[:7]), out
    assert out[7].startswith("⚠️ **Nothing was forgotten:**")
    return str(out[7])


def texts(history: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in history if not m.get("metadata")]


class TestAsk:
    def test_the_turn_dropdown_offers_the_memories_of_the_latest_answer(self, ui: UI) -> None:
        key, seq = memory_session(ui)
        rid, dropdown, withhold, _dl = ui.turn_tools(key)
        assert rid == ui.service.latest_receipt(key)[0]
        labels = {v: lab for lab, v in dropdown.choices}
        assert MARKER in labels[seq] and labels[seq].startswith("memory#")
        assert any(lab.startswith("your question") for lab in labels.values())
        assert [v for _lab, v in withhold.choices] == [v for lab, v in dropdown.choices if lab.startswith("memory#")]

    def test_the_confirmation_lists_the_memory_the_answers_that_go_with_it_and_the_receipts(self, ui: UI) -> None:
        key, seq = memory_session(ui)
        before = snapshot(ui)
        out = ui.ask_forget(key, seq)
        pending, box, text, _reason, confirm, _cancel, cert, status = out
        plan = cf.preview(ui.service.data_dir, session_id(key), [seq])
        assert isinstance(pending, fg.Pending) and pending.erase == plan.erase and len(plan.cascaded) == 3
        assert box.visible and confirm.visible and not cert.visible and status == ""
        assert MARKER in text and "Answers that go with it" in text
        for s in plan.cascaded:
            assert f"seq {s} · assistant (answer)" in text
        assert all(rid[:13] in text for rid in plan.redact) and "3 stored receipts redacted" in text
        assert snapshot(ui) == before, "asking changed the data directory"

    def test_cancel_closes_the_panel_and_changes_nothing(self, ui: UI) -> None:
        key, seq = memory_session(ui)
        before = snapshot(ui)
        ui.ask_forget(key, seq)
        pending, box, *_ = ui.cancel_forget()
        assert pending is None and not box.visible
        assert snapshot(ui) == before
        assert "nothing to confirm" in refused(lambda: ui.confirm_forget(key, pending, ""))
        assert snapshot(ui) == before

    @pytest.mark.parametrize(
        ("seq", "words"),
        [
            ("99", "no event at seq 99"),
            ("abc", "not a non-negative integer"),
            ("", "choose a memory first"),
            (None, "choose a memory first"),
        ],
        ids=["out-of-range", "not-a-number", "empty-box", "nothing-picked"],
    )
    def test_a_bad_seq_is_a_toast_and_changes_nothing(self, ui: UI, seq: object, words: str) -> None:
        key, _seq = memory_session(ui)
        before = snapshot(ui)
        with pytest.raises(gr.Error, match=words):
            ui.ask_forget(key, seq)
        assert snapshot(ui) == before

    def test_an_already_forgotten_memory_and_the_erasure_record_are_refused_with_a_toast(self, ui: UI) -> None:
        key, seq = memory_session(ui)
        pending = ui.ask_forget(key, seq)[0]
        ui.confirm_forget(key, pending, "")
        record = ui.service.engine.ledger.head(session_id(key))[0] - 1
        before = snapshot(ui)
        with pytest.raises(gr.Error, match=f"seq {seq} is already erased"):
            ui.ask_forget(key, str(seq))
        with pytest.raises(gr.Error, match="is an erasure record"):
            ui.ask_forget(key, str(record))
        assert "already erased" in refused(lambda: ui.confirm_forget(key, pending, ""))  # a stale confirmation of it
        assert snapshot(ui) == before

    def test_a_session_with_no_events_has_nothing_to_forget(self, ui: UI) -> None:
        key = new_session_key()
        with pytest.raises(gr.Error, match="nothing to forget"):
            ui.ask_forget(key, "0")
        with pytest.raises(gr.Error, match="nothing to forget"):
            ui.ask_forget_session(key)


class TestConfirm:
    def confirm(self, ui: UI, key: str, seq: object, reason: str = "") -> tuple[Any, ...]:
        pending = ui.ask_forget(key, seq)[0]
        out = ui.confirm_forget(key, pending, reason)
        assert out[0] == fg.DONE_EVENTS
        return out

    def test_forgetting_from_the_ledger_row_erases_it_and_offers_a_certificate_that_verifies(self, ui: UI) -> None:
        key, seq = memory_session(ui)
        _status, table, _cp = ui.ledger(key)
        row = next(row for row in table["data"] if MARKER in row[3])
        picked = ui.pick_ledger_row(select(row))
        assert picked == str(seq)
        _state, box, text, reason, confirm, cancel, cert, status = self.confirm(ui, key, picked)
        assert status == ""
        assert box.visible and not confirm.visible and not reason.visible and cancel.value == "Close"
        assert "Forgotten:" in text and MARKER not in text
        raw = Path(download_path(cert)).read_bytes()
        report = verify_certificate_bytes(raw, trusted=[ui.service.engine.key.public_key], data_dir=ui.service.data_dir)
        assert report.verdict == "verified", [c for c in report.checks if c.status != PASS]
        assert MARKER.lower().encode() not in raw.lower()

    def test_after_forgetting_the_chat_the_ledger_and_a_reload_read_forgotten(self, ui: UI) -> None:
        key, seq = memory_session(ui)
        self.confirm(ui, key, str(seq))
        erased = [ev.seq for ev in ui.service.engine.ledger.events(session_id(key)) if ev.erased]
        assert seq in erased and len(erased) == 4  # the memory and the three answers that cited it
        for history in (ui.after_forget(key, fg.DONE_EVENTS)[3], ui.start(key)[3]):  # on screen, and after a reload
            shown = texts(history)
            assert shown.count(r.literal(r.FORGOTTEN)) == 4 and not any(MARKER in t for t in shown)
            assert shown[0] == r.literal(r.FORGOTTEN) and r.literal(QUESTIONS[0]) in shown
            assert history[-1]["metadata"]["title"] == r.ERASURE_TITLE and "erasure record" in history[-1]["content"]
        rows = ui.ledger(key)[1]["data"]
        assert [row[0] for row in rows if row[3] == r.FORGOTTEN] == erased
        status, results, _why = ui.search(MARKER, 8, key)
        assert results["data"] == [] and "No results" in status
        assert ui.turn_tools(key)[1].choices == [] or all(
            MARKER not in lab for lab, _v in ui.turn_tools(key)[1].choices
        )

    def test_the_checkpoint_the_browser_kept_is_still_extended_after_forgetting(self, ui: UI) -> None:
        key, seq = memory_session(ui)
        kept = ui.service.history_check(key, None).keep  # what the page keeps after the last turn
        assert kept is not None
        self.confirm(ui, key, seq)
        check = ui.service.history_check(key, json.dumps(kept))
        assert check.outcome == "extends" and not check.warning, check.to_dict()
        assert check.keep is not None and check.keep["body"]["tree_size"] == kept["body"]["tree_size"] + 1

    def test_forgetting_from_a_search_result_works_the_same(self, ui: UI) -> None:
        key, seq = memory_session(ui)
        _status, results, _why = ui.search(MARKER, 8, key)
        row = next(row for row in results["data"] if MARKER in row[4])
        picked = ui.pick_search_row(select(row))
        assert picked == str(seq)
        self.confirm(ui, key, picked)
        assert ui.search(MARKER, 8, key)[1]["data"] == []

    def test_forgetting_from_the_turn_dropdown_works_the_same(self, ui: UI) -> None:
        key, seq = memory_session(ui)
        choices = ui.turn_tools(key)[1].choices
        value = next(v for lab, v in choices if MARKER in lab)
        self.confirm(ui, key, value)
        assert ui.service.engine.ledger.read_events(session_id(key), [seq])[0].erased

    def test_the_app_s_copies_of_the_receipts_are_deleted_and_the_offered_one_is_redacted(
        self, ui: UI, tmp_path: Path
    ) -> None:
        key, seq = memory_session(ui)
        gradio_cache = tmp_path / "gradio-cache"  # stands in for Gradio's file cache (app.build registers it)
        ui.service.cache_dirs.append(gradio_cache)
        for p in files.list_receipts(ui.service.data_dir, session_id(key)):  # an upload, under a name of its own
            (gradio_cache / p.stem[-6:]).mkdir(parents=True)
            (gradio_cache / p.stem[-6:] / "my receipt.json").write_bytes(p.read_bytes())
        (gradio_cache / "other.json").write_text('{"unrelated": true}')
        assert files_with_marker(ui.service.downloads.root, gradio_cache)
        text = self.confirm(ui, key, seq)[2]
        assert "cached copies of its receipts deleted" in text
        assert files_with_marker(ui.service.downloads.root, gradio_cache, ui.service.data_dir) == []
        assert (gradio_cache / "other.json").exists()
        for p in files.list_receipts(ui.service.data_dir, session_id(key)):  # a copy offered again is the redacted one
            copy = ui.service.restored_receipt(key, p.stem)
            assert copy is not None
            raw = Path(copy).read_bytes()
            assert parse_receipt(raw).session == session_id(key) and MARKER.encode() not in raw

    def test_a_reason_that_repeats_the_memory_is_refused_and_nothing_changes(self, ui: UI) -> None:
        key, seq = memory_session(ui)
        pending = ui.ask_forget(key, seq)[0]
        before = snapshot(ui)
        assert "reason: repeats a word" in refused(lambda: ui.confirm_forget(key, pending, f"it held {MARKER}"))
        assert snapshot(ui) == before

    def test_a_refused_reason_returns_a_status_beside_it_and_leaves_the_panel_as_it_is(self, ui: UI) -> None:
        """Issue 28 §6: the refusal is not raised (gr.Error put an "Error" overlay on every output of the event and
        locked the panel): every other output is left as it is — the preview, the reason typed, both buttons — and
        the status line says why; the same pending confirmation then goes through with a reason that says no word."""
        key, seq = memory_session(ui)
        pending = ui.ask_forget(key, seq)[0]
        with pytest.warns(UserWarning, match="repeats a word"):  # the toast (gr.Warning, outside a request)
            out = ui.confirm_forget(key, pending, f"it held {MARKER}")
        assert len(out) == 8 and all(v == gr.skip() for v in out[:7]), out[:7]
        assert "Nothing was forgotten" in out[7] and "reason: repeats a word of the event at seq 0" in out[7]
        assert MARKER not in out[7]
        done = ui.confirm_forget(key, pending, "a private detail")
        assert done[0] == fg.DONE_EVENTS and done[7] == ""

    def test_a_confirmation_for_another_session_is_refused(self, ui: UI) -> None:
        key, seq = memory_session(ui)
        pending = ui.ask_forget(key, seq)[0]
        other = new_session_key()
        chat(ui, other, "hello")
        before = snapshot(ui)
        assert "another session" in refused(lambda: ui.confirm_forget(other, pending, ""))
        assert snapshot(ui) == before

    def test_a_new_answer_citing_it_after_the_question_asks_again_and_erases_nothing(self, ui: UI) -> None:
        key, seq = memory_session(ui)
        pending = ui.ask_forget(key, seq)[0]
        chat(ui, key, "Which code word opens my locker?")  # one more answer cites the memory
        before = snapshot(ui)
        again, box, text, *_rest = ui.confirm_forget(key, pending, "")
        assert "changed since you were asked" in text and len(again.erase) == len(pending.erase) + 1
        assert box.visible and snapshot(ui) == before
        assert ui.after_forget(key, again) == tuple(gr.skip() for _ in range(6))
        ui.confirm_forget(key, again, "")
        assert ui.service.engine.ledger.read_events(session_id(key), [seq])[0].erased


class TestForgetSession:
    def test_the_whole_session_goes_with_a_certificate_and_a_new_session_starts(self, ui: UI) -> None:
        key, _seq = memory_session(ui)
        session = session_id(key)
        asked = ui.ask_forget_session(key)
        assert asked[0].scope == fg.SESSION and "6 events" in asked[2] and "2 receipts" not in asked[2]
        assert not asked[3].visible  # no reason box: a whole-session certificate holds only hashes
        state, _box, text, _reason, _confirm, _cancel, cert, _status = ui.confirm_forget(key, asked[0], "")
        assert state == fg.DONE_SESSION and "Session forgotten" in text
        assert not ui.service.engine.ledger.exists(session)
        raw = Path(download_path(cert)).read_bytes()
        report = verify_certificate_bytes(raw, trusted=[ui.service.engine.key.public_key], data_dir=ui.service.data_dir)
        assert report.verdict == "verified", [c for c in report.checks if c.status != PASS]
        fresh = ui.after_forget(key, state)
        assert fresh[0] != key and fresh[3] == []
        assert files_with_marker(ui.service.downloads.root, ui.service.data_dir) == []


class TestWithhold:
    def test_a_copy_with_a_memory_withheld_still_verifies_and_reads_withheld(self, ui: UI) -> None:
        key, seq = memory_session(ui)
        rid, _dropdown, withhold, _dl = ui.turn_tools(key)
        assert seq in [v for _lab, v in withhold.choices]
        button = ui.withhold(key, rid, [seq])
        assert button.interactive and f"seq {seq}" in button.label
        path = download_path(button)
        raw = Path(path).read_bytes()
        assert withheld_seqs(raw) == [seq] and Path(path).name == f"{rid}-withheld.json"
        verdict, report = ui.verify(path, key)
        (line,) = [ln for ln in verdict.splitlines() if ln.startswith("1. memory") and f"(seq {seq}," in ln]
        assert "[withheld]" in line and MARKER not in line  # other memories (answers that quoted it) are not withheld
        rows = {row[0]: row for row in report["data"]}
        assert rows["envelope.signature"][1].endswith("pass")
        assert any("withheld" in str(row[1]) for row in rows.values())
        assert "Verified" in verdict or "verified" in verdict.lower()

    def test_ticking_nothing_offers_nothing(self, ui: UI) -> None:
        key, _seq = memory_session(ui)
        rid = ui.turn_tools(key)[0]
        assert not ui.withhold(key, rid, []).interactive

    def test_a_receipt_of_another_session_cannot_be_copied(self, ui: UI) -> None:
        key, seq = memory_session(ui)
        rid = ui.turn_tools(key)[0]
        with pytest.raises(gr.Error, match="not in this session"):
            ui.withhold(new_session_key(), rid, [seq])


def interrupted(ui: UI, monkeypatch: pytest.MonkeyPatch) -> None:
    """A forget that stopped after the ledger was rewritten, before the receipts were redacted."""
    key, seq = memory_session(ui)
    from control import steps

    def crash(*_a: object, **_k: object) -> None:
        raise SystemExit("killed")  # stands in for a SIGKILL after the ledger was rewritten

    with monkeypatch.context() as mp:
        mp.setattr(steps, "apply_receipts", crash)
        with pytest.raises(SystemExit):
            cf.forget(
                ui.service.data_dir,
                session_id(key),
                [seq],
                ledger=ui.service.engine.ledger,
                index=ui.service.engine.index,
                key=ui.service.engine.key,
            )
    assert cf.pending(ui.service.data_dir)
    assert files_with_marker(ui.service.data_dir)


def test_recover_finishes_an_erasure_a_crash_interrupted(ui: UI, monkeypatch: pytest.MonkeyPatch) -> None:
    interrupted(ui, monkeypatch)
    written = fg.recover(ui.service)
    assert len(written) == 1 and written[0].is_file() and cf.pending(ui.service.data_dir) == []
    assert files_with_marker(ui.service.data_dir) == []
    assert json.loads(written[0].read_bytes())["payloadType"] == "application/vnd.mre.erasure+json"


class TestVerifyTabCertificate:
    def forgotten(self, ui: UI, tmp_path: Path) -> tuple[str, Path]:
        key, seq = memory_session(ui)
        pending = ui.ask_forget(key, seq)[0]
        cert = ui.confirm_forget(key, pending, "")[6]
        path = tmp_path / "cert.json"
        path.write_bytes(Path(download_path(cert)).read_bytes())
        return key, path

    def test_the_downloaded_certificate_verifies_on_the_verify_tab_against_the_ledger(
        self, ui: UI, tmp_path: Path
    ) -> None:
        key, path = self.forgotten(ui, tmp_path)
        verdict, report = ui.verify(str(path), key)
        assert "Verified erasure certificate" in verdict and "4 event(s)" in verdict
        assert "this data directory's ledger" in verdict and MARKER not in verdict
        rows = {row[0]: row[1] for row in report["data"]}
        assert rows and all(v.endswith("pass") for v in rows.values()), rows
        assert any(name.startswith("ledger.") for name in rows)

    def test_another_visitor_checks_it_offline_only(self, ui: UI, tmp_path: Path) -> None:
        _key, path = self.forgotten(ui, tmp_path)
        verdict, report = ui.verify(str(path), new_session_key())
        assert "Checked **offline**" in verdict and "Verified erasure certificate" in verdict
        assert any("not verifiable" in row[1] for row in report["data"])

    def test_a_tampered_certificate_fails_with_a_named_check(self, ui: UI, tmp_path: Path) -> None:
        key, path = self.forgotten(ui, tmp_path)
        env = json.loads(path.read_bytes())
        body = json.loads(__import__("base64").b64decode(env["payload"]))
        body["erased"][0]["seq"] = body["erased"][0]["seq"] + 1  # claims another event went
        env["payload"] = (
            __import__("base64").b64encode(json.dumps(body, separators=(",", ":"), sort_keys=True).encode()).decode()
        )
        path.write_text(json.dumps(env))
        verdict, report = ui.verify(str(path), key)
        assert "## ❌ Failed" in verdict and "signature" in verdict
        assert any(row[1].endswith("FAIL") for row in report["data"])


def test_the_app_runs_recover_when_it_starts(ui: UI, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    import app
    from webui.config import Config

    interrupted(ui, monkeypatch)
    data = ui.service.data_dir
    ui.service.engine.index.close()
    ui.service.engine.ledger.close()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    monkeypatch.setenv("GRADIO_ANALYTICS_ENABLED", "False")
    running = app.start(Config(data, "127.0.0.1", port, None, 4, False), quiet=True)
    try:
        assert cf.pending(data) == [] and list((data / "erasures").glob("erasure-*.json"))
        assert files_with_marker(data) == []
    finally:
        running.stop()


# A real crash of the app's process mid-forget: it had put download copies of the receipts in its own download folder
# (webui.downloads) and Gradio had copied them into its file cache (and an upload of one under the visitor's name).
KILLED_APP = r"""
import os, shutil, signal, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from gradio.processing_utils import save_file_to_cache
from chat.engine import Engine
from chat.llm import LLM
from storage.files.retrieval.db import Index
from webui.handlers import UI
from webui.service import Service
from webui.sessions import new_session_key
data, cache, visitor, memory, *questions = sys.argv[2:]
ui = UI(Service(Engine(data, llm=LLM(api_key=""))))
ui.service.cache_dirs.append(Path(cache))  # as app.build adds Gradio's cache
key = new_session_key()
list(ui.chat(memory, [], 8, key))
for q in questions:
    button = list(ui.chat(q, [], 8, key))[-1][3]
    copy = button.value["path"] if isinstance(button.value, dict) else button.value
    save_file_to_cache(copy, cache)  # what Gradio does with a file a handler returns
    mine = Path(visitor) / "mine.json"
    shutil.copyfile(copy, mine)
    save_file_to_cache(mine, cache)  # the visitor uploads it again under their own name
pending = ui.ask_forget(key, 0)[0]
Index.forget_events = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)  # after the ledger's rewrite
ui.confirm_forget(key, pending, "")
"""


def test_a_sigkill_mid_forget_leaves_no_copy_in_the_download_folders_once_the_app_starts_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import signal
    import socket
    import subprocess
    import sys
    import tempfile

    import app
    from webui.config import Config

    data, tmp, cache, visitor = tmp_path / "data", tmp_path / "tmp", tmp_path / "gradio-cache", tmp_path / "visitor"
    for folder in (tmp, visitor):
        folder.mkdir()
    downloads = tmp / "mre-downloads"  # webui.downloads' default folder under the temp dir
    env = {**os.environ, "TMPDIR": str(tmp), "GRADIO_TEMP_DIR": str(cache), "GRADIO_ANALYTICS_ENABLED": "False"}
    env.pop("GROQ_API_KEY", None)
    root = str(Path(__file__).resolve().parents[2])
    child = subprocess.run(
        [sys.executable, "-c", KILLED_APP, root, str(data), str(cache), str(visitor), MEMORY, *QUESTIONS],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr[-3000:]
    (dead,) = list(downloads.glob("run-*"))
    assert cf.pending(data), "the kill came after the ledger's rewrite, before the receipts and the copies"
    assert files_with_marker(dead) and files_with_marker(cache), "the copies held the marker when the process died"

    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(cache))
    monkeypatch.setenv("GRADIO_ANALYTICS_ENABLED", "False")
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    running = app.start(Config(data, "127.0.0.1", port, None, 4, False), quiet=True)
    try:
        assert cf.pending(data) == [] and list((data / "erasures").glob("erasure-*.json"))
        assert files_with_marker(data, downloads, cache) == []
        assert running.service.downloads.root.parent == downloads and not dead.exists()
    finally:
        running.stop()
