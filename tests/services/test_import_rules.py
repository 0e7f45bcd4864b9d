"""`ledger import`: the same file twice is refused, a BOM and trailing blank lines are accepted, empty text
and far-future times are refused with their line, and the summary counts right (issue 18 §3, FORMAT.md §7)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cli.prog_ledger import main
from ledger.event import format_ts
from ledger.imports import IMPORTS_FILE, content_hash
from ledger.messages import ImportError_, parse_import
from storage.files.ledger.import_records import read_records
from storage.files.ledger.store import Ledger

pytestmark = pytest.mark.usefixtures("_no_signing_key")


@pytest.fixture
def _no_signing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RECEIPT_SIGNING_KEY", raising=False)
    monkeypatch.delenv("RECEIPT_KEYS_DIR", raising=False)


def write(path: Path, rows: list[dict[str, Any]], *, prefix: bytes = b"", suffix: bytes = b"", eol: bytes = b"\n") -> Path:
    path.write_bytes(prefix + b"".join(json.dumps(r).encode() + eol for r in rows) + suffix)
    return path


ROWS = [{"role": "user", "text": "I adopted a cat"}, {"role": "assistant", "text": "Noted."}, {"role": "user", "text": "Her name is Miso"}]


def imported(data: Path) -> list[str]:
    return [e.text for e in Ledger(data).events("s1")]


class TestDuplicates:
    def test_importing_the_same_file_twice_is_refused_in_one_line_and_appends_nothing(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        src = write(tmp_path / "chat.jsonl", ROWS)
        assert main(["import", "--create", str(tmp_path / "d"), "s1", str(src)]) == 0
        capsys.readouterr()
        assert main(["import", "--create", str(tmp_path / "d"), "s1", str(src)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "already imported into session s1 (seq 0..2, from chat.jsonl" in err
        assert "--allow-duplicates" in err and "nothing was imported" in err
        assert len(imported(tmp_path / "d")) == 3

    def test_the_same_messages_spelled_differently_are_the_same_import(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        write(tmp_path / "a.jsonl", ROWS)
        reordered = [{"text": r["text"], "role": r["role"], "meta": {}} for r in ROWS]
        write(tmp_path / "b.jsonl", reordered, prefix=b"\xef\xbb\xbf", suffix=b"\r\n\n", eol=b"\r\n")
        assert main(["import", "--create", str(tmp_path / "d"), "s1", str(tmp_path / "a.jsonl")]) == 0
        assert main(["import", "--create", str(tmp_path / "d"), "s1", str(tmp_path / "b.jsonl")]) == 2
        assert "already imported" in capsys.readouterr().err

    def test_allow_duplicates_imports_again_and_records_it(self, tmp_path: Path) -> None:
        src = write(tmp_path / "chat.jsonl", ROWS)
        assert main(["import", "--create", str(tmp_path / "d"), "s1", str(src)]) == 0
        assert main(["import", "--create", str(tmp_path / "d"), "s1", str(src), "--allow-duplicates"]) == 0
        assert len(imported(tmp_path / "d")) == 6
        records = read_records(Ledger(tmp_path / "d"), "s1")
        assert [(r.first_seq, r.last_seq) for r in records] == [(0, 2), (3, 5)]
        assert records[0].sha256 == records[1].sha256 == content_hash(parse_import(src.read_bytes().splitlines(True)))

    def test_other_content_or_another_session_is_not_a_duplicate(self, tmp_path: Path) -> None:
        src = write(tmp_path / "chat.jsonl", ROWS)
        other = write(tmp_path / "more.jsonl", [*ROWS, {"role": "user", "text": "one more"}])
        assert main(["import", "--create", str(tmp_path / "d"), "s1", str(src)]) == 0
        assert main(["import", "--create", str(tmp_path / "d"), "s1", str(other)]) == 0
        assert main(["import", "--create", str(tmp_path / "d"), "s2", str(src)]) == 0

    def test_a_record_whose_events_the_ledger_no_longer_holds_does_not_block_a_reimport(self, tmp_path: Path) -> None:
        data = tmp_path / "d"
        Ledger(data).append("s1", "user", "before")
        src = write(tmp_path / "chat.jsonl", ROWS)
        assert main(["import", "--create", str(data), "s1", str(src)]) == 0
        log = Ledger(data).log_path("s1")
        log.write_bytes(log.read_bytes().split(b"\n", 1)[0] + b"\n")  # the import's lines cut away (as a repair does)
        assert main(["import", "--create", str(data), "s1", str(src)]) == 0
        assert imported(data) == ["before", *[r["text"] for r in ROWS]]

    def test_an_unreadable_import_record_is_named_and_nothing_is_imported(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        data = tmp_path / "d"
        src = write(tmp_path / "chat.jsonl", ROWS)
        assert main(["import", "--create", str(data), "s1", str(src)]) == 0
        (data / "sessions" / "s1" / IMPORTS_FILE).write_bytes(b'{"v":1,"sha256":"x"}\n')
        capsys.readouterr()
        assert main(["import", "--create", str(data), "s1", str(src)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and IMPORTS_FILE in err and "line 1: not an import record" in err
        assert len(imported(data)) == 3


class TestLines:
    def test_a_utf8_bom_and_trailing_blank_lines_are_accepted(self, tmp_path: Path) -> None:
        src = write(tmp_path / "in.jsonl", ROWS, prefix=b"\xef\xbb\xbf", suffix=b"\n  \n\r\n")
        assert main(["import", "--create", str(tmp_path / "d"), "s1", str(src)]) == 0
        assert imported(tmp_path / "d") == [r["text"] for r in ROWS]

    def test_a_blank_line_in_the_middle_is_refused_with_its_line_number(self) -> None:
        with pytest.raises(ImportError_) as err:
            parse_import([b'{"role":"user","text":"a"}\n', b"\n", b"\n", b'{"role":"user","text":"b"}\n'])
        assert err.value.line == 2 and "empty line" in str(err.value)

    def test_a_bom_anywhere_but_the_start_is_invalid_json(self) -> None:
        with pytest.raises(ImportError_) as err:
            parse_import([b'{"role":"user","text":"a"}\n', b'\xef\xbb\xbf{"role":"user","text":"b"}\n'])
        assert err.value.line == 2

    @pytest.mark.parametrize("text", ["", " ", "\n\t ", "\u3000"])
    def test_empty_or_whitespace_only_text_is_refused_with_its_line_number(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
    ) -> None:
        src = write(tmp_path / "in.jsonl", [ROWS[0], {"role": "user", "text": text}])
        assert main(["import", "--create", str(tmp_path / "d"), "s1", str(src)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "line 2: text is empty or only whitespace" in err
        assert not (tmp_path / "d").exists()


class TestFutureTimes:
    NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)

    def rows(self, ts: str) -> list[bytes]:
        return [b'{"role":"user","text":"old"}', json.dumps({"role": "user", "text": "later", "ts": ts}).encode()]

    def test_a_ts_up_to_one_day_ahead_is_accepted(self) -> None:
        ts = format_ts(self.NOW + timedelta(days=1))
        assert parse_import(self.rows(ts), now=self.NOW)[1].ts == ts

    def test_a_ts_more_than_one_day_ahead_is_refused_with_its_line(self) -> None:
        with pytest.raises(ImportError_) as err:
            parse_import(self.rows("2026-05-02T12:00:00.000001Z"), now=self.NOW)
        assert err.value.line == 2 and "more than 1 day in the future" in str(err.value)

    def test_the_rule_applies_after_normalising_to_utc(self) -> None:
        with pytest.raises(ImportError_):
            parse_import(self.rows("2026-05-02T23:00:00+10:00"), now=self.NOW - timedelta(hours=1))  # 13:00Z next day
        assert parse_import(self.rows("2026-05-02T21:00:00+10:00"), now=self.NOW)[1].ts == "2026-05-02T11:00:00.000000Z"

    def test_the_cli_refuses_a_year_ahead(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        ts = format_ts(datetime.now(UTC) + timedelta(days=365))
        src = write(tmp_path / "in.jsonl", [{"role": "user", "text": "from the future", "ts": ts}])
        assert main(["import", "--create", str(tmp_path / "d"), "s1", str(src)]) == 2
        assert "line 1: ts" in capsys.readouterr().err


@pytest.mark.parametrize(("n", "says"), [(1, "imported 1 event into session s1"), (3, "imported 3 events into session s1")])
def test_the_summary_counts_events_in_words(tmp_path: Path, capsys: pytest.CaptureFixture[str], n: int, says: str) -> None:
    src = write(tmp_path / "in.jsonl", ROWS[:n])
    assert main(["import", "--create", str(tmp_path / "d"), "s1", str(src)]) == 0
    assert capsys.readouterr().out.startswith(says + " (seq 0..")
