"""The ledger store: append, iterate, verify, bad input, torn tails, corruption, vectors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger import verify_stream
from ledger.corrupted import LedgerCorrupted
from ledger.event import GENESIS, MAX_TEXT_BYTES, EventError, make_event
from ledger.messages import ImportError_, Message
from storage.files.ledger.store import Ledger

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "tests" / "vectors"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ledger", *args], capture_output=True, text=True, cwd=ROOT, timeout=60)


class TestAppendAndRead:
    def test_appended_events_come_back_in_order_and_verify(self, tmp_path: Path) -> None:
        led = Ledger(tmp_path)
        written = [led.append("s1", "user" if i % 2 == 0 else "assistant", f"message {i}", {"i": i}) for i in range(10)]
        read = list(led.events("s1"))
        assert [e.seq for e in read] == list(range(10))
        assert [e.digest for e in read] == [e.digest for e in written]
        report = led.verify("s1")
        assert report.ok and report.events == 10 and report.head == written[-1].chain

    def test_first_event_links_to_genesis(self, tmp_path: Path) -> None:
        ev = Ledger(tmp_path).append("s1", "user", "hi")
        assert ev.prev == GENESIS.hex() and ev.seq == 0

    def test_a_new_ledger_object_continues_the_same_chain(self, tmp_path: Path) -> None:
        a = Ledger(tmp_path).append("s1", "user", "one")
        b = Ledger(tmp_path).append("s1", "user", "two")
        assert b.seq == 1 and b.prev == a.chain

    def test_sessions_are_independent_chains(self, tmp_path: Path) -> None:
        led = Ledger(tmp_path)
        led.append("a", "user", "x")
        ev = led.append("b", "user", "x")
        assert ev.seq == 0 and led.sessions() == ["a", "b"]

    def test_report_has_no_truth_value(self, tmp_path: Path) -> None:
        led = Ledger(tmp_path)
        led.append("s1", "user", "x")
        with pytest.raises(TypeError):
            bool(led.verify("s1"))

    def test_iterating_with_start_seq_skips_earlier_events(self, tmp_path: Path) -> None:
        led = Ledger(tmp_path)
        led.append_many("s1", [Message("user", str(i), {}) for i in range(5)])
        assert [e.seq for e in led.events("s1", start_seq=3)] == [3, 4]


class TestBadInput:
    @pytest.mark.parametrize(
        "session", ["../x", "..", "", "a/b", "a\\b", "x" * 65, "é", "a b", "a\x00b", "/etc", "s.1", "~root"]
    )
    def test_hostile_session_id_is_refused_and_touches_no_file(self, tmp_path: Path, session: str) -> None:
        led = Ledger(tmp_path / "data")
        with pytest.raises(EventError, match="session id"):
            led.append(session, "user", "hi")
        assert not (tmp_path / "data").exists()
        assert sorted(p.name for p in tmp_path.iterdir()) == []

    @pytest.mark.parametrize("meta", [[1, 2], "meta", 3, True])
    def test_non_object_meta_is_refused(self, tmp_path: Path, meta: object) -> None:
        with pytest.raises(EventError, match="meta: must be a JSON object"):
            Ledger(tmp_path).append("s1", "user", "hi", meta)  # type: ignore[arg-type]

    @pytest.mark.parametrize("meta", [{"x": float("nan")}, {"x": 1.5}, {"x": 2**60}, {"é": 1}])
    def test_out_of_domain_meta_is_refused_at_append_time(self, tmp_path: Path, meta: dict[str, object]) -> None:
        with pytest.raises(EventError):
            Ledger(tmp_path).append("s1", "user", "hi", meta)
        assert not Ledger(tmp_path).exists("s1")

    def test_text_over_the_limit_is_refused_and_at_the_limit_accepted(self, tmp_path: Path) -> None:
        led = Ledger(tmp_path)
        with pytest.raises(EventError, match="over the limit"):
            led.append("s1", "user", "x" * (MAX_TEXT_BYTES + 1))
        assert led.append("s1", "user", "x" * MAX_TEXT_BYTES).seq == 0

    def test_unknown_role_and_non_string_text_are_refused(self, tmp_path: Path) -> None:
        led = Ledger(tmp_path)
        with pytest.raises(EventError, match="role"):
            led.append("s1", "admin", "hi")
        with pytest.raises(EventError, match="text"):
            led.append("s1", "user", 5)  # type: ignore[arg-type]

    def test_lone_surrogate_text_is_refused(self, tmp_path: Path) -> None:
        with pytest.raises(EventError, match="surrogate"):
            Ledger(tmp_path).append("s1", "user", "bad \udc80")

    def test_timestamp_without_timezone_is_refused(self, tmp_path: Path) -> None:
        with pytest.raises(EventError, match="timezone"):
            Ledger(tmp_path).append("s1", "user", "hi", ts="2024-01-01T00:00:00")

    def test_timestamp_is_normalized_to_utc(self, tmp_path: Path) -> None:
        ev = Ledger(tmp_path).append("s1", "user", "hi", ts="2024-01-01T02:00:00+02:00")
        assert ev.ts == "2024-01-01T00:00:00.000000Z"


class TestImport:
    def _write(self, path: Path, lines: list[bytes]) -> Path:
        path.write_bytes(b"".join(line + b"\n" for line in lines))
        return path

    def test_one_bad_line_rejects_the_whole_import_naming_it(self, tmp_path: Path) -> None:
        src = self._write(tmp_path / "in.jsonl", [b'{"role":"user","text":"a"}', b'{"role":"user"}', b'{"role":"user","text":"c"}'])
        proc = run_cli("import", "--create", str(tmp_path / "d"), "s1", str(src))
        assert proc.returncode == 2 and "line 2" in proc.stderr and "nothing was imported" in proc.stderr
        assert not Ledger(tmp_path / "d").exists("s1")

    def test_invalid_utf8_in_import_is_refused_with_line_number(self, tmp_path: Path) -> None:
        src = self._write(tmp_path / "in.jsonl", [b'{"role":"user","text":"a"}', b'{"role":"user","text":"\xff\xfe"}'])
        with pytest.raises(ImportError_) as err:
            Ledger(tmp_path / "d").import_jsonl("s1", src.open("rb"))
        assert err.value.line == 2 and "UTF-8" in str(err.value)

    def test_empty_import_file_is_refused(self, tmp_path: Path) -> None:
        src = tmp_path / "empty.jsonl"
        src.write_bytes(b"")
        proc = run_cli("import", "--create", str(tmp_path / "d"), "s1", str(src))
        assert proc.returncode == 2 and "no messages" in proc.stderr

    def test_duplicate_keys_and_unknown_fields_are_refused(self, tmp_path: Path) -> None:
        for bad in (b'{"role":"user","text":"a","text":"b"}', b'{"role":"user","text":"a","extra":1}', b"[1]", b'{"role":"user","text":"a","meta":{"f":0.5}}'):
            with pytest.raises(ImportError_) as err:
                Ledger(tmp_path / "d").import_jsonl("s1", [bad])
            assert err.value.line == 1

    def test_import_cli_appends_all_and_prints_a_summary(self, tmp_path: Path) -> None:
        lines = [json.dumps({"role": "user", "text": f"t{i}", "ts": "2023-05-08T13:56:00Z"}).encode() for i in range(50)]
        src = self._write(tmp_path / "in.jsonl", lines)
        proc = run_cli("import", "--create", str(tmp_path / "d"), "s1", str(src))
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("imported 50 events into session s1")
        events = list(Ledger(tmp_path / "d").events("s1"))
        assert len(events) == 50 and events[0].ts == "2023-05-08T13:56:00.000000Z"


class TestTornTailAndCorruption:
    def test_torn_tail_is_quarantined_not_dropped(self, tmp_path: Path) -> None:
        led = Ledger(tmp_path)
        for i in range(3):
            led.append("s1", "user", f"m{i}")
        log = led.log_path("s1")
        torn = b'{"v":1,"session":"s1","seq":3,"te'
        with open(log, "ab") as f:
            f.write(torn)
        fresh = Ledger(tmp_path)
        assert fresh.head("s1")[0] == 3
        assert len(fresh.quarantined) == 1
        q = Path(fresh.quarantined[0].path)
        assert q.read_bytes() == torn and q.parent == log.parent
        assert fresh.append("s1", "user", "after").seq == 3
        report = fresh.verify("s1")
        assert report.ok and report.quarantined == (str(q),)

    def test_unparsable_last_line_with_newline_is_quarantined(self, tmp_path: Path) -> None:
        led = Ledger(tmp_path)
        led.append("s1", "user", "m0")
        with open(led.log_path("s1"), "ab") as f:
            f.write(b"\x00\x00\x00\n")
        fresh = Ledger(tmp_path)
        assert fresh.append("s1", "user", "m1").seq == 1 and len(fresh.quarantined) == 1

    def test_bad_line_in_the_middle_refuses_appends(self, tmp_path: Path) -> None:
        led = Ledger(tmp_path)
        for i in range(4):
            led.append("s1", "user", f"m{i}")
        log = led.log_path("s1")
        lines = log.read_bytes().split(b"\n")
        lines[1] = lines[1].replace(b"m1", b"M1")
        log.write_bytes(b"\n".join(lines))
        fresh = Ledger(tmp_path)
        with pytest.raises(LedgerCorrupted, match="line 2"):
            fresh.append("s1", "user", "more")
        assert log.read_bytes().count(b"\n") == 4  # nothing appended
        report = fresh.verify("s1")
        assert not report.ok and report.brk is not None and report.brk.line == 2 and report.brk.kind == "digest_mismatch"

    def test_lines_appended_by_another_writer_are_checked_incrementally(self, tmp_path: Path) -> None:
        a, b = Ledger(tmp_path), Ledger(tmp_path)
        a.append("s1", "user", "from a")
        b.append("s1", "user", "from b")
        ev = a.append("s1", "user", "from a again")
        assert ev.seq == 2 and a.verify("s1").ok


class TestVerifyCli:
    def test_verify_exit_codes(self, tmp_path: Path) -> None:
        led = Ledger(tmp_path)
        led.append("good", "user", "x")
        led.append("bad", "user", "x")
        led.append("bad", "user", "y")
        log = led.log_path("bad")
        log.write_bytes(log.read_bytes().replace(b'"y"', b'"z"'))
        assert run_cli("verify", str(tmp_path), "good").returncode == 0
        proc = run_cli("verify", str(tmp_path))
        assert proc.returncode == 1 and "BROKEN  bad: line 2, seq 1, digest_mismatch" in proc.stdout
        js = json.loads(run_cli("verify", str(tmp_path), "--json").stdout)
        assert js["ok"] is False and {s["session"]: s["ok"] for s in js["sessions"]} == {"bad": False, "good": True}
        assert run_cli("verify", str(tmp_path / "missing")).returncode == 2
        assert run_cli("verify", str(tmp_path), "nope").returncode == 2
        proc = run_cli("verify", str(tmp_path), "../etc")
        assert proc.returncode == 2 and "Traceback" not in proc.stderr


class TestVectors:
    def test_code_reproduces_the_committed_vectors(self) -> None:
        data = json.loads((VECTORS / "ledger_v1.json").read_text(encoding="utf-8"))
        assert data["format"] == 1 and len(data["vectors"]) >= 4
        for vec in data["vectors"]:
            inp = vec["input"]
            ev = make_event(
                session=inp["session"], seq=inp["seq"], prev=bytes.fromhex(inp["prev"]), role=inp["role"],
                text=inp["text"], meta=inp["meta"], ts=inp["ts"], event_id=inp["id"], salt=bytes.fromhex(inp["salt"]),
            )
            assert ev.digest == vec["digest"] and ev.chain == vec["chain"]
            assert ev.to_line().decode("utf-8") == vec["line"]

    def test_committed_vector_session_verifies(self) -> None:
        raw = (VECTORS / "ledger_v1_session.jsonl").read_bytes()
        report = verify_stream("vector-session_1", [raw])
        assert report.ok and report.events == 4


def test_private_files_are_not_world_writable(tmp_path: Path) -> None:
    led = Ledger(tmp_path)
    led.append("s1", "user", "x")
    assert not os.stat(led.log_path("s1")).st_mode & 0o002


class TestDescriptors:
    def test_open_descriptors_stay_bounded_with_many_sessions(self, tmp_path: Path) -> None:
        from storage.files.ledger.store import MAX_OPEN_SESSIONS

        led = Ledger(tmp_path)
        for i in range(MAX_OPEN_SESSIONS + 40):
            led.append(f"s{i}", "user", "hi")
        assert led.open_descriptors() <= 2 * MAX_OPEN_SESSIONS
        # an evicted session still appends and verifies
        assert led.append("s0", "user", "again").seq == 1 and led.verify("s0").ok

    def test_forget_drops_caches_and_the_session_can_be_recreated(self, tmp_path: Path) -> None:
        import shutil

        led = Ledger(tmp_path)
        led.append("gone", "user", "one")
        led.append("gone", "user", "two")
        led.forget("gone")
        shutil.rmtree(led.session_dir("gone"))
        ev = led.append("gone", "user", "fresh start")
        assert ev.seq == 0 and led.verify("gone").ok
