"""`python -m ledger list` (one row per session) and `python -m ledger repair` (issue 18 §3)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
from pathlib import Path

import pytest

from chat.engine import Engine
from cli.prog_ledger import main
from storage.files.ledger.listing_files import count_and_last_line
from storage.files.ledger.store import Ledger
from storage.files.receipts import checkpoint_files as checkpoints_files
from storage.files.receipts.api import verify_bytes


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
        assert out[3] == f"2 sessions, 1 broken (`python -m ledger repair {tmp_path} SESSION` shows what to do)"

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


def cut_files(led: Ledger, session: str) -> list[Path]:
    return sorted(led.session_dir(session).glob("events.jsonl.cut-*"))


@pytest.fixture
def broken(tmp_path: Path) -> tuple[Ledger, bytes]:
    """Session bob: 8 events, line 4 (seq 3) edited in place. Returns the ledger and its bytes."""
    led = make(tmp_path, "bob", 8)
    edit_line(led, "bob", 4, b"bob message 3", b"bob message 3!")
    return Ledger(tmp_path), led.log_path("bob").read_bytes()


class TestRepairShows:
    def test_without_truncate_at_it_shows_the_break_and_what_truncating_would_do(
        self, tmp_path: Path, broken: tuple[Ledger, bytes], capsys: pytest.CaptureFixture[str]
    ) -> None:
        led, before = broken
        assert main(["repair", str(tmp_path), "bob"]) == 1
        out = capsys.readouterr().out
        assert "session bob: BROKEN at line 4, seq 3, digest_mismatch" in out
        assert "lines 1–3 (seq 0–2) verify" in out and "the ledger has 8 lines" in out
        offset = len(b"".join(line + b"\n" for line in before.split(b"\n")[:3]))
        assert f"--truncate-at 3` would move lines 4–8 (5 lines, {len(before) - offset} bytes)" in out
        assert led.log_path("bob").read_bytes() == before and not cut_files(led, "bob")

    def test_json_names_the_break_and_the_suggested_cut(self, tmp_path: Path, broken: tuple[Ledger, bytes], capsys: pytest.CaptureFixture[str]) -> None:
        _led, before = broken
        offset = len(b"".join(line + b"\n" for line in before.split(b"\n")[:3]))
        assert main(["repair", str(tmp_path), "bob", "--json"]) == 1
        doc = json.loads(capsys.readouterr().out)
        assert doc["break"]["line"] == 4 and doc["break"]["kind"] == "digest_mismatch"
        assert doc["truncate_at"] == 3 and doc["would_cut"] == {"lines": 5, "bytes": len(before) - offset}

    def test_a_session_that_verifies_has_nothing_to_repair_and_is_never_cut(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        led = make(tmp_path, "alice", 3)
        before = led.log_path("alice").read_bytes()
        assert main(["repair", str(tmp_path), "alice"]) == 0
        assert "verifies (3 events): nothing to repair" in capsys.readouterr().out
        assert main(["repair", str(tmp_path), "alice", "--truncate-at", "1"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "the ledger verifies" in err and "nothing was changed" in err
        assert led.log_path("alice").read_bytes() == before and not cut_files(led, "alice")

    def test_an_unknown_session_is_one_line(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["repair", str(tmp_path), "nobody"]) == 2
        assert "no such session" in capsys.readouterr().err


class TestTruncate:
    def test_the_tail_is_moved_aside_byte_for_byte_and_the_chain_verifies_with_a_note(
        self, tmp_path: Path, broken: tuple[Ledger, bytes], capsys: pytest.CaptureFixture[str]
    ) -> None:
        led, before = broken
        lines = before.split(b"\n")
        offset = len(b"".join(line + b"\n" for line in lines[:3]))
        assert main(["repair", str(tmp_path), "bob", "--truncate-at", "3"]) == 0
        out = capsys.readouterr().out
        (cut,) = cut_files(led, "bob")
        assert cut.name.startswith("events.jsonl.cut-3-") and cut.read_bytes() == before[offset:]
        assert cut.stat().st_mode & 0o777 == 0o600
        report = Ledger(tmp_path).verify("bob")
        assert report.ok and report.events == 4
        after = led.log_path("bob").read_bytes()
        assert after[:offset] == before[:offset]
        note = list(Ledger(tmp_path).events("bob"))[-1]
        assert (note.seq, note.role) == (3, "system")
        assert note.meta == {
            "repair": {"v": 1, "cut_from_seq": 3, "lines": 5, "sha256": hashlib.sha256(before[offset:]).hexdigest(), "file": cut.name}
        }
        assert "moved 5 lines from line 4 (seq 3) on" in out and "ok  bob: 4 events" in out
        assert main(["verify", str(tmp_path), "bob"]) == 0
        assert Ledger(tmp_path).append("bob", "user", "and life goes on").seq == 4

    def test_a_smaller_seq_cuts_more(self, tmp_path: Path, broken: tuple[Ledger, bytes]) -> None:
        led, before = broken
        assert main(["repair", str(tmp_path), "bob", "--truncate-at", "1", "--json"]) == 0
        (cut,) = cut_files(led, "bob")
        assert cut.read_bytes() == before[len(before.split(b"\n")[0]) + 1 :]
        assert Ledger(tmp_path).verify("bob").events == 2

    def test_cutting_everything_leaves_only_the_note(self, tmp_path: Path, broken: tuple[Ledger, bytes]) -> None:
        led, before = broken
        assert main(["repair", str(tmp_path), "bob", "--truncate-at", "0"]) == 0
        assert cut_files(led, "bob")[0].read_bytes() == before
        assert [e.role for e in Ledger(tmp_path).events("bob")] == ["system"]

    @pytest.mark.parametrize(("seq", "says"), [("4", "the largest seq to cut from is 3"), ("7", "past the first break"), ("-1", "an integer ≥ 0")])
    def test_a_seq_past_the_break_or_negative_is_refused_and_nothing_changes(
        self, tmp_path: Path, broken: tuple[Ledger, bytes], capsys: pytest.CaptureFixture[str], seq: str, says: str
    ) -> None:
        led, before = broken
        assert main(["repair", str(tmp_path), "bob", "--truncate-at", seq]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and says in err and "nothing was changed" in err
        assert led.log_path("bob").read_bytes() == before and not cut_files(led, "bob")

    def test_a_prefix_that_does_not_verify_on_its_own_is_refused(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        led = make(tmp_path, "bob", 5)
        led.erase("bob", [1])  # line 2 erased; its record is the last line (seq 5)
        edit_line(led, "bob", 6, b'"role":"system"', b'"role":"tool"')  # the record broken: the chain breaks at line 6
        brk = Ledger(tmp_path).verify("bob").brk
        assert brk is not None and brk.line == 6
        before = led.log_path("bob").read_bytes()
        assert main(["repair", str(tmp_path), "bob", "--truncate-at", "5"]) == 2
        err = capsys.readouterr().err
        assert "before seq 5 does not verify on its own" in err and "cut from an earlier seq" in err
        assert led.log_path("bob").read_bytes() == before
        assert main(["repair", str(tmp_path), "bob", "--truncate-at", "1"]) == 0
        assert Ledger(tmp_path).verify("bob").ok

    def test_the_repair_waits_for_the_writers_lock(self, tmp_path: Path, broken: tuple[Ledger, bytes]) -> None:
        led, before = broken
        fd = os.open(led.session_dir("bob") / "lock", os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)  # a writer (another process, as far as flock can tell) is appending
        done: list[int] = []
        worker = threading.Thread(target=lambda: done.append(main(["repair", str(tmp_path), "bob", "--truncate-at", "3"])))
        try:
            worker.start()
            worker.join(0.5)
            assert worker.is_alive() and led.log_path("bob").read_bytes() == before and not cut_files(led, "bob")
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        worker.join(30)
        assert done == [0] and Ledger(tmp_path).verify("bob").ok


class TestDerivedData:
    def test_after_a_repair_the_index_tree_and_checkpoint_follow_the_ledger_and_old_receipts_fail(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        for name in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR"):
            monkeypatch.delenv(name, raising=False)
        data = tmp_path / "data"
        engine = Engine(data)
        engine.remember("alice", "my kayak is red")
        engine.remember("alice", "I paddle on Sundays")
        engine.remember("alice", "the zebra lives in Lisbon")
        old = engine.turn("alice", "where does the zebra live?", k=3)  # seqs 3, 4; cites seq 2
        engine.index.close()
        led = Ledger(data)
        edit_line(led, "alice", 3, b"zebra lives", b"zebra lived")
        assert main(["repair", str(data), "alice", "--truncate-at", "2"]) == 0
        out = capsys.readouterr().out
        assert "dropped the Merkle tree" in out and "signed a checkpoint of 3 events" in out and "re-indexed the session" in out
        report = Ledger(data).verify("alice")
        cp = checkpoints_files.latest(data, "alice")
        assert cp is not None and (cp["body"]["tree_size"], cp["body"]["chain_head"]) == (3, report.head)
        fresh = Engine(data)
        assert all("zebra" not in h.text for h in fresh.index.search("alice", "zebra", k=5).results)
        verdict = verify_bytes(old.receipt_path.read_bytes(), trusted=[fresh.key.public_key], data_dir=data)
        assert verdict.verdict == "failed"
        turn = fresh.turn("alice", "what colour is my kayak?", k=3)
        again = verify_bytes(turn.receipt_path.read_bytes(), trusted=[fresh.key.public_key], data_dir=data)
        assert again.verdict == "verified", [c.to_dict() for c in again.failed]
