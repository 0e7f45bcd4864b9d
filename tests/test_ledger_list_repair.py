"""`python -m ledger list` (one row per session) and `python -m ledger repair` (issue 18 §3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger import Ledger
from ledger.__main__ import main
from ledger.listing import count_and_last_line


def make(data: Path, session: str, n: int) -> Ledger:
    led = Ledger(data)
    for i in range(n):
        led.append(session, "user" if i % 2 == 0 else "assistant", f"{session} message {i}", ts=f"2026-0{1 + i % 9}-0{1 + i % 9}T10:00:0{i % 10}Z")
    return led


def edit_line(led: Ledger, session: str, line: int, old: bytes, new: bytes) -> None:
    log = led.log_path(session)
    lines = log.read_bytes().split(b"\n")
    assert old in lines[line - 1]
    lines[line - 1] = lines[line - 1].replace(old, new)
    log.write_bytes(b"\n".join(lines))


class TestList:
    def test_one_row_per_session_with_events_last_activity_and_status(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        make(tmp_path, "alice", 3)
        led = make(tmp_path, "bob", 5)
        edit_line(led, "bob", 3, b"bob message 2", b"bob message X")
        assert main(["list", str(tmp_path)]) == 1
        out = capsys.readouterr().out.splitlines()
        assert out[0].split() == ["session", "events", "last", "activity", "status"]
        assert out[1].split()[:4] == ["alice", "3", "2026-03-03T10:00:02Z", "verified"]
        assert out[2].split()[:3] == ["bob", "5", "2026-05-05T10:00:04Z"]
        assert "BROKEN at line 3, seq 2, digest_mismatch" in out[2]
        assert out[3] == "2 sessions, 1 broken"

    def test_json_has_every_field(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        make(tmp_path, "alice", 2)
        assert main(["list", str(tmp_path), "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["ok"] is True
        (row,) = doc["sessions"]
        assert row == {
            "session": "alice",
            "events": 2,
            "last_activity": "2026-02-02T10:00:01.000000Z",
            "verified": True,
            "verified_events": 2,
            "break": None,
            "quarantined": [],
        }

    def test_a_broken_session_in_json_names_its_first_break(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        led = make(tmp_path, "bob", 4)
        edit_line(led, "bob", 2, b'"seq":1', b'"seq":7')
        assert main(["list", str(tmp_path), "--json"]) == 1
        (row,) = json.loads(capsys.readouterr().out)["sessions"]
        assert row["verified"] is False and row["verified_events"] == 1 and row["events"] == 4
        assert (row["break"]["line"], row["break"]["seq"], row["break"]["kind"]) == (2, 7, "seq_gap")

    def test_an_empty_data_directory_lists_nothing(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["list", str(tmp_path)]) == 0
        assert capsys.readouterr().out == f"no sessions in {tmp_path}\n"
        assert main(["list", str(tmp_path), "--json"]) == 0
        assert json.loads(capsys.readouterr().out) == {"ok": True, "sessions": []}

    def test_listing_writes_nothing(self, tmp_path: Path) -> None:
        led = make(tmp_path, "alice", 2)
        with open(led.log_path("alice"), "ab") as f:
            f.write(b'{"torn')  # a torn tail: listing reports it, it does not quarantine it
        before = sorted((p, p.stat().st_mtime_ns, p.stat().st_size) for p in tmp_path.rglob("*"))
        assert main(["list", str(tmp_path)]) == 1
        assert sorted((p, p.stat().st_mtime_ns, p.stat().st_size) for p in tmp_path.rglob("*")) == before

    def test_a_missing_data_directory_is_one_line(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["list", str(tmp_path / "nope")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "no such data directory" in err
        assert not (tmp_path / "nope").exists()

    @pytest.mark.parametrize("size", [0, 1, 5, 1 << 20, (1 << 20) + 3])
    def test_the_last_line_is_found_across_read_boundaries(self, tmp_path: Path, size: int) -> None:
        path = tmp_path / "f"
        path.write_bytes(b"a" * size + b"\n" + b"last line\n" + b"torn")
        assert count_and_last_line(path) == (2, b"last line")
        path.write_bytes(b"only")
        assert count_and_last_line(path) == (0, None)
