"""Ledger.erase: one durable transaction that leaves the chain intact and the words gone (issue 10 E1)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledger.chunks
import storage.files.ledger.rewrite
from ledger.corrupted import LedgerCorrupted
from ledger.erasing import EraseError
from ledger.event import is_erasure_record, make_event
from ledger.verify import ChainWalker
from receipts.merkle import leaf_hash, root_from_leaf_hashes
from storage.files.ledger.store import Ledger
from storage.files.receipts.audit import Auditor

ROOT = Path(__file__).resolve().parents[2]
S = "alice"


def filled(tmp_path: Path, n: int = 12) -> Ledger:
    led = Ledger(tmp_path)
    for i in range(n):
        led.append(S, "user" if i % 2 == 0 else "assistant", f"message {i} about marker{i}word", {"n": i})
    return led


def raw(led: Ledger) -> bytes:
    return led.log_path(S).read_bytes()


def assert_tail_matches_file(led: Ledger) -> None:
    """What this writer caches (offsets by seq) is the file: every event read by seq is the one stored there."""
    stored = [orjson.loads(line) for line in raw(led).splitlines()]
    count, head = led.head(S)
    assert count == len(stored) and head == stored[-1]["chain"]
    assert [e.to_dict() for e in led.read_events(S, range(count))] == stored


class TestErase:
    def test_the_erased_lines_lose_their_words_and_keep_every_hash(self, tmp_path: Path) -> None:
        led = filled(tmp_path)
        before = {e.seq: e for e in led.events(S)}
        done = led.erase(S, [5, 2], reason="asked to forget")
        assert [e.seq for e in done.erased] == [2, 5] and all(e.erased for e in done.erased)
        data = raw(led)
        assert b"marker2word" not in data and b"marker5word" not in data and b"marker3word" in data
        after = {e.seq: e for e in led.events(S)}
        for seq, ev in before.items():
            assert (after[seq].digest, after[seq].chain, after[seq].prev, after[seq].id) == (ev.digest, ev.chain, ev.prev, ev.id)
            assert after[seq].erased == (seq in (2, 5))
        report = led.verify(S, parallel=False)
        assert report.ok and report.events == 13 and report.erased == (2, 5)

    def test_the_erasure_record_lists_what_went_and_never_the_words(self, tmp_path: Path) -> None:
        led = filled(tmp_path)
        done = led.erase(S, [3], reason="privacy")
        rec = done.record
        assert rec.seq == 12 and rec.role == "system" and is_erasure_record(rec)
        assert rec.text == "[erasure record: 1 event(s) erased]"
        e = done.erased[0]
        assert rec.meta == {"erasure": {"v": 1, "erased": [{"seq": 3, "id": e.id, "digest": e.digest, "commit": e.commit}], "reason": "privacy"}}
        assert b"marker3word" not in rec.to_line()
        assert list(led.events(S, 12))[0].to_line() == rec.to_line()

    def test_this_writer_appends_on_after_an_erasure_and_its_offsets_are_right(self, tmp_path: Path) -> None:
        led = filled(tmp_path)
        led.erase(S, [0, 7])
        assert_tail_matches_file(led)
        ev = led.append(S, "user", "next")
        assert ev.seq == 13
        assert_tail_matches_file(led)
        assert led.verify(S).ok

    def test_another_writer_notices_the_replaced_file_and_appends_without_a_fork(self, tmp_path: Path) -> None:
        led = filled(tmp_path)
        other = Ledger(tmp_path)  # holds its own tail, as another process would
        other.append(S, "user", "from the other writer")
        led.erase(S, [4])
        ev = other.append(S, "user", "the other writer again")
        assert ev.seq == 14 and ev.prev == list(led.events(S, 13))[0].chain
        assert_tail_matches_file(other)
        led.append(S, "user", "and the first")
        report = led.verify(S, parallel=False)
        assert report.ok and report.events == 16 and report.erased == (4,)

    def test_another_writer_re_walks_only_the_changed_chunk(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(ledger.chunks, "CHUNK_LINES", 4)
        led = filled(tmp_path, 14)
        other = Ledger(tmp_path)
        other.head(S)
        led.erase(S, [9])  # chunk of lines 9-12
        steps = []
        real_step = ChainWalker.step

        def counting(self: ChainWalker, raw: bytes, *, last: bool = False) -> object:
            steps.append(self.line_no)
            return real_step(self, raw, last=last)

        monkeypatch.setattr(ChainWalker, "step", counting)
        assert other.append(S, "user", "x").seq == 15
        # line_no before each step (0-based): the changed chunk (lines 9-12) and the new record (line 15);
        # lines 13-14 re-hashed equal at their new offset and were taken as they were
        assert steps == [8, 9, 10, 11, 14]
        monkeypatch.undo()
        assert_tail_matches_file(other)

    @pytest.mark.parametrize("read", ["events", "read_events"])
    def test_a_reader_keeps_the_file_it_looked_at_when_another_process_erases_right_after(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read: str
    ) -> None:
        led = filled(tmp_path)
        reader = Ledger(tmp_path)
        reader.head(S)
        before = [e.to_dict() for e in reader.events(S)]
        real = Ledger._locked
        fired = []

        @contextlib.contextmanager
        def locked_then_erased(self: Ledger, session: str, create: bool) -> Iterator[Path]:
            with real(self, session, create) as sdir:
                yield sdir
            if self is reader and not fired:  # the moment the reader lets go of the lock, the file is replaced
                fired.append(led.erase(S, [0, 1]))

        monkeypatch.setattr(Ledger, "_locked", locked_then_erased)
        got = list(reader.events(S)) if read == "events" else reader.read_events(S, range(12))
        assert fired and [e.to_dict() for e in got] == before  # the file it looked at, read whole and right
        monkeypatch.undo()
        assert [e.seq for e in reader.events(S) if e.erased] == [0, 1]  # the next read sees the erasure

    def test_the_auditor_re_walks_an_erased_ledger_from_the_erased_lines_chunk_not_genesis(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(ledger.chunks, "CHUNK_LINES", 4)
        led = filled(tmp_path, 14)
        with Auditor(tmp_path).facts(S) as facts:
            assert facts.verified == 14 and facts.rewalked_from_line == 1
        led.erase(S, [10])  # line 11: in the chunk of lines 9-12
        with Auditor(tmp_path).facts(S) as facts:
            assert facts.first_break is None and facts.verified == 15 and facts.erased == (10,)
            assert (facts.changed_from_line, facts.cached_lines, facts.rewalked_from_line) == (9, 10, 15)
            assert "(lines 9–12); 2 lines after them re-hashed equal" in "; ".join(facts.notes)
            assert facts.event_at(10)["commit"] == list(led.events(S, 10))[0].commit

    def test_a_replaced_file_with_a_different_history_is_still_refused(self, tmp_path: Path) -> None:
        led = filled(tmp_path)
        lines = raw(led).splitlines(keepends=True)
        old = orjson.loads(lines[5])
        forged = make_event(
            session=S, seq=5, prev=bytes.fromhex(old["prev"]), role=old["role"], text="rewritten", meta={},
            ts=old["ts"], event_id=old["id"], salt=bytes(32),
        )
        tmp = led.log_path(S).with_name("x")
        tmp.write_bytes(b"".join(lines[:5]) + forged.to_line())  # a new file (new inode), one line rewritten
        os.replace(tmp, led.log_path(S))
        with pytest.raises(LedgerCorrupted, match=r"line 6 \(seq 5\) changed after this writer verified it"):
            led.append(S, "user", "x")

    @pytest.mark.parametrize("chunk_lines", [4, 1 << 16])
    def test_a_replaced_file_with_a_rewritten_and_rechained_history_is_refused(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk_lines: int
    ) -> None:
        monkeypatch.setattr(ledger.chunks, "CHUNK_LINES", chunk_lines)
        led = filled(tmp_path, 14)
        lines = raw(led).splitlines(keepends=True)
        prev = bytes.fromhex(orjson.loads(lines[4])["chain"])
        forged = []
        for line in lines[5:]:  # every line from seq 5 on rewritten and chained again: a valid, different history
            old = orjson.loads(line)
            ev = make_event(
                session=S, seq=old["seq"], prev=prev, role=old["role"], text=old["text"].upper(), meta=old["meta"],
                ts=old["ts"], event_id=old["id"], salt=bytes.fromhex(old["salt"]),
            )
            forged.append(ev.to_line())
            prev = bytes.fromhex(ev.chain)
        tmp = led.log_path(S).with_name("x")
        tmp.write_bytes(b"".join(lines[:5] + forged))
        os.replace(tmp, led.log_path(S))
        assert Ledger(tmp_path).verify(S, parallel=False).ok  # on its own it verifies
        with pytest.raises(LedgerCorrupted, match=r"line 6 \(seq 5\) changed after this writer verified it"):
            led.append(S, "user", "x")

    @pytest.mark.parametrize(
        "seqs, message",
        [
            ([12], r"no event at seq 12 \(it holds 12\)"),
            ([-1], "not a non-negative integer"),
            ([True], "not a non-negative integer"),
            (["3"], "not a non-negative integer"),
            ([], "no seq to erase"),
            (list(range(10_001)), "10001 events in one erasure; at most 10,000"),
        ],
        ids=["out-of-range", "negative", "bool", "string", "empty", "too-many"],
    )
    def test_a_bad_seq_is_one_line_and_changes_nothing(self, tmp_path: Path, seqs: list[object], message: str) -> None:
        led = filled(tmp_path)
        before = raw(led)
        with pytest.raises(EraseError, match=message) as err:
            led.erase(S, seqs)  # type: ignore[arg-type]
        assert "\n" not in str(err.value) and str(err.value).startswith(f"session {S}: ")
        assert raw(led) == before

    def test_an_unknown_session_already_erased_seq_and_erasure_record_are_refused(self, tmp_path: Path) -> None:
        led = filled(tmp_path)
        with pytest.raises(EraseError, match="session nobody: no such session"):
            led.erase("nobody", [0])
        with pytest.raises(EraseError, match="session id '../x'"):
            led.erase("../x", [0])
        led.erase(S, [1])
        before = raw(led)
        with pytest.raises(EraseError, match="seq 1 is already erased"):
            led.erase(S, [1, 2])
        with pytest.raises(EraseError, match="seq 12 is an erasure record"):
            led.erase(S, [12])
        with pytest.raises(EraseError, match="reason must be a string"):
            led.erase(S, [2], reason=5)  # type: ignore[arg-type]
        assert raw(led) == before
        assert not storage.files.ledger.rewrite.temp_path(led.log_path(S)).exists()

    def test_erasing_a_corrupted_ledger_is_refused(self, tmp_path: Path) -> None:
        led = filled(tmp_path)
        path = led.log_path(S)
        data = raw(led).replace(b"marker3word", b"marker3WORD")
        path.write_bytes(data)
        with pytest.raises(LedgerCorrupted):
            Ledger(tmp_path).erase(S, [5])
        assert raw(led) == data


CRASHER = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
import storage.files.ledger.rewrite
from storage.files.ledger.store import Ledger
step = sys.argv[3]
def hook(name):
    if name == step:
        os.kill(os.getpid(), signal.SIGKILL)
storage.files.ledger.rewrite.step_hook = hook
Ledger(sys.argv[2]).erase("alice", [2, 6], reason="crash test")
print("survived")
"""


