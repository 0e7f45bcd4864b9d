"""Revoke and Restore from the app, handler by handler (no server): beside every Forget… entry point, a revoke keeps
the memory out of the next answer and its stamps and receipt name the revocation; restore brings it back; a refused
request is a status line beside the control and a toast (never gr.Error, whose "Error" overlay covered the status line
and locked the row: issue 28 §6), appends nothing and refreshes nothing; the ledger view and the search results label a
revoked memory."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import gradio as gr
import pytest

from chat.engine import Engine
from chat.llm import LLM
from storage.files.receipts.api import verify_bytes
from webui import ids
from webui import render_controls as rc
from webui.handlers import UI
from webui.service import Service
from webui.sessions import new_session_key, session_id

MEMORY = "My bicycle is a green Gazelle"
OTHER = "My bicycle lock code is with my sister"
QUESTION = "What do you know about my bicycle?"


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


def session(ui: UI) -> str:
    key = new_session_key()
    ui.service.remember(key, MEMORY)  # seq 0
    ui.service.remember(key, OTHER)  # seq 1
    return key


def done(out: tuple[Any, ...]) -> str:
    """The status line of a revoke or restore that went through (its changed State reads True)."""
    assert len(out) == 2 and out[1] is True, out
    return str(out[0])


def refused(out: tuple[Any, ...], verb: str) -> str:
    """The status line of a refused revoke or restore: said beside the control, nothing changed (the State reads False,
    so the ledger and the search are not refreshed)."""
    assert len(out) == 2 and out[1] is False, out
    assert out[0].startswith(f"⚠️ **Not {verb}:**"), out[0]
    return str(out[0])


def cited_seqs(ui: UI, key: str) -> list[int]:
    latest = ui.service.latest_receipt(key)
    assert latest is not None
    return [m["event"]["seq"] for m in latest[1]["memories"]]


class TestRevoke:
    @pytest.mark.parametrize("entry", ["turn", "search", "ledger"])
    def test_a_revoked_memory_is_left_out_of_the_same_question_and_the_stamps_and_receipt_name_the_revocation(
        self, ui: UI, entry: str
    ) -> None:
        key = session(ui)
        chat(ui, key, QUESTION)
        assert 0 in cited_seqs(ui, key)
        seq: Any = 0 if entry == "turn" else "0"  # the dropdown's int, or a selected row's / typed seq
        status = done(ui.revoke(key, seq))
        control_seq = ui.service.engine.ledger.head(session_id(key))[0] - 1
        assert "Revoked" in status and f"control event at seq {control_seq}" in status.lower()
        final = chat(ui, key, QUESTION)
        assert 0 not in cited_seqs(ui, key) and 1 in cited_seqs(ui, key)
        assert MEMORY not in final[2]
        assert f"Left out because you revoked them:** seq 0 (revocation at seq {control_seq})" in final[2]
        raw = Path(download_path(final[3])).read_bytes()
        report = verify_bytes(raw, trusted=[ui.service.engine.key.public_key], data_dir=ui.service.data_dir)
        assert report.verdict == "verified"
        assert any(c.name == "ledger.exclusions" and c.status == "pass" for c in report.checks)

    def test_restore_brings_it_back_into_the_next_answer(self, ui: UI) -> None:
        key = session(ui)
        ui.revoke(key, "0")
        chat(ui, key, QUESTION)
        assert 0 not in cited_seqs(ui, key)
        assert "Restored" in done(ui.restore(key, "0"))
        final = chat(ui, key, QUESTION)
        assert 0 in cited_seqs(ui, key) and "Left out because you revoked" not in final[2]

    @pytest.mark.parametrize(
        ("action", "seq", "match"),
        [
            ("revoke", "99", "no event at seq 99"),
            ("revoke", "", "choose a memory first"),
            ("revoke", "x1", "not a non-negative integer"),
            ("restore", "0", "not revoked"),
        ],
    )
    def test_a_bad_seq_is_said_beside_the_control_and_in_a_toast_and_nothing_is_appended(
        self, ui: UI, action: str, seq: str, match: str
    ) -> None:
        key = session(ui)
        before = snapshot(ui)
        with pytest.warns(UserWarning, match=match):  # the toast (gr.Warning, outside a request)
            out = getattr(ui, action)(key, seq)
        assert match in refused(out, "revoked" if action == "revoke" else "restored").replace("\\", "")  # Markdown escapes
        assert snapshot(ui) == before

    def test_revoking_twice_is_refused_and_appends_nothing(self, ui: UI) -> None:
        key = session(ui)
        ui.revoke(key, "0")
        before = snapshot(ui)
        with pytest.warns(UserWarning, match="already revoked"):  # the toast
            assert "already revoked" in refused(ui.revoke(key, "0"), "revoked")
        assert snapshot(ui) == before

    def test_a_control_record_cannot_be_revoked(self, ui: UI) -> None:
        key = session(ui)
        ui.revoke(key, "0")
        with pytest.warns(UserWarning, match="control record"):
            assert "control record" in refused(ui.revoke(key, "2"), "revoked")


class TestLabels:
    def test_search_leaves_a_revoked_memory_out_unless_asked_and_then_labels_it(self, ui: UI) -> None:
        key = session(ui)
        ui.revoke(key, "0")
        _status, plain, _why = ui.search("bicycle", 8, key)
        assert [row[2] for row in plain["data"]] == [1]
        _status, shown, _why = ui.search("bicycle", 8, key, True)
        rows = {row[2]: row[4] for row in shown["data"]}
        assert set(rows) == {0, 1}
        assert rows[0].startswith("⛔ revoked (control event seq 2") and MEMORY in rows[0]
        assert "revoked" not in rows[1]

    def test_search_never_returns_a_control_record(self, ui: UI) -> None:
        key = session(ui)
        ui.revoke(key, "0")
        _status, shown, _why = ui.search("control record revoke", 8, key, True)
        assert 2 not in [row[2] for row in shown["data"]]

    def test_the_ledger_view_labels_a_revoked_memory_until_it_is_restored(self, ui: UI) -> None:
        key = session(ui)
        ui.revoke(key, "0")
        _status, events, _cp = ui.ledger(key)
        text = {row[0]: row[3] for row in events["data"]}
        assert text[0].startswith("⛔ revoked") and not text[1].startswith("⛔")
        ui.restore(key, "0")
        _status, events, _cp = ui.ledger(key)
        assert not any(row[3].startswith("⛔") for row in events["data"])

    def test_search_again_after_a_control_skips_when_no_query_was_typed(self, ui: UI) -> None:
        key = session(ui)
        assert all(isinstance(x, type(gr.skip())) for x in ui.search_again("", 8, key, False))

    def test_the_sentence_beside_the_buttons_says_revoke_is_not_erasure(self, ui: UI) -> None:
        assert rc.NOT_ERASURE == (
            "Forget destroys the words; Revoke keeps them on record, unused by answers until you restore them."
        )
        import app

        demo = app.build(ui.service)
        notes = sorted(b.elem_id for b in demo.blocks.values() if isinstance(b, gr.Markdown) and b.value == rc.NOTE)
        # the chat's turn tools, Manual search, Ledger: beside each set of Forget / Revoke / Restore buttons
        assert notes == [f"{ids.NOT_ERASURE_NOTE}-{w}" for w in ("ledger", "search", "turn")]


class TestReason:
    """The optional reason beside Revoke / Restore: on the record, under the reason rule (control.plan.quoted)."""

    def test_a_revoke_and_a_restore_with_a_reason_record_it_and_the_status_line_shows_it(self, ui: UI) -> None:
        key = session(ui)
        status = done(ui.revoke(key, "0", "  not relevant any more  "))
        assert "Reason: not relevant any more." in status
        restored = done(ui.restore(key, "0", "changed my mind"))
        assert "Reason: changed my mind." in restored
        led = ui.service.engine.ledger
        reasons = [ev.meta["control"]["reason"] for ev in led.read_events(session_id(key), [2, 3])]
        assert reasons == ["not relevant any more", "changed my mind"]

    def test_an_empty_reason_is_no_reason(self, ui: UI) -> None:
        key = session(ui)
        assert "Reason" not in done(ui.revoke(key, "0", "   "))
        assert ui.service.engine.ledger.read_events(session_id(key), [2])[0].meta["control"]["reason"] is None

    @pytest.mark.parametrize(("action", "reason"), [("revoke", "about my Gazelle"), ("restore", "the green bike is fine")])
    def test_a_reason_repeating_the_memorys_words_is_refused_and_nothing_is_appended(self, ui: UI, action: str, reason: str) -> None:
        key = session(ui)
        if action == "restore":
            ui.revoke(key, "0")
        before = snapshot(ui)
        with pytest.warns(UserWarning, match="reason: repeats a word"):
            out = getattr(ui, action)(key, "0", reason)
        status = refused(out, "revoked" if action == "revoke" else "restored")
        assert "reason: repeats a word of the event at seq 0" in status
        assert not any(word in status for word in reason.split() if len(word) > 3)  # the status does not repeat it
        assert snapshot(ui) == before

    def test_the_app_passes_each_tabs_reason_box_to_revoke_and_restore(self, ui: UI) -> None:
        import app
        from webui import ids

        demo = app.build(ui.service)
        for where in ("turn", "search", "ledger"):
            for action in ("revoke", "restore"):
                fn = next(f for f in demo.fns.values() if f.api_name == f"{action}_{where}")
                assert [c.elem_id for c in fn.inputs][-1] == f"{ids.CONTROL_REASON}-{where}"
        titles = [b.label for b in demo.blocks.values() if isinstance(b, gr.Accordion)]
        assert "A memory of this answer: forget, revoke or restore it; correct it" in titles  # issue 31: split from
        assert "Share this receipt with memories withheld" in titles  # the withheld copy, each tool on its own


class TestRefreshes:
    """After Revoke, Restore or Correct this, the ledger and the search are refreshed (their labels changed) — only
    after a real change: a refusal is no longer raised (so Gradio would run every `.then`), and it changed nothing."""

    @pytest.mark.parametrize("action", ["revoke", "restore", "correct"])
    @pytest.mark.parametrize("where", ["turn", "search", "ledger"])
    def test_the_ledger_and_the_search_are_refreshed_only_after_a_real_change(
        self, ui: UI, action: str, where: str
    ) -> None:
        import app

        demo = app.build(ui.service)
        fns = {f.api_name: f for f in demo.fns.values()}
        key = session(ui)
        main = fns[f"{action}_{where}"]
        changed = main.outputs[-1]  # the control's "changed something" State
        assert isinstance(changed, gr.State)
        args = {"ledger": [key], "search": ["bicycle", 8, key, False, False, False]}
        for step in ("ledger", "search"):
            follow = fns[f"{action}_{where}_{step}"]
            assert follow.inputs[0] is changed, f"{follow.api_name} does not read whether {action} changed anything"
            skipped = follow.fn(False, *args[step])
            assert skipped == tuple(gr.skip() for _ in follow.outputs), (follow.api_name, skipped)
            ran = follow.fn(True, *args[step])
            assert len(ran) == len(follow.outputs) and ran != skipped, follow.api_name
