"""The checkpoint the visitor's browser keeps (issue 17 §6), without a server: the state, the service, the renderers.

The browser keeps the latest signed checkpoint it was shown; on each load and
turn the app proves today's history extends it. An operator who rewrites an
old event and recomputes everything after it, or drops the last events, and
re-signs with the app's own key, passes `ledger verify` — and must raise the
warning here. Whatever the browser sends back is visitor input: garbage is a
note, never an error and never a warning.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import gradio as gr
import pytest

from chat.engine import Engine
from chat.llm import LLM
from receipts import checkpoints as C
from receipts.body import sign_checkpoint
from receipts.keys import SigningKey
from storage import offline
from storage.files.ledger.store import Ledger
from storage.files.receipts import checkpoint_files as C_files
from webui import history as H
from webui import kept as kp
from webui import render_history as rh
from webui.handlers import UI
from webui.service import Service
from webui.sessions import new_session_key, session_id

from ..history_support import edit_in_place, rewrite_and_recompute, truncate


@pytest.fixture(autouse=True)
def _no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RECEIPT_SIGNING_KEY", raising=False)


@pytest.fixture
def service(tmp_path: Path) -> Service:
    return Service(Engine(tmp_path / "data", llm=LLM(api_key="")))


def text(cp: dict[str, Any]) -> str:
    return C.checkpoint_file_bytes(cp).decode("utf-8")


def seen(service: Service, key: str, *messages: str) -> dict[str, Any]:
    """The visitor takes these turns and the page checks its history: returns the checkpoint the browser keeps."""
    for m in messages:
        service.turn(key, m, 8)
    check = service.history_check(key, None)
    assert check.outcome == H.FIRST and check.keep is not None, check.to_dict()
    return check.keep


# -- the state in the browser (pure) ---------------------------------------------------
class TestKeptState:
    CP = '{"body":{},"key_id":"k","sig":"s"}'

    def test_a_stored_checkpoint_is_read_back_for_its_session_only(self, service: Service) -> None:
        key = new_session_key()
        cp = seen(service, key, "My cat is called Miso")
        state = kp.stored(None, session_id(key), cp)
        json.dumps(state)  # what the browser stores is plain JSON
        assert kp.kept_for(state, session_id(key)) == kp.Kept(text(cp).rstrip("\n"))
        assert kp.kept_for(state, session_id(new_session_key())) == kp.Kept(None)
        assert C.parse_checkpoint(kp.kept_for(state, session_id(key)).text.encode()) == cp  # type: ignore[union-attr]

    def test_the_state_keeps_the_most_recent_sessions_only_and_replaces_a_sessions_entry(self) -> None:
        state: object = None
        sessions = [f"s{i:02d}" for i in range(kp.KEEP + 3)]
        cps = {s: {"body": {"session": s, "n": 1}, "key_id": "k", "sig": "x"} for s in sessions}
        for s in sessions:
            state = kp.stored(state, s, cps[s])
        assert [sid for sid, _t in state["kept"]] == sessions[-kp.KEEP :]  # type: ignore[index]
        state = kp.stored(state, sessions[-kp.KEEP], {"body": {"n": 2}, "key_id": "k", "sig": "y"})
        kept = state["kept"]
        assert len(kept) == kp.KEEP and kept[-1][0] == sessions[-kp.KEEP] and '"n":2' in kept[-1][1]
        assert [sid for sid, _t in kept].count(sessions[-kp.KEEP]) == 1

    @pytest.mark.parametrize(
        "state",
        [
            "garbage",
            5,
            [],
            {"v": 2, "kept": []},
            {"v": 1},
            {"v": 1, "kept": "x", "extra": 1},
            {"v": 1, "kept": {"s": CP}},
            {"v": 1, "kept": [["s", CP, "third"]]},
            {"v": 1, "kept": [["not a session id!", CP]]},
            {"v": 1, "kept": [["s", 12]]},
            {"v": 1, "kept": [["s", "x" * (kp.MAX_ENTRY_CHARS + 1)]]},
            {"v": 1, "kept": [["t", CP]] * 10_000},
        ],
        ids=repr,
    )
    def test_any_malformed_state_is_ignored_with_a_note_never_an_error(self, state: object) -> None:
        kept = kp.kept_for(state, "s")
        assert kept.text is None and kept.note and "ignored" in kept.note
        fresh = kp.stored(state, "s", {"body": {}, "key_id": "k", "sig": "x"})
        assert len(fresh["kept"]) <= kp.KEEP and fresh["kept"][-1][0] == "s"
        assert kp.kept_for(fresh, "s").note is None  # what is written back reads cleanly

    def test_nothing_stored_yet_is_not_a_problem(self) -> None:
        assert kp.kept_for(None, "s") == kp.Kept(None, None)


# -- the service: honest growth ---------------------------------------------------------------
class TestHonestHistory:
    @pytest.mark.parametrize("failure", [PermissionError(13, "Permission denied", "/srv/x"), OSError("disk gone")])
    def test_a_check_that_cannot_run_says_so_without_an_internal_class(
        self, service: Service, monkeypatch: pytest.MonkeyPatch, failure: Exception
    ) -> None:
        key = new_session_key()
        kept = seen(service, key, "I adopted a grey cat")

        def fails(*_a: object, **_k: object) -> None:
            raise failure

        monkeypatch.setattr(offline, "prove_since", fails)  # where webui.service finds it
        check = service.history_check(key, text(kept))
        assert check.outcome == H.UNCHECKED
        assert check.message == "the history could not be checked just now; the details are in the server log"

    def test_a_session_without_events_has_nothing_to_check(self, service: Service) -> None:
        check = service.history_check(new_session_key(), None)
        assert check.outcome == H.EMPTY and not check.warning and check.keep is None

    def test_the_first_look_keeps_the_current_checkpoint_after_checking_it(self, service: Service) -> None:
        key = new_session_key()
        cp = seen(service, key, "My cat is called Miso")
        assert cp == C_files.latest(service.data_dir, session_id(key)) and cp["body"]["tree_size"] == 2

    def test_each_turn_and_each_remember_extends_the_kept_checkpoint(self, service: Service) -> None:
        key = new_session_key()
        kept = seen(service, key, "My cat is called Miso")
        for step in ("turn", "remember", "turn"):
            if step == "turn":
                service.turn(key, "What is my cat called?", 8)
            else:
                service.remember(key, "I live in Lisbon")
            check = service.history_check(key, text(kept))
            assert check.outcome == H.EXTENDS and not check.warning, check.to_dict()
            assert check.report is not None and check.report.verdict == "verified"
            assert check.keep == C_files.latest(service.data_dir, session_id(key))
            assert check.keep is not None and check.keep["body"]["tree_size"] > kept["body"]["tree_size"]
            kept = check.keep
        # seen again with nothing new: still extends (m → m)
        again = service.history_check(key, text(kept))
        assert again.outcome == H.EXTENDS and again.keep == kept


# -- the service: the operator's attacks ---------------------------------------------------------
class TestChangedHistory:
    def test_rewrite_and_recompute_after_a_kept_checkpoint_is_a_warning(self, service: Service) -> None:
        key = new_session_key()
        kept = seen(service, key, "My cat is called Miso", "What is my cat called?")
        session = session_id(key)
        resigned = rewrite_and_recompute(service.data_dir, session, 0, "My cat is called Rex!", service.engine.key)
        assert Ledger(service.data_dir).verify(session).ok  # the ledger alone cannot tell
        check = service.history_check(key, text(kept))
        assert check.outcome == H.CHANGED and check.warning
        assert check.message.startswith("this history changed since you last saw it")
        assert check.kept == kept and check.current == resigned and check.keep is None  # the evidence stays

    def test_truncation_after_a_kept_checkpoint_is_a_warning(self, service: Service) -> None:
        key = new_session_key()
        kept = seen(service, key, "My cat is called Miso", "What is my cat called?")
        resigned = truncate(service.data_dir, session_id(key), 2, service.engine.key)
        check = service.history_check(key, text(kept))
        assert check.outcome == H.CHANGED and check.keep is None
        assert "fewer than the 4" in check.message and check.current == resigned

    def test_a_deleted_session_is_a_warning(self, service: Service) -> None:
        key = new_session_key()
        kept = seen(service, key, "My cat is called Miso")
        assert service.engine.forget(session_id(key))
        check = service.history_check(key, text(kept))
        assert check.outcome == H.CHANGED and check.current is None

    def test_an_in_place_edit_after_a_kept_checkpoint_is_a_warning(self, service: Service) -> None:
        key = new_session_key()
        kept = seen(service, key, "My cat is called Miso", "What is my cat called?")
        edit_in_place(service.data_dir, session_id(key), 0, b"Miso", b"Mimi")
        check = service.history_check(key, text(kept))
        assert check.outcome == H.CHANGED and check.warning, check.to_dict()
        assert check.message.startswith("this history changed since you last saw it: chain broken at line 1")

    def test_a_current_checkpoint_that_does_not_match_the_ledger_is_never_kept(self, service: Service) -> None:
        key = new_session_key()
        session = session_id(key)
        service.turn(key, "My cat is called Miso", 8)
        good = C_files.latest(service.data_dir, session)
        assert good is not None
        b = good["body"]
        forged = sign_checkpoint(
            session=session,
            tree_size=b["tree_size"],
            root=bytes(32),
            chain_head=b["chain_head"],
            issued_at=b["issued_at"],
            key=service.engine.key,
        )
        C_files.keep(service.data_dir, session, forged)
        check = service.history_check(key, None)
        assert check.outcome == H.UNSOUND and check.warning and check.keep is None

    def test_a_checkpoint_kept_from_another_signing_key_is_a_warning(self, service: Service) -> None:
        key = new_session_key()
        cp = seen(service, key, "My cat is called Miso")
        b = cp["body"]
        other = SigningKey.generate()
        foreign = sign_checkpoint(
            session=b["session"],
            tree_size=b["tree_size"],
            root=bytes.fromhex(b["root"]),
            chain_head=b["chain_head"],
            issued_at=b["issued_at"],
            key=other,
        )
        check = service.history_check(key, text(foreign))
        assert check.outcome == H.KEY_CHANGED and check.warning and other.key_id in check.message
        assert check.kept == foreign and check.current == cp and check.keep is None


# -- the service: whatever the browser sends back -------------------------------------------------
def kept_mutations(cp: dict[str, Any], other_session_cp: dict[str, Any]) -> dict[str, object]:
    """Named, generated corruptions of a kept checkpoint's text: each must be ignored with a note."""
    t = text(cp)
    b = cp["body"]
    sig = bytearray(base64.b64decode(cp["sig"]))
    sig[0] ^= 1

    def with_body(**changes: object) -> str:
        return json.dumps({**cp, "body": {**b, **changes}})

    return {
        "empty": "",
        "not-json": "{",
        "null": "null",
        "a-list": "[]",
        "a-number": 5,
        "a-dict-not-text": cp,
        "trailing-garbage": t + "x",
        "duplicate-key": t.replace('"tree_size":', f'"tree_size":{b["tree_size"] + 1},"tree_size":', 1),
        "float-size": t.replace(f'"tree_size":{b["tree_size"]}', f'"tree_size":{b["tree_size"]}.0', 1),
        "non-finite": t.replace(f'"tree_size":{b["tree_size"]}', '"tree_size":1e400', 1),
        "long-integer": t.replace(f'"tree_size":{b["tree_size"]}', '"tree_size":' + "9" * 5000, 1),
        "lone-surrogate": with_body(issued_at="\ud800"),
        "size-zero": with_body(tree_size=0),
        "version-2": with_body(v=2),
        "extra-field": with_body(extra=1),
        "missing-sig": json.dumps({"body": b, "key_id": cp["key_id"]}),
        "sig-not-base64": json.dumps({**cp, "sig": "!!!"}),
        "sig-flipped": json.dumps({**cp, "sig": base64.b64encode(bytes(sig)).decode()}),
        "root-changed": with_body(root="0" * 64),  # the signature no longer covers it
        "another-session": text(other_session_cp),
        "deep-nesting": "[" * 5000 + "]" * 5000,
        "oversize": t + " " * (C.MAX_CHECKPOINT_BYTES + 1),
    }


