"""Session bundles in the app and over MCP (issue 13), called directly (no server): the Ledger tab's exports hold the
visitor's own session only and verify with the server's key; an import is verified first and refused (with a
message, never a traceback) for a bundle from another server, a file that is not a bundle, a hostile or tampered
one and an oversized upload; imports belong to the visitor who made them; a receipt of an imported session is
verified against that import on the Verify tab; the MCP tools do the same."""

from __future__ import annotations

import base64
import json
import zipfile
from pathlib import Path
from typing import Any

import gradio as gr
import pytest

import bundle
from chat.engine import Engine
from chat.llm import LLM
from receipts.verify import FAIL, PASS
from webui import bundles as bd
from webui import render as r
from webui import render_bundle as rb
from webui.bundle_ui import BundleUI
from webui.forget import forget_event
from webui.handlers import UI
from webui.mcp_tools import make_tools
from webui.render_verify import MODE_IMPORTED, MODE_OTHER_SESSION
from webui.service import Service
from webui.sessions import new_session_key, session_id

SECRET = "the spare key is under the blue pot"


def service_at(path: Path) -> Service:
    return Service(Engine(path, llm=LLM(api_key="")))


@pytest.fixture
def service(tmp_path: Path) -> Service:
    return service_at(tmp_path / "data")


@pytest.fixture
def bui(service: Service) -> BundleUI:
    return BundleUI(service)


def talked(service: Service, *messages: str) -> str:
    """A new visitor's key after a turn per message (the offline stand-in answers; each answer has a receipt)."""
    key = new_session_key()
    for m in messages:
        service.turn(key, m, 8)
    return key


def download_path(button: Any) -> Path:
    value = button.value
    return Path(value["path"] if isinstance(value, dict) else value)


def exported(bui: BundleUI, key: str) -> Path:
    _status, button = bui.export_bundle(key, lambda *a, **k: None)
    return download_path(button)


def plain(markdown: str) -> str:
    """Rendered Markdown's text, near enough: without the backslashes that escape punctuation."""
    return markdown.replace("\\", "")


def rows(table: dict[str, Any]) -> dict[str, list[Any]]:
    return {row[0]: row for row in table["data"]}


def imported_root(service: Service) -> list[str]:
    root = service.data_dir / "imported"
    return sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) if root.is_dir() else []