class TestCrashes:
    @pytest.mark.parametrize(
        "step, new", [("written", False), ("synced", False), ("renamed", True), ("dir_synced", True)]
    )
    def test_a_kill_at_any_step_leaves_the_old_file_or_the_new_one(self, tmp_path: Path, step: str, new: bool) -> None:
        led = filled(tmp_path)
        old = raw(led)
        child = subprocess.run([sys.executable, "-c", CRASHER, str(ROOT), str(tmp_path), step], capture_output=True, text=True, timeout=60)
        assert child.returncode == -signal.SIGKILL, child.stderr
        data = raw(led)
        leftover = storage.files.ledger.rewrite.temp_path(led.log_path(S))
        assert leftover.exists() == (not new)
        fresh = Ledger(tmp_path)  # a restart
        fresh.head(S)
        assert not leftover.exists()  # the crashed erasure's temp file is garbage: removed on open, under the lock
        report = fresh.verify(S, parallel=False)
        assert report.ok, report.brk
        if new:
            assert report.erased == (2, 6) and report.events == 13
            assert b"marker2word" not in data and b"marker6word" not in data
        else:
            assert data == old and report.erased == ()
        ev = fresh.append(S, "user", "after the restart")
        assert ev.seq == report.events
        done = fresh.erase(S, [8])  # a later erasure works, and leaves no temp file behind
        assert done.record.seq == report.events + 1
        assert not storage.files.ledger.rewrite.temp_path(fresh.log_path(S)).exists()
        assert fresh.verify(S, parallel=False).ok
        assert led.append(S, "user", "the writer from before the crash").seq == report.events + 2


