"""Ask me first in the app, handler by handler (no server): with the setting on, a message is proposed (nothing
appended), the memories are shown all ticked; Send answers with the ticked ones only and the receipt lists the
unticked as withheld; Cancel sends nothing, appends nothing and shows no answer; refusals are toasts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import gradio as gr
import pytest

from chat.engine import Engine
from chat.llm import LLM
from receipts.body import parse_receipt
from storage.files.receipts.api import verify_bytes
from webui import controls as ct
from webui import render_controls as rc
from webui.handlers import UI
from webui.service import Service
from webui.sessions import new_session_key, session_id

MEMORIES = (
    "my dog Pip likes carrots",
    "my dog Pip hates the vacuum",
    "my dog Pip was born in May",
    "my dog Pip snores",
)
QUESTION = "Tell me about my dog Pip"


@pytest.fixture
def ui(tmp_path: Path) -> UI:
    return UI(Service(Engine(tmp_path / "data", llm=LLM(api_key=""))))


def session(ui: UI) -> str:
    key = new_session_key()
    for text in MEMORIES:
        ui.service.remember(key, text)
    return key


def count(ui: UI, key: str) -> int:
    return ui.service.engine.ledger.head(session_id(key))[0]


def receipts(ui: UI, key: str) -> list[Path]:
    folder = ui.service.data_dir / "sessions" / session_id(key) / "receipts"
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def propose(ui: UI, key: str, waiting: object = None) -> tuple[Any, ...]:
    return ui.propose(QUESTION, [], 8, key, True, waiting)


def download_path(button: Any) -> str:
    value = button.value
    return value["path"] if isinstance(value, dict) else value


class TestPropose:
    def test_with_the_setting_on_a_message_is_proposed_all_ticked_and_nothing_is_appended(self, ui: UI) -> None:
        key = session(ui)
        before = count(ui, key)
        history, box, waiting, panel, text, pick = propose(ui, key)
        assert count(ui, key) == before and receipts(ui, key) == []
        assert isinstance(waiting, ct.Waiting) and waiting.message == QUESTION and box == ""
        assert panel.visible is True and "4 memories would reach the model" in text
        assert len(pick.choices) == 4 and pick.value == [value for _label, value in pick.choices]
        label = pick.choices[0][0]
        assert label.startswith("#1 · seq ") and "score" in label and "my dog Pip" in label
        assert history[-1]["metadata"]["title"] == rc.WAITING_TITLE

    def test_with_the_setting_off_propose_does_nothing_and_chat_answers(self, ui: UI) -> None:
        key = session(ui)
        assert all(isinstance(x, type(gr.skip())) for x in ui.propose(QUESTION, [], 8, key, False))
        final = list(ui.chat(QUESTION, [], 8, key, False))[-1]
        assert "my dog Pip" in final[2] and count(ui, key) == len(MEMORIES) + 2

    def test_with_the_setting_on_chat_changes_nothing(self, ui: UI) -> None:
        key = session(ui)
        out = list(ui.chat(QUESTION, [], 8, key, True))
        assert len(out) == 1 and all(isinstance(x, type(gr.skip())) for x in out[0])
        assert count(ui, key) == len(MEMORIES)

    def test_the_setting_is_stated_plainly(self, ui: UI) -> None:
        assert "**off**" in ui.consent_note(False) and "**on**" in ui.consent_note(True)


class TestSend:
    def test_send_answers_with_the_ticked_memories_and_the_receipt_lists_the_unticked_as_withheld(self, ui: UI) -> None:
        key = session(ui)
        _h, _b, waiting, _p, _t, pick = propose(ui, key)
        ids = [value for _label, value in pick.choices]
        kept, dropped = ids[:2], ids[2:]
        history, stamps, download, after, panel = list(ui.consent_send(key, waiting, kept, _h))[-1]
        assert after is None and panel.visible is False
        raw = Path(download_path(download)).read_bytes()
        body = parse_receipt(raw).body
        seq_of = {ev.id: ev.seq for ev in ui.service.engine.ledger.events(session_id(key))}
        assert [m["event"]["id"] for m in body["memories"]] == kept
        assert body["consent"]["withheld"] == [seq_of[i] for i in dropped]
        report = verify_bytes(raw, trusted=[ui.service.engine.key.public_key], data_dir=ui.service.data_dir)
        assert report.verdict == "verified"
        assert f"withheld from the model: seq {seq_of[dropped[0]]}, seq {seq_of[dropped[1]]}" in stamps
        assert history[-2]["role"] == "assistant" and not history[-2].get("metadata")  # the answer, then stamps
        assert all((m.get("metadata") or {}).get("title") != rc.WAITING_TITLE for m in history)

    def test_a_spent_token_is_a_toast_and_nothing_is_appended(self, ui: UI) -> None:
        key = session(ui)
        h, _b, waiting, _p, _t, _pick = propose(ui, key)
        list(ui.consent_send(key, waiting, [], h))
        before = count(ui, key)
        with pytest.raises(gr.Error, match="already used"):
            list(ui.consent_send(key, waiting, [], h))
        assert count(ui, key) == before

    def test_an_id_that_was_not_proposed_is_a_toast_and_the_proposal_stays_open(self, ui: UI) -> None:
        key = session(ui)
        h, _b, waiting, _p, _t, _pick = propose(ui, key)
        before = count(ui, key)
        outs = []
        with pytest.raises(gr.Error, match="was not proposed"):
            for out in ui.consent_send(key, waiting, ["evt_" + "0" * 32], h):
                outs.append(out)
        assert count(ui, key) == before
        assert outs[-1][0][-1]["metadata"]["title"] == rc.WAITING_TITLE
        assert isinstance(outs[-1][3], type(gr.skip()))  # the token is still there: the person may try again
        list(ui.consent_send(key, waiting, [], h))  # and it still answers
        assert count(ui, key) == before + 2

    def test_another_sessions_key_cannot_send_the_proposal(self, ui: UI) -> None:
        key = session(ui)
        h, _b, waiting, _p, _t, _pick = propose(ui, key)
        with pytest.raises(gr.Error, match="another session"):
            list(ui.consent_send(new_session_key(), waiting, [], h))
        assert count(ui, key) == len(MEMORIES)

    def test_nothing_waiting_is_a_toast(self, ui: UI) -> None:
        with pytest.raises(gr.Error, match="nothing to send"):
            list(ui.consent_send(new_session_key(), None, [], []))


class TestHowEachMatched:
    """The tick boxes show the relative score (never a raw one) and say when a memory matched only through its
    neighbours' words; the stamps of the answer sent with them say it too."""

    LISBON = ("we talked about trains", "I moved to Lisbon last year", "the weather was fine", "tea", "work")

    def lisbon(self, ui: UI) -> tuple[str, tuple[Any, ...]]:
        key = new_session_key()
        for text in self.LISBON:
            ui.service.remember(key, text)
        return key, ui.propose("Lisbon?", [], 8, key, True)

    def test_tick_boxes_show_the_share_of_the_best_score_and_label_context_only_matches(self, ui: UI) -> None:
        _key, (_h, _b, _w, _p, _t, pick) = self.lisbon(ui)
        labels = [label for label, _v in pick.choices]
        assert labels[0].startswith("#1 · seq 1 · user") and " · score 1.00 · I moved to Lisbon" in labels[0]
        assert len(labels) == 4 and all("[matched via neighbouring turns] " in label for label in labels[1:])
        assert all(re.search(r" · score (1\.00|0\.\d\d) · ", label) for label in labels)  # never 9.3e-07

    def test_the_stamps_of_the_answer_sent_say_which_matched_through_their_neighbours(self, ui: UI) -> None:
        key, (h, _b, waiting, _p, _t, pick) = self.lisbon(ui)
        approved = [v for _l, v in pick.choices]
        history, stamps, _download, _after, _panel = list(ui.consent_send(key, waiting, approved, h))[-1]
        rows = [line for line in stamps.splitlines() if line.startswith("| ") and "`" in line]
        assert len(rows) == 4 and sum("matched via neighbouring turns" in row for row in rows) == 3
        assert "matched via neighbouring turns" not in next(row for row in rows if "Lisbon" in row)
        assert history[-1]["content"] == stamps  # the stamps under the answer, the same


