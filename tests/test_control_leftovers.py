"""What a forget must also clear outside events.jsonl: the import records' unsalted hashes of an imported file
(sessions/<s>/imports.jsonl) and quarantined copies of ledger lines (events.jsonl.torn-*, events.jsonl.cut-*)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from control import forget as control
from ledger import Ledger
from ledger.__main__ import main as ledger_main
from ledger.imports import IMPORTS_FILE, previous_import, read_records, record_import
from ledger.store import Message

from .forget_support import MARKER

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
    assert ledger_main(["import", str(data), "s1", str(_write(tmp_path / "marked.jsonl", MARKED))]) == 0
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