def test_every_malformed_or_forged_kept_checkpoint_is_ignored_with_a_note(service: Service) -> None:
    key, other = new_session_key(), new_session_key()
    cp = seen(service, key, "My cat is called Miso")
    other_cp = seen(service, other, "I live in Lisbon")
    slipped = {}
    for name, value in kept_mutations(cp, other_cp).items():
        try:
            check = service.history_check(key, value)
        except Exception as exc:  # noqa: BLE001 - collected: every mutation must be handled
            slipped[name] = f"raised {type(exc).__name__}: {exc}"[:200]
            continue
        if check.outcome != H.FIRST or check.warning or not check.note or check.keep != cp:
            slipped[name] = f"{check.outcome}, note={check.note!r}"
    assert slipped == {}, f"mutations not ignored with a note: {slipped}"


# -- the renderers (pure) -------------------------------------------------------------------------
class TestRender:
    def test_the_warning_says_the_plain_words_the_reason_and_both_checkpoints(self, service: Service) -> None:
        key = new_session_key()
        kept = seen(service, key, "My cat is called Miso", "What is my cat called?")
        truncate(service.data_dir, session_id(key), 2, service.engine.key)
        out = rh.warning_markdown(service.history_check(key, text(kept)))
        assert out.startswith("## ⚠️ This history changed since you last saw it")
        assert "fewer than the 4" in out and "4 events" in out and "2 events" in out
        assert kept["body"]["root"][:12] in out and "--since" in out

    def test_no_warning_and_no_note_shows_nothing(self) -> None:
        assert rh.warning_markdown(H.HistoryCheck("s", H.EXTENDS, "history extends it")) == ""

    def test_a_note_alone_is_shown_escaped(self) -> None:
        out = rh.warning_markdown(H.HistoryCheck("s", H.FIRST, "ok", note="[click](http://evil) <b>x</b>"))
        assert "This history changed" not in out and "](http" not in out and "<b>" not in out

    def test_the_message_cannot_inject_markup(self) -> None:
        out = rh.warning_markdown(H.HistoryCheck("s", H.CHANGED, "![img](http://evil/x.png) <script>"))
        assert "![" not in out and "<script>" not in out

    def test_a_check_has_no_truth_value(self) -> None:
        with pytest.raises(TypeError):
            bool(H.HistoryCheck("s", H.EMPTY, ""))