def rewrite(src: Path, dest: Path, change: dict[str, bytes]) -> Path:
    """A copy of the zip at `src` with the named members' bytes replaced (the manifest kept as it was)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, change.get(info.filename, zin.read(info.filename)))
    return dest


class TestExport:
    def test_the_bundle_holds_the_visitors_session_and_verifies_with_the_server_key(self, bui: BundleUI, service: Service) -> None:
        key = talked(service, SECRET, "where is the spare key?")
        status, button = bui.export_bundle(key, lambda *a, **k: None)
        path = download_path(button)
        assert path.name == f"session-{session_id(key)}.mre.zip" and list(service.downloads.root.rglob(path.name))
        report = bundle.verify_file(path, [service.engine.key.public_key])
        assert report.verdict == "verified" and report.session == session_id(key) and report.events == 4
        assert "4 events, 2 receipts" in status

    def test_another_visitors_export_holds_nothing_of_the_first(self, bui: BundleUI, service: Service) -> None:
        talked(service, SECRET)
        other = talked(service, "I like tea")
        path = exported(bui, other)
        with zipfile.ZipFile(path) as z:
            everything = b"".join(z.read(n) for n in z.namelist())
        assert b"blue pot" not in everything and b"I like tea" in everything
        assert bundle.verify_file(path, [service.engine.key.public_key]).session == session_id(other)

    def test_the_progress_bar_is_told_every_step_up_to_the_total(self, service: Service) -> None:
        key = talked(service, SECRET, "where is the spare key?")
        seen: list[tuple[int, int, str]] = []
        bd.export_bundle(service, key, lambda d, t, w: seen.append((d, t, w)))
        assert seen and seen[-1][0] == seen[-1][1] and {w for _d, _t, w in seen} == {"ledger", "receipts"}

    def test_a_session_with_no_events_is_refused_with_a_toast(self, bui: BundleUI) -> None:
        with pytest.raises(gr.Error, match="no events yet"):
            bui.export_bundle(new_session_key(), lambda *a, **k: None)
        with pytest.raises(gr.Error, match="no events yet"):
            bui.export_markdown(new_session_key())

    def test_a_malformed_key_exports_nothing(self, bui: BundleUI, service: Service) -> None:
        talked(service, SECRET)
        with pytest.raises(gr.Error, match="session key"):
            bui.export_bundle("guessable", lambda *a, **k: None)

    def test_the_markdown_is_a_md_download_of_the_conversation(self, bui: BundleUI, service: Service) -> None:
        key = talked(service, SECRET)
        status, button = bui.export_markdown(key)
        path = download_path(button)
        assert path.name == f"session-{session_id(key)}.md" and list(service.downloads.root.rglob(path.name))
        assert "the spare key is under the blue pot" in path.read_text("utf-8") and "2 events" in status

    def test_forgetting_a_memory_deletes_the_export_copies(self, service: Service) -> None:
        key = talked(service, SECRET)
        copies = [bd.export_bundle(service, key).path, Path(bd.export_markdown(service, key)[0])]
        assert all(p.is_relative_to(service.downloads.root) for p in copies)
        first = next(iter(service.engine.ledger.events(session_id(key))))
        forget_event(service, key, first.id, "")
        assert [p.exists() for p in copies] == [False, False]


class TestImport:
    def test_an_exported_bundle_is_imported_verified_under_the_visitors_session(self, bui: BundleUI, service: Service) -> None:
        key = talked(service, SECRET, "where is the spare key?")
        path = exported(bui, key)
        result, table, listed, pick = bui.import_bundle(str(path), False, key)
        assert result.startswith("## ✅ Imported")
        checks = rows(table)
        assert checks and all(row[1] == "✅ pass" for row in checks.values())
        assert {"manifest.signature", "ledger.chain", "checkpoint.covers_ledger"} <= set(checks)
        (origin,) = bd.imported_sessions(service, key)
        assert origin.local.startswith(session_id(key) + "-") and origin.verdict == "verified"
        assert origin.local in listed and pick.value == origin.local

    def test_a_progress_bar_names_each_step_of_an_import(self, bui: BundleUI, service: Service) -> None:
        key = talked(service, SECRET)
        path = exported(bui, key)
        shown: list[tuple[Any, Any]] = []
        result, *_rest = bui.import_bundle(str(path), False, key, progress=lambda step, desc=None, **_kw: shown.append((step, desc)))
        assert result.startswith("## ✅ Imported")
        assert shown == [((0, 2), "verifying the bundle and importing it"), ((1, 2), "listing your imported sessions")]

    def test_the_imported_session_is_searchable_read_only(self, bui: BundleUI, service: Service) -> None:
        key = talked(service, SECRET)
        bui.import_bundle(str(exported(bui, key)), False, key)
        (origin,) = bd.imported_sessions(service, key)
        before = (service.data_dir / "imported" / origin.local / "sessions" / origin.session / "events.jsonl").read_bytes()
        status, table = bui.search_imported(origin.local, "spare key", 8, key)
        assert "1 result" in status or "results" in status
        assert any(SECRET in str(row) for row in table["data"])
        after = (service.data_dir / "imported" / origin.local / "sessions" / origin.session / "events.jsonl").read_bytes()
        assert after == before

    def test_the_imported_sessions_stand_in_replies_are_never_search_results(self, bui: BundleUI, service: Service) -> None:
        """Issue 31: as in the visitor's own session, the offline stand-in's replies (they quote the secret) are left out."""
        key = talked(service, SECRET, "where is the spare key?", "the spare key, where again?")
        bui.import_bundle(str(exported(bui, key)), False, key)
        (origin,) = bd.imported_sessions(service, key)
        _status, table = bui.search_imported(origin.local, "spare key", 8, key)
        roles = [row[r.SEARCH_HEADERS.index("role")] for row in table["data"]]
        assert roles and "assistant" not in roles, table["data"]
        assert any(SECRET in str(row) for row in table["data"])

    def test_importing_the_same_bundle_again_changes_nothing(self, bui: BundleUI, service: Service) -> None:
        key = talked(service, SECRET)
        path = exported(bui, key)
        bui.import_bundle(str(path), False, key)
        result, _table, _listed, _pick = bui.import_bundle(str(path), False, key)
        assert "Already imported" in result and len(imported_root(service)) == 1

    def test_a_bundle_from_another_server_is_refused_and_nothing_is_imported(self, tmp_path: Path, service: Service) -> None:
        elsewhere = service_at(tmp_path / "elsewhere")
        path = exported(BundleUI(elsewhere), talked(elsewhere, SECRET))
        result, table, _listed, _pick = BundleUI(service).import_bundle(str(path), False, new_session_key())
        assert result.startswith("## ⛔ Not imported") and "not signed by this app's key" in plain(result)
        assert rows(table)["manifest.signature"][1] == "⚪ not verifiable here"
        assert imported_root(service) == []

    def test_import_unverified_imports_it_labelled_unverified(self, tmp_path: Path, service: Service) -> None:
        elsewhere = service_at(tmp_path / "elsewhere")
        path = exported(BundleUI(elsewhere), talked(elsewhere, SECRET))
        key = new_session_key()
        result, _table, listed, pick = BundleUI(service).import_bundle(str(path), True, key)
        assert "Imported UNVERIFIED" in result and "unverified" in listed
        (origin,) = bd.imported_sessions(service, key)
        assert origin.verdict == "unverified" and "UNVERIFIED" in rb.imported_label(origin)
        status, _results = BundleUI(service).search_imported(origin.local, "spare key", 8, key)
        assert "unverified import" in status

    def test_a_fresh_data_directory_can_import(self, tmp_path: Path, service: Service) -> None:
        # bundle.import_bundle refuses a DATA_DIR without sessions/, which a new app's has not made yet
        fresh = service_at(tmp_path / "fresh")
        path = exported(BundleUI(service), talked(service, SECRET))
        result, *_ = BundleUI(fresh).import_bundle(str(path), True, new_session_key())
        assert "Imported UNVERIFIED" in result

    @pytest.mark.parametrize(
        ("name", "content", "said"),
        [
            ("not-a-bundle.zip", b"this is not a zip file at all", "not a readable zip"),
            ("empty.zip", b"", "the file is empty"),
        ],
    )
    def test_a_file_that_is_not_a_bundle_is_a_message(
        self, bui: BundleUI, service: Service, tmp_path: Path, name: str, content: bytes, said: str
    ) -> None:
        path = tmp_path / name
        path.write_bytes(content)
        result, table, *_ = bui.import_bundle(str(path), False, new_session_key())
        assert result.startswith("## ⛔ Not imported") and said in plain(result) and table["data"] == []
        assert str(tmp_path) not in result  # the server's paths are not shown
        assert imported_root(service) == []

    def test_a_hostile_bundle_is_refused_before_anything_is_written(self, bui: BundleUI, service: Service, tmp_path: Path) -> None:
        path = tmp_path / "evil.mre.zip"
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("../../escaped.txt", b"x")
        result, table, *_ = bui.import_bundle(str(path), True, new_session_key())
        assert result.startswith("## ⛔ Not imported") and table["data"] == []
        assert imported_root(service) == [] and not (tmp_path.parent / "escaped.txt").exists()

    def test_a_changed_ledger_is_refused_with_the_failing_row(self, bui: BundleUI, service: Service, tmp_path: Path) -> None:
        key = talked(service, SECRET)
        path = exported(bui, key)
        with zipfile.ZipFile(path) as z:
            ledger = z.read("ledger/events.jsonl")
        bad = rewrite(path, tmp_path / "changed.mre.zip", {"ledger/events.jsonl": ledger.replace(b"blue pot", b"red pot")})
        result, table, *_ = bui.import_bundle(str(bad), False, key)
        assert result.startswith("## ⛔ Not imported") and "check `members.hashes` failed" in result
        assert rows(table)["members.hashes"][1] == "❌\ufe0f FAIL"
        assert imported_root(service) == []

    def test_an_upload_over_the_cap_is_refused_unread(self, bui: BundleUI, tmp_path: Path) -> None:
        path = tmp_path / "huge.mre.zip"
        with open(path, "wb") as f:
            f.truncate(bd.MAX_BUNDLE_UPLOAD_BYTES + 1)  # sparse: nothing to read
        result, *_ = bui.import_bundle(str(path), False, new_session_key())
        assert "upload limit" in plain(result) and "python -m bundle import" in plain(result)

    def test_no_file_is_a_message(self, bui: BundleUI) -> None:
        result, *_ = bui.import_bundle(None, False, new_session_key())
        assert "choose a bundle file" in result


class TestImportsAreTheVisitors:
    def test_another_visitor_neither_lists_nor_searches_my_import(self, bui: BundleUI, service: Service) -> None:
        key = talked(service, SECRET)
        bui.import_bundle(str(exported(bui, key)), False, key)
        (origin,) = bd.imported_sessions(service, key)
        other = new_session_key()
        listed, pick = bui.imported(other)
        assert listed == rb.NO_IMPORTS and pick.choices == []
        status, table = bui.search_imported(origin.local, "spare key", 8, other)
        assert "not one of this session's imports" in status and table["data"] == []

    def test_a_bundle_another_visitor_imported_is_not_handed_over(self, bui: BundleUI, service: Service) -> None:
        key = talked(service, SECRET)
        path = exported(bui, key)
        bui.import_bundle(str(path), False, key)
        result, *_ = bui.import_bundle(str(path), False, new_session_key())
        assert "under another visitor's session" in result


class TestVerifyAgainstAnImport:
    def receipt_of(self, service: Service, key: str) -> bytes:
        rid = service.latest_receipt(key)
        assert rid is not None
        return (service.data_dir / "sessions" / session_id(key) / "receipts" / f"{rid[0]}.json").read_bytes()

    def test_a_receipt_of_an_imported_session_is_checked_against_it(self, tmp_path: Path, service: Service) -> None:
        elsewhere = service_at(tmp_path / "elsewhere")
        theirs = talked(elsewhere, SECRET, "where is the spare key?")
        path = exported(BundleUI(elsewhere), theirs)
        mine = new_session_key()
        BundleUI(service).import_bundle(str(path), True, mine)
        receipt = tmp_path / "receipt.json"
        receipt.write_bytes(self.receipt_of(elsewhere, theirs))
        report, mode, home = service.verify_where(receipt.read_bytes(), mine)
        assert mode == MODE_IMPORTED and home is not None and report.verdict == "verified"
        assert any(c.name.startswith("ledger") and c.status == PASS for c in report.checks)
        verdict, _table = UI(service).verify(str(receipt), mine)
        assert f"Checked against the imported session `{home.local}`" in verdict
        assert "unverified" in verdict  # imported unverified: said so beside the verdict

    def test_another_visitor_checks_it_offline(self, tmp_path: Path, service: Service) -> None:
        key = talked(service, SECRET)
        BundleUI(service).import_bundle(str(exported(BundleUI(service), key)), False, key)
        _report, mode, home = service.verify_where(self.receipt_of(service, key), new_session_key())
        assert (mode, home) == (MODE_OTHER_SESSION, None)

    def test_a_changed_imported_ledger_fails_the_receipt(self, tmp_path: Path, service: Service) -> None:
        elsewhere = service_at(tmp_path / "elsewhere")
        theirs = talked(elsewhere, SECRET, "where is the spare key?")
        mine = new_session_key()
        BundleUI(service).import_bundle(str(exported(BundleUI(elsewhere), theirs)), True, mine)
        (origin,) = bd.imported_sessions(service, mine)
        log = service.data_dir / "imported" / origin.local / "sessions" / origin.session / "events.jsonl"
        log.write_bytes(log.read_bytes().replace(b"blue pot", b"red pot"))
        report, mode, _home = service.verify_where(self.receipt_of(elsewhere, theirs), mine)
        assert mode == MODE_IMPORTED and any(c.status == FAIL for c in report.checks)


class TestMCP:
    @pytest.fixture
    def tools(self, service: Service) -> dict[str, Any]:
        return {fn.__name__: fn for fn in make_tools(service)}

    def test_export_session_returns_the_callers_bundle_as_base64(self, tools: dict[str, Any], service: Service, tmp_path: Path) -> None:
        key = talked(service, SECRET)
        out = json.loads(tools["export_session"](key))
        path = tmp_path / out["file_name"]
        path.write_bytes(base64.b64decode(out["bundle_base64"]))
        assert (out["session_id"], out["events"], out["receipts"]) == (session_id(key), 2, 1)
        assert bundle.verify_file(path, [service.engine.key.public_key]).verdict == "verified"
        assert not list(service.downloads.root.rglob("*.mre.zip"))  # the copy is not left behind

    def test_import_bundle_imports_it_for_the_caller(self, tools: dict[str, Any], service: Service) -> None:
        key = talked(service, SECRET)
        data = json.loads(tools["export_session"](key))["bundle_base64"]
        out = json.loads(tools["import_bundle"](key, data))
        assert out["imported"] and out["verdict"] == "verified" and out["local_session"].startswith(session_id(key))
        assert all(c["status"] == "pass" for c in out["checks"])
        assert not list(service.downloads.root.rglob("*.mre.zip"))

    def test_a_bundle_from_another_server_is_refused_unless_allowed(self, tools: dict[str, Any], tmp_path: Path) -> None:
        elsewhere = service_at(tmp_path / "elsewhere")
        data = json.loads(make_tools(elsewhere)[-2](talked(elsewhere, SECRET)))["bundle_base64"]
        key = new_session_key()
        with pytest.raises(gr.Error) as refused:  # a refusal is a tool error, as every other tool's (issue 31)
            tools["import_bundle"](key, data)
        assert "not signed by this app's key" in str(refused.value.message) and "nothing was imported" in str(refused.value.message)
        allowed = json.loads(tools["import_bundle"](key, data, True))
        assert allowed["imported"] and allowed["verdict"] == "unverified"

    @pytest.mark.parametrize(("data", "said"), [("", "give the bundle"), ("%%%", "not base64")])
    def test_bad_input_is_a_plain_tool_error(self, tools: dict[str, Any], data: str, said: str) -> None:
        with pytest.raises(gr.Error) as info:
            tools["import_bundle"](new_session_key(), data)
        assert said in str(info.value.message) and "&#" not in str(info.value.message)

    def test_not_a_bundle_is_refused_with_a_reason(self, tools: dict[str, Any]) -> None:
        with pytest.raises(gr.Error) as info:
            tools["import_bundle"](new_session_key(), base64.b64encode(b"not a zip").decode())
        assert "not a readable zip" in str(info.value.message) and "&#" not in str(info.value.message)

    def test_export_needs_a_session_key_and_events(self, tools: dict[str, Any]) -> None:
        for key, said in (("", "session key"), (new_session_key(), "no events yet")):
            with pytest.raises(gr.Error, match=said):
                tools["export_session"](key)
