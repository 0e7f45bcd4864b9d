"""What a forget must also clear outside events.jsonl: the import records' unsalted hashes of an imported file
(sessions/<s>/imports.jsonl) and quarantined copies of ledger lines (events.jsonl.torn-*, events.jsonl.cut-*)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli.prog_ledger import main as ledger_main
from control import forget as control
from ledger.imports import IMPORTS_FILE
from ledger.messages import Message
from storage.files.ledger.import_records import previous_import, read_records, record_import
from storage.files.ledger.store import Ledger

from ..forget_support import MARKER

pytestmark = pytest.mark.usefixtures("_no_signing_key_env")


@pytest.fixture
def _no_signing_key_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("RECEIPT_SIGNING_KEY", raising=False)
    monkeypatch.setenv("RECEIPT_KEYS_DIR", str(tmp_path / "keys"))


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in rows))
    return path


MARKED = [{"role": "user", "text": "I adopted a grey cat"}, {"role": "user", "text": f"My code word is {MARKER}"}, {"role": "user", "text": "I live in Lisbon"}]
OTHER = [{"role": "user", "text": "I play the cello"}, {"role": "user", "text": "I like rainy days"}]


@pytest.fixture
def imported(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    assert ledger_main(["import", str(data), "s1", str(_write(tmp_path / "marked.jsonl", MARKED)), "--create"]) == 0
    assert ledger_main(["import", str(data), "s1", str(_write(tmp_path / "other.jsonl", OTHER))]) == 0
    return data


class TestImportRecords:
    def test_forgetting_an_imported_event_drops_the_hash_of_its_import_and_keeps_the_others(self, imported: Path) -> None:
        led = Ledger(imported)
        marked, other = read_records(led, "s1")
        assert (marked.first_seq, marked.last_seq, other.first_seq) == (0, 2, 3)
        result = control.forget(imported, "s1", [1])
        assert result.imports_dropped == 1
        raw = (led.session_dir("s1") / IMPORTS_FILE).read_bytes()
        assert marked.sha256.encode() not in raw and b"marked.jsonl" not in raw
        assert read_records(led, "s1") == [other]
        assert previous_import(led, "s1", marked.sha256) is None, "it would confirm a guess of the erased text"
        assert previous_import(led, "s1", other.sha256) == other
        assert not list(led.session_dir("s1").glob(f".{IMPORTS_FILE}*")), "no temp file left behind"
        assert "import records dropped" in "\n".join(result.summary_lines())

    def test_forgetting_an_event_outside_every_import_leaves_the_records_byte_for_byte(self, imported: Path) -> None:
        led = Ledger(imported)
        led.append("s1", "user", "said in the app, not imported")
        before = (led.session_dir("s1") / IMPORTS_FILE).read_bytes()
        result = control.forget(imported, "s1", [5])
        assert result.imports_dropped == 0
        assert (led.session_dir("s1") / IMPORTS_FILE).read_bytes() == before

    def test_an_import_an_erasure_reached_before_its_record_was_written_records_nothing(self, tmp_path: Path) -> None:
        led = Ledger(tmp_path / "data")
        events = led.append_many("s1", [Message("user", f"my word is {MARKER}", {}, None), Message("user", "hello", {}, None)])
        led.erase("s1", [0])
        record_import(led, "s1", "ab" * 32, events, "late.jsonl")
        assert read_records(led, "s1") == []

    def test_an_unreadable_record_file_is_emptied_rather_than_kept_with_the_hash(self, imported: Path) -> None:
        led = Ledger(imported)
        path = led.session_dir("s1") / IMPORTS_FILE
        path.write_bytes(path.read_bytes() + b"{not json\n")
        assert control.forget(imported, "s1", [1]).imports_dropped == 3
        assert path.read_bytes() == b""


TEXT = f'My café code is {MARKER}, "quoted"'


def _forms(line: bytes) -> dict[str, bytes]:
    """The same ledger line as a quarantine file may hold it."""
    obj = json.loads(line)
    return {
        "jcs_utf8": line,  # as the ledger writes it: é raw, quotes escaped
        "ascii_escaped": json.dumps(obj, ensure_ascii=True).encode() + b"\n",  # é as \\u00e9
        "raw_text": TEXT.encode() + b"\n",  # the words as typed
        "torn_inside_the_text": line[: line.index(MARKER.encode()) + len(MARKER) - 2],  # the write stopped mid-word
    }


class TestQuarantinedCopies:
    @pytest.mark.parametrize("form", ["jcs_utf8", "ascii_escaped", "raw_text", "torn_inside_the_text"])
    @pytest.mark.parametrize("prefix", ["events.jsonl.torn-812-", "events.jsonl.cut-3-"])
    def test_a_quarantine_file_holding_the_erased_text_is_removed_and_named(self, tmp_path: Path, form: str, prefix: str) -> None:
        from ..forget_support import files_with_marker

        data = tmp_path / "data"
        led = Ledger(data)
        led.append("s1", "user", "I like tea")
        ev = led.append("s1", "user", TEXT)
        sdir = led.session_dir("s1")
        name = f"{prefix}20261203T101500Z"
        (sdir / name).write_bytes(b'{"x":1}\n' + _forms(ev.to_line())[form])
        (sdir / f"{prefix}20261203T111500Z").write_bytes(b'{"text":"I like tea"}\n')  # holds no erased text: kept
        (sdir / "notes.txt").write_bytes(TEXT.encode())  # not a quarantine file: not ours to judge here
        result = control.forget(data, "s1", [ev.seq])
        assert result.quarantine_removed == (name,)
        assert not (sdir / name).exists() and (sdir / f"{prefix}20261203T111500Z").exists()
        assert (sdir / "notes.txt").exists()
        assert name in "\n".join(result.summary_lines())
        assert files_with_marker(data) == [str(sdir / "notes.txt")]

    def test_a_torn_append_retried_later_leaves_nothing_once_the_retry_is_forgotten(self, tmp_path: Path) -> None:
        from ..forget_support import files_with_marker

        data = tmp_path / "data"
        led = Ledger(data)
        first = led.append("s1", "user", "I like tea")
        line = first.to_line().replace(b"I like tea", TEXT.encode().replace(b'"', b'\\"'))
        with open(led.log_path("s1"), "ab") as f:  # a crash mid-append: half a line, no newline
            f.write(line[: line.index(MARKER.encode()) + 5])
        led.close()
        led = Ledger(data)
        retried = led.append("s1", "user", TEXT)
        assert led.quarantined, "the torn tail must have been quarantined"
        torn = Path(led.quarantined[0].path).name
        result = control.forget(data, "s1", [retried.seq])
        assert result.quarantine_removed == (torn,)
        assert files_with_marker(data) == []
        assert Ledger(data).verify("s1").ok

    def test_a_crash_after_the_ledger_rewrite_still_removes_the_quarantine_file_on_recover(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        from storage.files.retrieval.db import Index

        from ..forget_support import files_with_marker

        data = tmp_path / "data"
        led = Ledger(data)
        ev = led.append("s1", "user", TEXT)
        name = "events.jsonl.cut-0-20261203T101500Z"
        (led.session_dir("s1") / name).write_bytes(ev.to_line())
        index = Index(data, led)

        def crash(*_a: object, **_k: object) -> None:
            raise KeyboardInterrupt("killed mid-erasure")

        monkeypatch.setattr(index, "forget_events", crash)
        with pytest.raises(KeyboardInterrupt):
            control.forget(data, "s1", [0], ledger=led, index=index)
        monkeypatch.undo()
        assert (led.session_dir("s1") / name).exists() and Ledger(data).read_events("s1", [0])[0].erased
        assert control.recover(data, ledger=led, index=index)
        assert not (led.session_dir("s1") / name).exists()
        assert files_with_marker(data) == []


class TestIndexCopies:
    """An index the retrieval layer found unreadable is moved aside as index.sqlite.corrupt-*: it holds the words it indexed."""

    @staticmethod
    def _copy(data: Path) -> list[str]:
        from storage.files.retrieval.db import INDEX_FILE

        names = []
        for suffix in ("", "-wal", "-shm"):
            src = data / f"{INDEX_FILE}{suffix}"
            if src.exists():
                name = f"{INDEX_FILE}.corrupt-20261203T101500Z-000000001{suffix}"
                (data / name).write_bytes(src.read_bytes())
                names.append(name)
        return names

    def test_forgetting_an_event_overwrites_and_removes_the_index_copies_moved_aside(self, tmp_path: Path) -> None:
        from ..forget_support import engine, files_with_marker, marked_session

        data = tmp_path / "data"
        eng = engine(data)
        mem_seq, _turns = marked_session(eng)
        names = self._copy(data)
        assert any(name in hit for hit in files_with_marker(data) for name in names), "the copy must hold the marker"
        result = control.forget(data, "alice", [mem_seq], ledger=eng.ledger, index=eng.index, key=eng.key)
        assert set(names) <= set(result.quarantine_removed)
        assert files_with_marker(data) == []

    def test_forgetting_a_whole_session_overwrites_and_removes_them_too(self, tmp_path: Path) -> None:
        from ..forget_support import engine, files_with_marker, marked_session

        data = tmp_path / "data"
        eng = engine(data)
        marked_session(eng)
        names = self._copy(data)
        result = control.forget_session(data, "alice", ledger=eng.ledger, index=eng.index, key=eng.key)
        assert set(names) <= set(result.quarantine_removed)
        assert files_with_marker(data) == []
        assert names[0] in "\n".join(result.summary_lines())