APPENDER = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
from storage.files.ledger.store import Ledger
led = Ledger(sys.argv[2])
i = 0
while not os.path.exists(sys.argv[3]):  # appends until the test says stop: the erasures always overlap them
    ev = led.append("alice", "user", f"appended {i} keepme")
    print(ev.seq, ev.digest, flush=True)
    i += 1
"""


class TestConcurrency:
    def test_appends_in_one_process_while_another_erases_lose_nothing_and_do_not_fork(self, tmp_path: Path) -> None:
        led = filled(tmp_path, 20)
        stop = tmp_path / "stop"
        child = subprocess.Popen([sys.executable, "-c", APPENDER, str(ROOT), str(tmp_path), str(stop)], stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        erased: list[int] = []
        lines: list[str] = []
        for seq in [1, 3, 5, 7, 9, 11, 13, 15]:
            lines += [child.stdout.readline() for _ in range(15)]  # the child is appending right now
            led.erase(S, [seq])
            erased.append(seq)
        lines += [child.stdout.readline() for _ in range(15)]  # and goes on appending after the last erasure
        stop.touch()
        out, _ = child.communicate(timeout=60)
        assert child.returncode == 0
        acked = [line.split() for line in "".join(lines + [out]).splitlines()]
        assert len(acked) >= 15 * 9
        report = led.verify(S, parallel=False)
        assert report.ok, report.brk
        assert report.events == 20 + len(acked) + len(erased) and report.erased == tuple(erased)
        stored = {e.seq: e for e in led.events(S)}
        for seq, digest in acked:
            assert stored[int(seq)].digest == digest  # every acknowledged event is where it was acknowledged
        records = sorted(seq for seq, e in stored.items() if is_erasure_record(e))
        child_seqs = sorted(int(seq) for seq, _ in acked)
        assert len(records) == len(erased)
        assert sum(child_seqs[0] < r < child_seqs[-1] for r in records) == len(erased)  # interleaved with the appends
        data = raw(led)
        assert all(f"marker{s}word".encode() not in data for s in erased)
        assert data.count(b"keepme") == len(acked)


class TestProperty:
    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(ops=st.lists(st.one_of(st.just("append"), st.integers(min_value=0, max_value=40)), min_size=1, max_size=25))
    def test_random_appends_and_erasures_keep_verify_passing_and_the_words_gone(self, tmp_path_factory: pytest.TempPathFactory, ops: list[object]) -> None:
        saved = ledger.chunks.CHUNK_LINES
        ledger.chunks.CHUNK_LINES = 4  # small chunks: the writers' and the auditor's re-walks start mid-file
        try:
            self._run(tmp_path_factory.mktemp("prop"), ops)
        finally:
            ledger.chunks.CHUNK_LINES = saved

    @staticmethod
    def _run(data: Path, ops: list[object]) -> None:
        led = Ledger(data)
        other = Ledger(data)  # a second writer that must keep up with the first one's erasures
        texts: dict[int, str] = {}
        gone: set[int] = set()
        records: set[int] = set()
        for k, op in enumerate(ops):
            writer = led if k % 3 else other
            if op == "append" or not texts:
                ev = writer.append(S, "user", f"secret{len(texts) + len(records)}x")
                texts[ev.seq] = ev.text
                continue
            assert isinstance(op, int)
            seq = op % (len(texts) + len(records))
            if seq in gone or seq in records:
                with pytest.raises(EraseError):
                    writer.erase(S, [seq])
                continue
            done = writer.erase(S, [seq])
            gone.add(seq)
            records.add(done.record.seq)
            with Auditor(data).facts(S) as facts:  # the auditor's cache, warm from the last erasure, agrees
                assert facts.first_break is None, facts.first_break
                assert facts.erased == tuple(sorted(gone)) and facts.verified == len(texts) + len(records)
                events = list(Ledger(data).events(S))
                assert facts.root_at(facts.verified) == root_from_leaf_hashes([leaf_hash(e.leaf_data) for e in events])
                assert [facts.event_at(e.seq) for e in events] == [e.to_dict() for e in events]
        report = Ledger(data).verify(S, parallel=False)
        assert report.ok, report.brk
        assert report.erased == tuple(sorted(gone))
        blob = (data / "sessions" / S / "events.jsonl").read_bytes()
        for seq in gone:
            assert texts[seq].encode() not in blob
        for seq in set(texts) - gone:
            assert texts[seq].encode() in blob