class TestCancel:
    def test_cancel_sends_nothing_appends_nothing_and_shows_no_answer(self, ui: UI) -> None:
        key = session(ui)
        h, _b, waiting, _p, _t, _pick = propose(ui, key)
        before = count(ui, key)
        history, box, after, panel, _text, pick = ui.consent_cancel(key, waiting, h)
        assert count(ui, key) == before and receipts(ui, key) == []
        assert box == QUESTION and after is None and panel.visible is False and pick.choices == []
        assert [m for m in history if m["role"] == "assistant" and not m.get("metadata")] == []
        assert history[-1]["metadata"]["title"] == rc.CANCELLED_TITLE
        assert all(m["role"] != "user" for m in history)  # the question was never stored: it leaves the chat
        with pytest.raises(gr.Error, match="cancelled"):
            list(ui.consent_send(key, waiting, [], h))

    def test_a_new_message_replaces_the_waiting_proposal_and_spends_its_token(self, ui: UI) -> None:
        key = session(ui)
        _h, _b, first, _p, _t, _pick = propose(ui, key)
        _h2, _b2, second, _p2, _t2, _pick2 = propose(ui, key, first)
        assert second.token != first.token
        with pytest.raises(gr.Error, match="cancelled"):
            list(ui.consent_send(key, first, [], []))
        assert json.dumps(count(ui, key)) == str(len(MEMORIES))


