"""The Gradio handlers called directly (no server): outputs, refusals, nothing written on bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gradio as gr
import pytest

from chat.engine import Engine, TurnError
from chat.llm import LLM
from receipts.body import MAX_RECEIPT_BYTES
from webui import render as r
from webui import render_receipt as rr
from webui.handlers import UI
from webui.inputs import MAX_MESSAGE_CHARS
from webui.service import Service
from webui.sessions import new_session_key, session_id
from webui.text import short

from ..quoting_model import quoting_engine


def offline_engine(path: Path) -> Engine:
    """An engine whose model is the offline stand-in, whatever the environment says (tests never touch the network)."""
    return Engine(path, llm=LLM(api_key=""))


@pytest.fixture
def ui(tmp_path: Path) -> UI:
    return UI(Service(offline_engine(tmp_path / "data")))


def chat(ui: UI, key: str, message: str, history: list[Any] | None = None, k: object = 8) -> list[tuple[Any, ...]]:
    return list(ui.chat(message, history or [], k, key))


def download_path(button: Any) -> str:
    value = button.value
    return value["path"] if isinstance(value, dict) else value


def files_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []


class TestSession:
    def test_a_first_visit_gets_a_fresh_key_and_an_empty_chat(self, ui: UI) -> None:
        key, shown, note, history, stamps, _download = ui.start(None)
        assert shown == key and session_id(key) in note and key not in note
        assert history == [] and stamps == r.NO_STAMPS

    def test_a_reload_resumes_the_session_with_its_stamps(self, tmp_path: Path) -> None:
        ui = UI(Service(quoting_engine(tmp_path / "data")))  # a model's replies may be memories; the stand-in's never
        key = ui.start(None)[0]
        chat(ui, key, "I moved to Lisbon")
        final = chat(ui, key, "Where did I move?")[-1]
        again, _shown, _note, history, stamps, download = ui.start(key)
        assert again == key
        assert [m["role"] for m in history] == ["user", "assistant", "assistant"] * 2
        live = final[2]
        assert r.md_label(r.match_label("context only")) in live  # the model's first reply, matched through its neighbours
        for how in ("echo", "context only"):
            live = live.replace(r.md_label(r.match_label(how)), "")
        assert stamps == live  # the same stamps without the match labels: the receipt does not sign them
        assert download.interactive and Path(download_path(download)).name.startswith("rcpt_")

    def test_new_session_is_a_different_empty_session(self, ui: UI) -> None:
        key = ui.start(None)[0]
        chat(ui, key, "hello")
        fresh = ui.new_session()
        assert fresh[0] != key and fresh[3] == []

    def test_a_pasted_key_opens_that_session_and_a_bad_one_is_refused(self, ui: UI) -> None:
        key = ui.start(None)[0]
        chat(ui, key, "from another device")
        assert len(ui.resume(f"  {key} ")[3]) == 3
        with pytest.raises(gr.Error, match="32-64 characters"):
            ui.resume("short")

    def test_an_old_format_key_opens_its_session_with_a_warning_a_new_one_without(self, ui: UI) -> None:
        import secrets

        old = secrets.token_urlsafe(32)  # what new_session_key made before keys carried check characters
        chat(ui, old, "said before the new key format")
        _key, _shown, note, history, _stamps, _download = ui.resume(old)
        assert len(history) == 3 and "old format" in note
        assert "old format" in ui.start(old)[2]  # the key kept in the browser, on a reload
        fresh = ui.new_session()
        assert "old format" not in fresh[2]

    @pytest.mark.parametrize("bad", ["A" * 43, "0123456789" * 4])
    def test_a_guessable_pasted_key_is_refused_in_one_line(self, ui: UI, bad: str) -> None:
        with pytest.raises(gr.Error) as info:
            ui.resume(bad)
        assert "guess" in str(info.value) and "\n" not in str(info.value)

    def test_a_pasted_key_that_fails_its_check_is_refused(self, ui: UI) -> None:
        key = ui.start(None)[0]
        typo = key[:-1] + ("A" if key[-1] != "A" else "B")
        with pytest.raises(gr.Error, match="check"):
            ui.resume(typo)


class TestChat:
    def test_the_answer_arrives_with_stamps_and_a_receipt_to_download(self, ui: UI) -> None:
        key = new_session_key()
        chat(ui, key, "My cat is called Miso")
        outs = chat(ui, key, "What is my cat called?")
        first, last = outs[0], outs[-1]
        assert first[0][-1]["content"] == r.literal(r.PENDING) and first[1] == ""  # shown at once, box cleared
        history, _box, stamps, download = last
        assert history[-2]["role"] == "assistant" and "Miso" in history[-2]["content"]
        assert history[-1]["metadata"]["title"].startswith("🧾 Stamps")
        assert "My cat is called Miso" in stamps and "offline stand-in" in stamps
        saved = Path(download_path(download)).read_bytes()
        (receipt,) = [
            p
            for p in (ui.service.data_dir / "sessions" / session_id(key) / "receipts").glob("*.json")
            if p.stem in stamps
        ]
        assert saved == receipt.read_bytes()

    def test_streamed_text_is_shown_as_it_arrives_and_replaced_by_the_final_answer(self, ui: UI, monkeypatch) -> None:
        service = ui.service
        real = service.engine.llm.complete

        def streaming(messages, *, query, memories, on_delta=None, **extra):
            c = real(messages, query=query, memories=memories, on_delta=None, **extra)
            if on_delta is not None:
                on_delta("partial ")
                on_delta("text")
            return c

        monkeypatch.setattr(service.engine.llm, "complete", streaming)
        outs = chat(ui, new_session_key(), "stream please")
        shown = [o[0][-1]["content"] for o in outs[1:-1]]
        assert any("partial" in s for s in shown)
        assert "Offline stand" in outs[-1][0][-2]["content"]  # the Completion's text is authoritative

    @pytest.mark.parametrize(
        ("message", "k", "match"),
        [
            ("", 8, "empty"),
            ("   ", 8, "empty"),
            ("x" * (MAX_MESSAGE_CHARS + 1), 8, str(MAX_MESSAGE_CHARS)),
            ("fine", 0, "K 0"),
            ("fine", 21, "K 21"),
            ("fine", 2.5, "K 2.5"),
        ],
    )
    def test_bad_input_is_refused_and_nothing_is_written(self, ui: UI, message: str, k: object, match: str) -> None:
        key = new_session_key()
        before = files_under(ui.service.data_dir / "sessions")
        with pytest.raises(gr.Error, match=match):
            chat(ui, key, message, k=k)
        assert files_under(ui.service.data_dir / "sessions") == before
        assert not ui.service.engine.ledger.exists(session_id(key))

    def test_a_missing_session_key_is_refused(self, ui: UI) -> None:
        with pytest.raises(gr.Error, match="session key"):
            chat(ui, None, "hello")  # type: ignore[arg-type]

    def test_a_failed_turn_shows_a_note_not_an_answer(self, ui: UI) -> None:
        def broken(*_args: Any) -> Path:
            raise OSError("disk full")

        ui.service.engine.write_receipt = broken
        outs = []
        with pytest.raises(gr.Error, match="receipt could not be written"):
            for out in ui.chat("hello", [], 8, new_session_key()):
                outs.append(out)
        assert outs[-1][0][-1]["metadata"]["title"] == "⚠️ note"
        assert issubclass(TurnError, RuntimeError)

    def test_an_unexpected_error_is_a_short_message_not_a_traceback(self, ui: UI, monkeypatch) -> None:
        def boom(*_a: Any, **_k: Any) -> Any:
            raise KeyError("internal detail")

        monkeypatch.setattr(ui.service.engine, "turn", boom)
        with pytest.raises(gr.Error) as info:
            chat(ui, new_session_key(), "hello")
        message = info.value.message
        assert "failed on the server" in message and "KeyError" not in message and "internal detail" not in message


class TestSearch:
    def test_search_finds_this_sessions_events_only(self, ui: UI) -> None:
        mine, theirs = new_session_key(), new_session_key()
        chat(ui, mine, "the zebra in my garden")
        chat(ui, theirs, "the zebra in their garden")
        _status, table, _why = ui.search("zebra", 8, mine)
        assert table["headers"] == r.SEARCH_HEADERS
        my_ids = {short(ev.id, r.EVENT_ID_PREFIX) for ev in ui.service.engine.ledger.events(session_id(mine))}
        assert "the zebra in my garden" in [row[4] for row in table["data"]]
        assert {row[1] for row in table["data"]} <= my_ids
        assert not any("their" in row[4] for row in table["data"])

    def test_nothing_found_says_why(self, ui: UI) -> None:
        status, table, _why = ui.search("anything", 8, new_session_key())
        assert status.startswith("No results") and table["data"] == []

    @pytest.mark.parametrize(
        ("query", "k", "match"),
        [
            ("", 8, "type some words"),
            ("ok", 0, "K 0"),
            ("ok", 99, "K 99"),
            ("x" * 1001, 8, "1001 characters is over the limit of 1000"),
        ],
    )
    def test_bad_search_input_is_refused_and_clears_the_last_result(
        self, ui: UI, query: str, k: int, match: str
    ) -> None:
        key = new_session_key()
        chat(ui, key, "the zebra in my garden")
        status, table, why = ui.search("zebra", 8, key, False, True)
        assert status.startswith("1 result") and table["data"] and why  # the stand-in's reply is no memory
        status, table, why = ui.search(query, k, key, False, True)
        assert status.startswith("⛔ **No search:**") and match in status
        assert "result" not in status and table == {"headers": r.SEARCH_HEADERS, "data": []} and why == ""

    def test_a_bad_session_key_is_refused_as_a_status(self, ui: UI) -> None:
        status, table, _why = ui.search("zebra", 8, "not a key")
        assert status.startswith("⛔ **No search:**") and table["data"] == []

    def test_a_search_that_fails_on_the_server_clears_the_results_and_hides_the_details(
        self, ui: UI, monkeypatch
    ) -> None:
        key = new_session_key()
        chat(ui, key, "the zebra in my garden")
        assert ui.search("zebra", 8, key)[1]["data"]

        def boom(*_a: Any, **_k: Any) -> Any:
            raise KeyError("internal detail")

        monkeypatch.setattr(ui.service.engine.index, "search", boom)
        status, table, _why = ui.search("zebra", 8, key)
        assert "failed on the server" in status and "internal detail" not in status and "KeyError" not in status
        assert table["data"] == []


class TestVerifyTab:
    def test_an_own_receipt_verifies_against_the_ledger(self, ui: UI) -> None:
        key = new_session_key()
        download = chat(ui, key, "note one")[-1][3]
        verdict, table = ui.verify(download_path(download), key)
        assert "✅ Verified" in verdict and "this session's ledger" in verdict
        assert all(row[1] == "✅ pass" for row in table["data"])

    def test_a_progress_bar_shows_while_the_receipt_is_checked_against_the_ledger(self, ui: UI) -> None:
        key = new_session_key()
        download = chat(ui, key, "note one")[-1][3]
        shown: list[Any] = []
        verdict, _table = ui.verify(download_path(download), key, progress=lambda step, desc=None, **_kw: shown.append(desc))
        assert shown == ["checking the receipt against the ledger"] and "✅ Verified" in verdict
        shown.clear()
        ui.tamper(download_path(download), "signature", key, progress=lambda step, desc=None, **_kw: shown.append(desc))
        assert shown == ["changing one byte, then checking the copy against the ledger"]

    def test_the_verdict_comes_first_then_what_the_receipt_says(self, ui: UI) -> None:
        key = new_session_key()
        chat(ui, key, "I like green tea")
        download = chat(ui, key, "what tea do I like?")[-1][3]
        verdict, _table = ui.verify(download_path(download), key)
        first, _, verdict = verdict.partition("\n\n")  # issue 31: one line a person reads in ten seconds
        assert first.startswith("### ✅ Verified: this memory, this question and this answer are exactly what the signed ledger holds, signed by key `ed25519:")
        assert verdict.startswith(f"### {rr.PANEL_TITLE}\n")
        panel, _, rest = verdict.partition("\n\n---\n\n")
        assert "**The question** (seq 2, user" in panel and "“what tea do I like?”" in panel
        assert "1. memory\\#1 (seq 0, user" in panel and "“I like green tea”" in panel
        assert "from offline/" in panel and "✅ Verified" in rest and "✅ Verified" not in panel

    def test_the_tamper_verdict_opens_with_what_the_tampered_copy_says(self, ui: UI) -> None:
        key = new_session_key()
        chat(ui, key, "I like green tea")
        download = chat(ui, key, "what tea do I like?")[-1][3]
        verdict, _table, copy = ui.tamper(download_path(download), "memory", key)
        assert verdict.startswith(f"### {rr.TAMPERED_TITLE}\n")
        assert verdict.partition("\n\n---\n\n")[0] == rr.panel_for(
            Path(download_path(copy)).read_bytes(), rr.TAMPERED_TITLE
        ).removesuffix("\n\n---\n\n")
        assert "“I like green tea”" not in verdict  # the copy's memory text is the changed one

    def test_a_forgotten_memory_reads_forgotten_for_its_owner_and_withheld_for_anyone_else(self, ui: UI) -> None:
        from control.forget import forget
        from storage.files.receipts import files

        key = new_session_key()
        chat(ui, key, "my locker code is 4711")
        last = chat(ui, key, "what is my locker code?")[-1]
        rid = last[0][-1]["metadata"]["title"].split(" · ")[-1]
        session = session_id(key)
        engine = ui.service.engine
        forget(
            ui.service.data_dir, session, [0], cascade=False, ledger=engine.ledger, index=engine.index, key=engine.key
        )
        stored = files.receipt_path(ui.service.data_dir, session, rid)  # redacted in place by forget
        mine, _table = ui.verify(str(stored), key)
        theirs, _table = ui.verify(str(stored), new_session_key())
        row = next(ln for ln in mine.splitlines() if ln.startswith("1. memory"))
        assert "seq 0, user" in row and row.endswith("— erased): **[forgotten]**") and "4711" not in row
        row = next(ln for ln in theirs.splitlines() if ln.startswith("1. memory"))
        assert "seq 0, user" in row and row.endswith("— withheld): **[withheld]**") and "4711" not in row

    def test_another_visitor_verifies_it_offline(self, ui: UI) -> None:
        download = chat(ui, new_session_key(), "owner's words")[-1][3]
        verdict, table = ui.verify(download_path(download), new_session_key())
        assert "offline" in verdict and "another session" in verdict
        assert any(row[1] == "⚪ not verifiable here" for row in table["data"])

    @pytest.mark.parametrize(
        ("content", "expected"),
        [(b"this is not json", "Not a receipt"), (b"", "Cannot verify"), (b"{}", "Not a receipt")],
    )
    def test_bad_uploads_get_a_status_not_a_traceback(
        self, ui: UI, tmp_path: Path, content: bytes, expected: str
    ) -> None:
        p = tmp_path / "upload.json"
        p.write_bytes(content)
        verdict, table = ui.verify(str(p), new_session_key())
        assert expected in verdict and table["data"] == [] and rr.PANEL_TITLE not in verdict

    def test_an_oversized_upload_is_refused_unread(self, ui: UI, tmp_path: Path) -> None:
        p = tmp_path / "big.json"
        with open(p, "wb") as f:
            f.truncate(MAX_RECEIPT_BYTES + 1)
        verdict, _table = ui.verify(str(p), None)
        assert "over the" in verdict

    def test_no_upload_yet(self, ui: UI) -> None:
        assert "choose a receipt" in ui.verify(None, None)[0]
        assert "choose a receipt" in ui.tamper(None, "memory", None)[0]

    def test_tamper_shows_which_check_catches_it_and_offers_the_copy(self, ui: UI) -> None:
        key = new_session_key()
        chat(ui, key, "I like green tea")
        download = chat(ui, key, "what tea do I like?")[-1][3]
        verdict, table, copy = ui.tamper(download_path(download), "memory", key)
        assert "Tampered copy: caught" in verdict
        failed = {row[0] for row in table["data"] if row[1] == "❌\ufe0f FAIL"}
        assert {"memory#1.content", "prompt.hash"} <= failed  # format 2: the text is a disclosure beside the signature
        tampered = Path(download_path(copy)).read_bytes()
        assert tampered != Path(download_path(download)).read_bytes()  # (in a disclosure: the signed payload is untouched)
        assert "Failed" in ui.verify(download_path(copy), key)[0]


class TestLedgerTab:
    def test_the_ledger_shows_events_status_and_latest_checkpoint(self, ui: UI) -> None:
        key = new_session_key()
        chat(ui, key, "first")
        last = chat(ui, key, "second")[-1]
        status, table, checkpoint = ui.ledger(key)
        assert "Chain intact" in status and "4 events" in status
        assert [row[0] for row in table["data"]] == [0, 1, 2, 3]
        rid = last[0][-1]["metadata"]["title"].split(" · ")[-1]
        # the checkpoint signed after the last append: after an answer, the one its receipt carries
        body = ui.service.history(key)[-1].body
        assert body is not None and body["receipt_id"] == rid
        assert json.loads(checkpoint) == body["checkpoint"] and body["checkpoint"]["body"]["tree_size"] == 4

    def test_a_progress_bar_names_the_chain_verification_before_it_runs(self, ui: UI) -> None:
        key = new_session_key()
        chat(ui, key, "first")
        shown: list[tuple[Any, Any]] = []
        status, _table, _checkpoint = ui.ledger(key, progress=lambda step, desc=None, **_kw: shown.append((step, desc)))
        assert shown == [((0, 1), "verifying the chain from genesis")] and "Chain intact" in status

    def test_an_empty_session(self, ui: UI) -> None:
        status, table, checkpoint = ui.ledger(new_session_key())
        assert "no events yet" in status and table["data"] == [] and "no signed checkpoint" in checkpoint

    def test_a_corrupted_ledger_is_reported_with_its_break(self, ui: UI) -> None:
        key = new_session_key()
        chat(ui, key, "one")
        chat(ui, key, "two")
        log = ui.service.data_dir / "sessions" / session_id(key) / "events.jsonl"
        lines = log.read_bytes().split(b"\n")
        lines[1] = lines[1].replace(b'"text":"', b'"text":"X', 1)
        log.write_bytes(b"\n".join(lines))
        status, _table, _cp = ui.ledger(key)
        assert "Chain broken" in status and "line 2" in status

    def test_the_public_key_is_offered_for_offline_verification(self, ui: UI) -> None:
        service = ui.service
        assert service.key_id in service.public_key_text
        assert Path(service.public_key_path).read_text() == service.public_key_text
        assert "--trust signing.pub" in r.key_markdown(service.key_id)
