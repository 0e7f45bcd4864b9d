"""Opening a session costs O(1) in its size: the tail record (issue 15, docs/FORMAT.md §6).

A process that opens a session trusts `tail.json` only when it matches the file's end (stat,
and the last line re-parsed at the recorded offset ending on the recorded chain hash); any
other record is a walk from genesis, which detects corruption exactly as without a record.
Lines parsed are counted at ChainWalker.step, the one place a walk verifies a line.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.corrupted import LedgerCorrupted
from ledger.messages import Message
from ledger.verify import ChainWalker
from storage.files.ledger import reading, tailrecord
from storage.files.ledger.repair_files import truncate_at
from storage.files.ledger.store import RECORD_MIN_LINES, Ledger
from storage.files.ledger.tailrecord import RECORD_FILE

ROOT = Path(__file__).resolve().parents[2]
S = "alice"
N = 1200  # above RECORD_MIN_LINES: smaller sessions are walked on open


class Counter:
    def __init__(self) -> None:
        self.lines = 0


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter]:
    counter = Counter()
    real = ChainWalker.step

    def step(self: ChainWalker, raw: bytes, *, last: bool = False) -> object:
        counter.lines += 1
        return real(self, raw, last=last)

    monkeypatch.setattr(ChainWalker, "step", step)
    yield counter


def _filled(data: Path, n: int = N) -> Ledger:
    led = Ledger(data)
    led.append_many(S, [Message("user" if i % 2 == 0 else "assistant", f"message number {i:05d}", {}) for i in range(n)])
    return led


def _record(data: Path) -> Path:
    return data / "sessions" / S / RECORD_FILE


def _log(data: Path) -> Path:
    return data / "sessions" / S / "events.jsonl"


def _open_fresh(data: Path, counter: Counter) -> tuple[tuple[int, str], int]:
    counter.lines = 0
    head = Ledger(data).head(S)
    return head, counter.lines


def _assert_walked(data: Path, counter: Counter, expected: tuple[int, str]) -> None:
    head, lines = _open_fresh(data, counter)
    assert head == expected and lines >= expected[0]  # the record's one line, then the whole walk


def _error_of(data: Path) -> str:
    with pytest.raises(LedgerCorrupted) as exc:
        Ledger(data).head(S)
    return str(exc.value)


class TestOpenIsConstant:
    def test_open_after_an_append_parses_one_line_not_the_whole_file(self, tmp_path: Path, parsed: Counter) -> None:
        led = _filled(tmp_path)
        expected = led.head(S)
        head, lines = _open_fresh(tmp_path, parsed)
        assert head == expected and lines == 1
        _record(tmp_path).unlink()
        head, lines = _open_fresh(tmp_path, parsed)
        assert head == expected and lines == N  # without a record: the walk, as before

    def test_the_walk_writes_the_record_so_the_next_open_is_constant(self, tmp_path: Path, parsed: Counter) -> None:
        led = _filled(tmp_path)
        _record(tmp_path).unlink()
        assert _open_fresh(tmp_path, parsed)[1] == N
        assert _open_fresh(tmp_path, parsed) == (led.head(S), 1)

    def test_a_readers_ledger_opens_and_reads_without_writing_the_record(self, tmp_path: Path) -> None:
        led = _filled(tmp_path, 5)
        _record(tmp_path).unlink()
        reader = Ledger(tmp_path, record_tails=False)
        assert reader.head(S) == led.head(S)
        assert [e.seq for e in reader.events(S)] == list(range(5)) and reader.read_events(S, [3])[0].seq == 3
        assert not _record(tmp_path).exists()

    def test_a_single_append_after_an_open_from_the_record_keeps_it_constant(self, tmp_path: Path, parsed: Counter) -> None:
        _filled(tmp_path)
        other = Ledger(tmp_path)
        ev = other.append(S, "user", "one more")
        head, lines = _open_fresh(tmp_path, parsed)
        assert head == (N + 1, ev.chain) and lines == 1
        assert Ledger(tmp_path).verify(S).ok

    def test_read_events_on_an_open_from_the_record_reads_by_offset_without_a_walk(self, tmp_path: Path, parsed: Counter) -> None:
        led = _filled(tmp_path)
        want = led.read_events(S, [0, 7, N - 1])
        parsed.lines = 0
        got = Ledger(tmp_path).read_events(S, [0, 7, N - 1])
        assert got == want and parsed.lines == 1


    def test_a_session_below_the_threshold_is_walked_on_open(self, tmp_path: Path, parsed: Counter) -> None:
        led = _filled(tmp_path, RECORD_MIN_LINES - 1)
        assert _open_fresh(tmp_path, parsed) == (led.head(S), RECORD_MIN_LINES - 1)


class TestStaleOrForgedRecordsWalk:
    def test_an_edited_head_walks(self, tmp_path: Path, parsed: Counter) -> None:
        led = _filled(tmp_path)
        rec = json.loads(_record(tmp_path).read_bytes())
        rec["head"] = "0" * 64
        _record(tmp_path).write_text(json.dumps(rec))
        _assert_walked(tmp_path, parsed, led.head(S))

    @pytest.mark.parametrize("shift", [-1, 1, "previous_line"])
    def test_a_wrong_offset_walks(self, tmp_path: Path, parsed: Counter, shift: int | str) -> None:
        led = _filled(tmp_path)
        rec = json.loads(_record(tmp_path).read_bytes())
        if shift == "previous_line":
            data = _log(tmp_path).read_bytes()
            rec["last"] = data.rindex(b"\n", 0, rec["last"] - 1) + 1
        else:
            assert isinstance(shift, int)
            rec["last"] += shift
        _record(tmp_path).write_text(json.dumps(rec))
        _assert_walked(tmp_path, parsed, led.head(S))

    @pytest.mark.parametrize("content", [b"", b"{", b"[]", b'{"v": 2}', b"x" * 10000])
    def test_an_unreadable_record_walks(self, tmp_path: Path, parsed: Counter, content: bytes) -> None:
        led = _filled(tmp_path)
        _record(tmp_path).write_bytes(content)
        _assert_walked(tmp_path, parsed, led.head(S))

    def test_a_file_edited_after_the_record_walks_and_is_named_as_without_a_record(self, tmp_path: Path, parsed: Counter) -> None:
        _filled(tmp_path)
        log = _log(tmp_path)
        data = log.read_bytes()
        st = os.stat(log)
        at = data.index(b"message number 00100")
        log.write_bytes(data[:at] + b"MESSAGE" + data[at + 7 :])  # same size
        os.utime(log, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime restored: ctime still shows
        with_record = _error_of(tmp_path)
        _record(tmp_path).unlink(missing_ok=True)
        assert with_record == _error_of(tmp_path) and "seq 100" in with_record

    def test_a_record_from_another_inode_walks(self, tmp_path: Path, parsed: Counter) -> None:
        expected = _filled(tmp_path).head(S)
        log = _log(tmp_path)
        copy = log.with_name("copy")
        shutil.copy2(log, copy)
        os.replace(copy, log)
        _assert_walked(tmp_path, parsed, expected)

    def test_a_missing_record_walks(self, tmp_path: Path, parsed: Counter) -> None:
        led = _filled(tmp_path)
        _record(tmp_path).unlink()
        _assert_walked(tmp_path, parsed, led.head(S))

    def test_a_truncated_file_walks_and_its_torn_tail_is_quarantined(self, tmp_path: Path, parsed: Counter) -> None:
        _filled(tmp_path)
        log = _log(tmp_path)
        data = log.read_bytes()
        last = data.rindex(b"\n", 0, len(data) - 1) + 1
        os.truncate(log, len(data) - 5)  # the last line torn, as by a crash mid-write
        led = Ledger(tmp_path)
        parsed.lines = 0
        count, _head = led.head(S)
        assert count == N - 1 and parsed.lines == N
        assert [q.offset for q in led.quarantined] == [last]
        assert _open_fresh(tmp_path, parsed)[1] == 1  # the walk recorded the new end

    def test_a_torn_line_after_the_recorded_end_is_quarantined(self, tmp_path: Path, parsed: Counter) -> None:
        led = _filled(tmp_path)
        expected = led.head(S)
        size = _log(tmp_path).stat().st_size
        with open(_log(tmp_path), "ab") as f:
            f.write(b'{"seq": 300, "rol')
        fresh = Ledger(tmp_path)
        assert fresh.head(S) == expected
        assert [q.offset for q in fresh.quarantined] == [size]

    def test_a_line_edited_before_the_end_with_a_matching_forged_record_is_found_by_verify(self, tmp_path: Path) -> None:
        """What an open trusts (the record and the last line) is not what verify proves (the chain)."""
        expected = _filled(tmp_path).head(S)
        log = _log(tmp_path)
        data = log.read_bytes()
        at = data.index(b"message number 00100")
        log.write_bytes(data[:at] + b"MESSAGE" + data[at + 7 :])
        rec = json.loads(_record(tmp_path).read_bytes())
        st = os.stat(log)
        rec.update(ino=st.st_ino, size=st.st_size, mtime_ns=st.st_mtime_ns, ctime_ns=st.st_ctime_ns)
        _record(tmp_path).write_text(json.dumps(rec))
        assert Ledger(tmp_path).head(S) == expected  # the forgery matches the end: trusted for an append
        report = Ledger(tmp_path).verify(S, parallel=False)
        assert not report.ok and report.brk is not None and report.brk.seq == 100


class TestTheRecordFollowsRewrites:
    def test_after_an_erasure_a_fresh_open_is_constant_and_right(self, tmp_path: Path, parsed: Counter) -> None:
        led = _filled(tmp_path)
        erasure = led.erase(S, [3, 50])
        head, lines = _open_fresh(tmp_path, parsed)
        assert head == (N + 1, erasure.record.chain) and lines == 1
        fresh = Ledger(tmp_path)
        assert fresh.read_events(S, [50])[0].erased and fresh.verify(S).ok

    def test_an_erasure_from_an_open_from_the_record_walks_first_and_stays_right(self, tmp_path: Path, parsed: Counter) -> None:
        _filled(tmp_path)
        other = Ledger(tmp_path)
        other.head(S)
        erasure = other.erase(S, [10])
        assert Ledger(tmp_path).head(S) == (N + 1, erasure.record.chain) and Ledger(tmp_path).verify(S).ok

    def test_a_writer_opened_from_the_record_follows_another_process_erasure(self, tmp_path: Path, parsed: Counter) -> None:
        _filled(tmp_path)
        writer = Ledger(tmp_path)
        writer.head(S)
        Ledger(tmp_path).erase(S, [5])
        ev = writer.append(S, "user", "after the erasure")
        assert ev.seq == N + 1 and Ledger(tmp_path).verify(S).ok
        assert _open_fresh(tmp_path, parsed) == ((N + 2, ev.chain), 1)

    def test_after_a_repair_the_next_open_walks_then_records(self, tmp_path: Path, parsed: Counter) -> None:
        led = _filled(tmp_path)
        log = _log(tmp_path)
        data = log.read_bytes()
        at = data.index(b"message number 01100")
        log.write_bytes(data[:at] + b"MESSAGE" + data[at + 7 :])
        cut = truncate_at(Ledger(tmp_path), S, 1100)
        head, lines = _open_fresh(tmp_path, parsed)
        assert head == (1101, cut.head) and lines == 1101
        assert _open_fresh(tmp_path, parsed) == ((1101, cut.head), 1)
        assert led is not None and Ledger(tmp_path).verify(S).ok


class TestOtherWriters:
    def test_a_writer_opened_from_the_record_continues_after_another_writer_appends(self, tmp_path: Path, parsed: Counter) -> None:
        _filled(tmp_path)
        a, b = Ledger(tmp_path), Ledger(tmp_path)
        a.head(S)
        b.append(S, "user", "from b")
        parsed.lines = 0
        ev = a.append(S, "assistant", "from a")
        assert ev.seq == N + 1 and parsed.lines == 2  # the line a ended on, and b's record's last line
        assert Ledger(tmp_path).verify(S).ok and _open_fresh(tmp_path, parsed) == ((N + 2, ev.chain), 1)

    def test_an_append_by_another_process_keeps_the_record_right(self, tmp_path: Path, parsed: Counter) -> None:
        led = _filled(tmp_path)
        led.head(S)
        code = f"from storage.files.ledger.store import Ledger; print(Ledger({str(tmp_path)!r}).append({S!r}, 'user', 'from a child').chain)"
        chain = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()
        assert _open_fresh(tmp_path, parsed) == ((N + 1, chain), 1)
        ev = led.append(S, "assistant", "back in the parent")
        assert ev.prev == chain and Ledger(tmp_path).verify(S).ok

    def test_a_forked_file_put_under_a_writer_opened_from_the_record_is_refused(self, tmp_path: Path) -> None:
        _filled(tmp_path)
        writer = Ledger(tmp_path)
        writer.head(S)
        fork = tmp_path / "fork"
        _filled(fork, N + 1)  # another chain, longer, that verifies on its own
        for name in ("events.jsonl", RECORD_FILE):
            shutil.copy2(fork / "sessions" / S / name, tmp_path / "sessions" / S / (name + ".new"))
            os.replace(tmp_path / "sessions" / S / (name + ".new"), tmp_path / "sessions" / S / name)
        with pytest.raises(LedgerCorrupted, match="prefix_changed"):
            writer.append(S, "user", "on top of the fork")

    def test_a_corrupted_ledger_refuses_appends_with_or_without_a_record(self, tmp_path: Path) -> None:
        _filled(tmp_path)
        log = _log(tmp_path)
        data = log.read_bytes()
        at = data.index(b"message number 00007")
        log.write_bytes(data[:at] + b"MESSAGE" + data[at + 7 :])
        with pytest.raises(LedgerCorrupted, match="seq 7"):
            Ledger(tmp_path).append(S, "user", "refused")
        assert log.read_bytes() == data[:at] + b"MESSAGE" + data[at + 7 :]


class TestReadsWithoutAWalk:
    def test_a_few_reads_after_an_open_from_the_record_bisect_and_never_scan(
        self, tmp_path: Path, parsed: Counter, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        led = _filled(tmp_path, 5000)
        led.erase(S, [1234, 4000])  # erased lines are shorter: the bisection must not care
        seqs = [0, 1, 1233, 1234, 1235, 2500, 4000, 4999, 5000]
        want = led.read_events(S, seqs)

        def no_scan(path: Path, size: int) -> list[int]:
            raise AssertionError("the whole file was scanned")

        monkeypatch.setattr(tailrecord, "line_offsets", no_scan)
        parsed.lines = 0
        got = Ledger(tmp_path).read_events(S, seqs)
        assert [e.to_dict() for e in got] == [e.to_dict() for e in want] and parsed.lines == 1

    def test_every_seq_is_found_by_bisection(self, tmp_path: Path) -> None:
        led = _filled(tmp_path, 2000)
        data = _log(tmp_path).read_bytes()
        starts = [0] + [i + 1 for i, b in enumerate(data) if b == 10][:-1]
        fd = os.open(_log(tmp_path), os.O_RDONLY)
        try:
            spans = [tailrecord.find_line(fd, seq, len(data), starts[-1], 2000) for seq in range(2000)]
        finally:
            os.close(fd)
        assert spans == [(s, e) for s, e in zip(starts, starts[1:] + [len(data)], strict=True)]
        assert led.head(S)[0] == 2000

    def test_every_seq_is_found_by_bisection_among_lines_longer_than_a_page(self, tmp_path: Path) -> None:
        """Lines of 3-9 KiB: a step's first 4 KiB read often holds no newline and the longer read must find it."""
        led = Ledger(tmp_path)
        led.append_many(S, [Message("user", f"{i:05d} " + "word " * (600 + (i * 37) % 1200), {}) for i in range(1100)])
        data = _log(tmp_path).read_bytes()
        starts = [0] + [i + 1 for i, b in enumerate(data) if b == 10][:-1]
        assert max(b - a for a, b in zip(starts, starts[1:], strict=False)) > 8192
        fd = os.open(_log(tmp_path), os.O_RDONLY)
        try:
            spans = [tailrecord.find_line(fd, seq, len(data), starts[-1], 1100) for seq in range(1100)]
        finally:
            os.close(fd)
        assert spans == [(s, e) for s, e in zip(starts, starts[1:] + [len(data)], strict=True)]

    def test_many_reads_scan_once_and_a_range_matches_the_walk(self, tmp_path: Path) -> None:
        led = _filled(tmp_path, 3000)
        want = [e.to_dict() for e in led.read_events(S, range(100, 3000))]
        assert [e.to_dict() for e in Ledger(tmp_path).read_events(S, range(100, 3000))] == want

    def test_an_unknown_seq_is_an_index_error_as_before(self, tmp_path: Path) -> None:
        _filled(tmp_path)
        with pytest.raises(IndexError, match="no event at seq 1200"):
            Ledger(tmp_path).read_events(S, [1200])

    def test_a_bisection_that_finds_nothing_falls_back_to_the_scan(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        led = _filled(tmp_path)
        want = [e.to_dict() for e in led.read_events(S, [5, 600])]
        monkeypatch.setattr(tailrecord, "find_line", lambda *_args: None)
        assert [e.to_dict() for e in Ledger(tmp_path).read_events(S, [5, 600])] == want

    @pytest.mark.parametrize("fresh", [False, True], ids=["offsets-known", "opened-from-the-record"])
    def test_events_from_a_seq_parse_only_the_lines_from_it(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh: bool) -> None:
        """A reader that wants the last few events (a turn's stand-in check, the app's history) seeks to their line:
        by the offsets the writer knows, or by bisection on a tail opened from the record; erased lines change nothing."""
        led = _filled(tmp_path, 3000)
        led.erase(S, [2990])
        want = [e.to_dict() for e in led.events(S) if e.seq >= 2980]
        assert len(want) == 21
        reader = Ledger(tmp_path) if fresh else led
        reader.head(S)
        loads = [0]
        real = reading.orjson.loads

        def counted(raw: bytes) -> object:
            loads[0] += 1
            return real(raw)

        monkeypatch.setattr(reading.orjson, "loads", counted)
        assert [e.to_dict() for e in reader.events(S, start_seq=2980)] == want
        assert loads[0] <= 21 + 16  # its 21 lines (and the few a bisection reads), never the 2,980 before
        end = reader.head(S)[0]  # 3001: the erasure appended its record
        assert list(reader.events(S, start_seq=end)) == [] and list(reader.events(S, start_seq=10**9)) == []

    def test_events_from_a_seq_fall_back_to_reading_from_the_start_when_the_bisection_finds_nothing(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        _filled(tmp_path)
        want = [e.to_dict() for e in Ledger(tmp_path).events(S) if e.seq >= 700]
        monkeypatch.setattr(tailrecord, "find_line", lambda *_args: None)
        assert [e.to_dict() for e in Ledger(tmp_path).events(S, start_seq=700)] == want