class TestTheSettingIsTheSessions:
    """Kept on the server (control.settings), not in the page: a reload or another device finds it as it was."""

    def test_set_on_a_reload_finds_it_on(self, ui: UI) -> None:
        key = session(ui)
        on, note = ui.change_consent(key, True)
        assert on is True and "is **on** for this session" in note
        reloaded = UI(ui.service)  # a new page (or another device) over the same server, same session key
        on, note = reloaded.load_consent(key)
        assert on is True and "is **on** for this session" in note

    def test_a_new_server_over_the_same_data_finds_it_on(self, ui: UI) -> None:
        key = session(ui)
        ui.change_consent(key, True)
        restarted = UI(Service(Engine(ui.service.data_dir, llm=LLM(api_key=""))))
        assert restarted.load_consent(key)[0] is True

    def test_another_session_is_off(self, ui: UI) -> None:
        key, other = session(ui), session(ui)
        ui.change_consent(key, True)
        on, note = ui.load_consent(other)
        assert on is False and "is **off** for this session" in note
        assert ui.load_consent(new_session_key())[0] is False  # a new session: off by default

    def test_it_can_be_turned_on_before_the_first_message(self, ui: UI) -> None:
        key = new_session_key()
        assert ui.change_consent(key, True)[0] is True
        assert UI(ui.service).load_consent(key)[0] is True
        assert not ui.service.engine.ledger.exists(session_id(key))  # no event was appended for it

    def test_off_again_is_kept_off(self, ui: UI) -> None:
        key = session(ui)
        ui.change_consent(key, True)
        ui.change_consent(key, False)
        assert UI(ui.service).load_consent(key)[0] is False

    def test_a_page_that_shows_it_off_still_proposes_when_the_session_has_it_on(self, ui: UI) -> None:
        key = session(ui)
        ui.change_consent(key, True)  # e.g. on another device; this page's checkbox was drawn before
        out = list(ui.chat(QUESTION, [], 8, key, False))
        assert all(isinstance(x, type(gr.skip())) for x in out[0]) and count(ui, key) == len(MEMORIES)
        _h, _b, waiting, panel, _t, _pick = ui.propose(QUESTION, [], 8, key, False)
        assert isinstance(waiting, ct.Waiting) and panel.visible is True
        assert count(ui, key) == len(MEMORIES)

    def test_a_corrupt_setting_shows_on_with_the_file_named_and_proposes(self, ui: UI) -> None:
        key = session(ui)
        ui.change_consent(key, False)
        path = ui.service.data_dir / "sessions" / session_id(key) / "settings.json"
        path.write_bytes(b"{broken")
        on, note = ui.load_consent(key)
        assert on is True and "could not be read" in note and "not valid JSON" in note
        assert f"sessions/{session_id(key)}/settings\\.json" in note  # named (Markdown-escaped)
        assert str(ui.service.data_dir) not in note  # the server's own path is not shown
        assert all(isinstance(x, type(gr.skip())) for x in list(ui.chat(QUESTION, [], 8, key, False))[0])
        assert isinstance(ui.propose(QUESTION, [], 8, key, False)[2], ct.Waiting)

    def test_a_bad_session_key_is_a_toast(self, ui: UI) -> None:
        with pytest.raises(gr.Error):
            ui.change_consent("not a key", True)
        with pytest.raises(gr.Error):
            ui.load_consent("not a key")