# -- the handlers (outputs, downloads, what the browser keeps) ----------------------------------
def download_bytes(button: Any) -> bytes:
    value = button.value
    return Path(value["path"] if isinstance(value, dict) else value).read_bytes()


class TestHandlers:
    def test_a_warning_offers_both_checkpoints_and_leaves_the_kept_one_in_place(self, service: Service) -> None:
        ui = UI(service)
        key = ui.start(None)[0]
        list(ui.chat("My cat is called Miso", [], 8, key))
        state = ui.check_history(key, None)[0]
        kept = C.parse_checkpoint(kp.kept_for(state, session_id(key)).text.encode())  # type: ignore[union-attr]
        resigned = rewrite_and_recompute(
            service.data_dir, session_id(key), 0, "My dog is called Rex", service.engine.key
        )
        new_state, box, md, kept_dl, current_dl, accept, status = ui.check_history(key, state)
        assert new_state is gr.skip() or new_state == gr.skip()  # the evidence is not overwritten
        assert box.visible and "This history changed since you last saw it" in md and "⚠️" in status
        assert kept_dl.visible and current_dl.visible and accept.visible
        assert download_bytes(kept_dl) == C.checkpoint_file_bytes(kept)
        assert download_bytes(current_dl) == C.checkpoint_file_bytes(resigned)
        # Accepting keeps the current checkpoint (checked against the ledger first); the warning is gone.
        accepted, box, md, kept_dl, *_rest = ui.accept_history(key, state)
        assert kp.kept_for(accepted, session_id(key)).text == text(resigned).rstrip("\n")
        assert not box.visible and md == "" and not kept_dl.visible
        assert ui.check_history(key, accepted)[2] == ""

    def test_an_honest_turn_shows_no_warning_and_moves_the_kept_checkpoint_on(self, service: Service) -> None:
        ui = UI(service)
        key = ui.start(None)[0]
        list(ui.chat("My cat is called Miso", [], 8, key))
        state = ui.check_history(key, None)[0]
        list(ui.chat("What is my cat called?", [], 8, key))
        new_state, box, md, kept_dl, current_dl, accept, status = ui.check_history(key, state)
        assert not box.visible and md == "" and not (kept_dl.visible or current_dl.visible or accept.visible)
        assert '"tree_size":4' in kp.kept_for(new_state, session_id(key)).text  # type: ignore[operator]
        assert "history extends the checkpoint you kept (2 → 4 events)" in status.replace("\\", "")

    def test_a_garbage_state_shows_a_note_and_is_replaced(self, service: Service) -> None:
        ui = UI(service)
        key = ui.start(None)[0]
        list(ui.chat("My cat is called Miso", [], 8, key))
        new_state, box, md, *_rest = ui.check_history(key, {"v": 1, "kept": [[session_id(key), "{nope"]]})
        assert box.visible and "ignored" in md and "This history changed" not in md
        assert kp.kept_for(new_state, session_id(key)).note is None
        assert ui.check_history(key, new_state)[2] == ""  # the note is not shown again


# -- the ledger tab ---------------------------------------------------------------------------------
def test_the_ledger_tab_shows_the_checkpoint_signed_after_the_last_append(service: Service) -> None:
    """It used to show the newest receipt's checkpoint: events appended by remember were under none shown."""
    ui = UI(service)
    key = new_session_key()
    service.turn(key, "My cat is called Miso", 8)
    service.remember(key, "I live in Lisbon")
    _status, _table, shown = ui.ledger(key)
    latest = C_files.latest(service.data_dir, session_id(key))
    assert latest is not None and latest["body"]["tree_size"] == 3
    assert json.loads(shown) == latest
