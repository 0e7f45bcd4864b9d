"""Bulk import (issue 15): the encoder writes the reference bytes, the worker processes change nothing.

ledger/bulk.py assembles each line by hand; make_event(...).to_line() (ledger/event.py) is the
reference it must equal. ledger/bulkpool.py runs it in child processes, block by block; with the
same salts and clock, the file is byte for byte the one an import in one process writes, and a
bad line anywhere is refused with its number and nothing appended.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ledger import GENESIS, bulk, bulkpool, importer
from ledger.event import make_event
from ledger.imports import content_hash
from ledger.messages import ImportError_, latest_ts, parse_import
from storage.files.ledger.store import Ledger

NOW = "2026-05-02T12:00:00.000000Z"

ROWS: list[dict[str, Any]] = [
    {"role": "user", "text": "I adopted a cat"},
    {"role": "assistant", "text": "Noted.", "meta": {"z": 1, "a": [1, {"b": None, "c": True}], "k": "x"}},
    {"role": "user", "text": "h\u00e9llo \u2028 \"quoted\" \\ back\tslash \U0001f408", "meta": {"name": "non-ASCII value \u00e9"}},
    {"role": "tool", "text": "1.5 and 12345678901234567", "meta": {"f": "1e21", "deep": [[[[1]]]]}},
    {"role": "user", "text": "said earlier", "ts": "2024-01-01T10:00:00+02:00"},
    {"role": "user", "text": "null meta", "meta": None},
    {"role": "system", "text": "a system line", "meta": {"erasure_like": 1}},
    {"role": "user", "text": "x" * 20_000, "meta": {"big": list(range(50))}},
]


def lines(rows: list[dict[str, Any]], *, spaced: bool = False) -> list[bytes]:
    return [(json.dumps(r) if spaced else json.dumps(r, separators=(",", ":"), ensure_ascii=False)).encode() + b"\n" for r in rows]


def seeded(seed: int = 7) -> Callable[[int], bytes]:
    rnd = random.Random(seed)
    return rnd.randbytes


def reference(rows: list[bytes], ids: bytes, seq0: int = 0, prev: bytes = GENESIS) -> bytes:
    out = b""
    for i, m in enumerate(parse_import(rows, allow_system=True)):
        at = i * bulk.ID_BYTES
        ev = make_event(
            session="s1", seq=seq0 + i, prev=prev, role=m.role, text=m.text, meta=m.meta, ts=m.ts or NOW,
            event_id="evt_" + ids[at + 32 : at + 48].hex(), salt=ids[at : at + 32],
        )
        out += ev.to_line()
        prev = bytes.fromhex(ev.chain)
    return out


class TestEncoder:
    @pytest.mark.parametrize("spaced", [False, True], ids=["compact", "spaced"])
    def test_lines_are_the_reference_bytes(self, spaced: bool) -> None:
        rows = lines(ROWS, spaced=spaced)
        ids = seeded()(len(rows) * bulk.ID_BYTES)
        block = bulk.encode_lines(
            "s1", rows, 1, seq0=0, now=NOW, latest=latest_ts(), allow_system=True, ids=ids, content=False
        )
        assert block.error is None and block.count == len(rows)
        bulk.chain(block, GENESIS)
        assert bytes(block.data) == reference(rows, ids)

    def test_marks_are_the_first_8_bytes_of_each_chain_hash(self) -> None:
        rows = lines(ROWS[:5])
        block = bulk.encode_lines("s1", rows, 1, seq0=0, now=NOW, latest=latest_ts(), allow_system=False, ids=bulk.random_ids(5), content=False)
        bulk.chain(block, GENESIS)
        assert list(block.marks()) == [int.from_bytes(block.head(i)[:8], "big") for i in range(5)]

    def test_seq_and_prev_carry_into_the_line(self) -> None:
        rows = lines(ROWS[:3])
        ids = seeded()(3 * bulk.ID_BYTES)
        prev = hashlib.sha256(b"earlier").digest()
        block = bulk.encode_lines("s1", rows, 1, seq0=10**9, now=NOW, latest=latest_ts(), allow_system=False, ids=ids, content=False)
        bulk.chain(block, prev)
        assert bytes(block.data) == reference(rows, ids, 10**9, prev)

    def test_messages_encode_as_lines_do(self) -> None:
        rows = lines(ROWS)
        ids = seeded()(len(rows) * bulk.ID_BYTES)
        block = bulk.encode_messages("s1", 0, parse_import(rows, allow_system=True), NOW, ids)
        bulk.chain(block, GENESIS)
        assert bytes(block.data) == reference(rows, ids)

    @pytest.mark.parametrize(
        "bad",
        [
            b'{"role":"user","text":"a","text":"b"}', b'{"role":"user","text":"a","extra":1}', b"[1]", b"null", b"{",
            b'{"role":"user","text":"a","meta":{"f":0.5}}', b'{"role":"user","text":"a","meta":{"n\xc3\xa9":1}}',
            b'{"role":"user","text":"a","meta":{"big":9007199254740992}}', b'{"role":"user","text":"  "}',
            b'{"role":"system","text":"a"}', b'{"role":"boss","text":"a"}', b'{"role":"user","text":1}',
            b'{"role":"user","text":"a","meta":[]}', b'{"role":"user","text":"a","ts":"2999-01-01T00:00:00Z"}',
            b'{"role":"user","text":"a","ts":"yesterday"}', b'{"role":"user","text":"\xff"}',
            b'{"role":"user","text":"' + b"x" * 70_000 + b'"}', b'{"role":"user","text":"a","meta":' + b'{"a":' * 40 + b"1" + b"}" * 41,
        ],
    )
    def test_a_refused_line_is_refused_as_parse_import_refuses_it(self, bad: bytes) -> None:
        rows = [b'{"role":"user","text":"fine"}\n', bad + b"\n"]
        clock = datetime(2026, 5, 2, 12, tzinfo=UTC)
        with pytest.raises(ImportError_) as expected:
            parse_import(rows, now=clock)
        block = bulk.encode_lines(
            "s1", rows, 1, seq0=0, now=NOW, latest=latest_ts(clock), allow_system=False, ids=bulk.random_ids(2), content=False
        )
        assert block.error == (expected.value.line, str(expected.value).removeprefix("line 2: "))

    @pytest.mark.parametrize(
        "row",
        [
            b'{"role": "user", "text": "a: b:: c", "meta": {"k:": "v:w", "n": 3}}',
            b'{"role":"user","text":"escaped \\u003a colon","meta":{"a":"\\u003A"}}',
            b'{"role":"user","text":"back\\\\u003a slash"}',
            b'{"meta": {"b": {"c": "x:y"}, "a": [1, "2:3"]}, "text": "nested: meta", "role": "assistant"}',
            b'{"role":"user","text":"[not a record]: fine"}',
            b'{"role":"user","text":"h\\u00e9llo: \\ud83d\\ude00","meta":{}}',
        ],
    )
    def test_a_line_the_fused_check_reads_is_the_reference_bytes(self, row: bytes) -> None:
        rows = [row + b"\n"]
        ids = seeded()(bulk.ID_BYTES)
        block = bulk.encode_lines("s1", rows, 1, seq0=0, now=NOW, latest=latest_ts(), allow_system=False, ids=ids, content=False)
        assert block.error is None
        bulk.chain(block, GENESIS)
        assert bytes(block.data) == reference(rows, ids)

    @pytest.mark.parametrize(
        "bad",
        [
            b'{"role": "user", "text": "a:b", "text": "c"}',  # the dropped member holds the colon
            b'{"role":"user","text":"a","meta":{"k":"x:y","k":"z"}}',
            b'{"role":"user","meta":{"k":1},"text":"a","meta":{"k":1}}',
            b'{"role":"user","role":"user","text":"\\u003a"}',
            b'{"role":"user","text":"a","meta":{"k":{"f":1.5}}}',
            b'{"role":"user","text":"a","meta":{"k":[9007199254740993]}}',
        ],
    )
    def test_a_duplicate_or_a_float_the_fused_check_meets_is_refused_as_parse_import_refuses_it(self, bad: bytes) -> None:
        rows = [bad + b"\n"]
        with pytest.raises(ImportError_) as expected:
            parse_import(rows)
        block = bulk.encode_lines("s1", rows, 1, seq0=0, now=NOW, latest=latest_ts(), allow_system=False, ids=bulk.random_ids(1), content=False)
        assert block.error == (expected.value.line, str(expected.value).removeprefix("line 1: "))

    def test_the_content_hash_is_the_import_records(self) -> None:
        rows = lines(ROWS)
        block = bulk.encode_lines(
            "s1", rows, 1, seq0=0, now=NOW, latest=latest_ts(), allow_system=True, ids=bulk.random_ids(len(rows)), content=True
        )
        assert block.content is not None
        assert hashlib.sha256(importer.TAG_IMPORT + bytes(block.content)).hexdigest() == content_hash(parse_import(rows, allow_system=True))


class TestRefusals:
    @pytest.mark.parametrize("line", [b'{"role":[],"text":"x"}\n', b'{"role": {"a": 1}, "text": "x"}\n'], ids=["compact", "spaced"])
    def test_a_role_that_is_not_a_string_is_refused_naming_the_line(self, tmp_path: Path, line: bytes) -> None:
        with pytest.raises(ImportError_, match="line 2: role .*must be one of"):
            Ledger(tmp_path / "d").import_jsonl("s1", [b'{"role": "user", "text": "hi"}\n', line])
        assert not Ledger(tmp_path / "d").exists("s1")

    def test_a_duplicate_key_in_a_spaced_line_is_refused_naming_it(self, tmp_path: Path) -> None:
        with pytest.raises(ImportError_, match="line 1: .*duplicate key 'text'"):
            Ledger(tmp_path / "d").import_jsonl("s1", [b'{"role": "user", "text": "a", "text": "b: c"}\n'])


@pytest.fixture
def fixed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Salts from a seeded stream and a fixed clock: two imports of the same file write the same bytes."""
    monkeypatch.setattr(importer, "now_ts", lambda: NOW)
    yield


def import_file(data: Path, rows: list[bytes], workers: int, **kw: Any) -> bytes:
    bulk.random_bytes = seeded()
    try:
        Ledger(data).import_jsonl("s1", rows, workers=workers, **kw)
    finally:
        bulk.random_bytes = os.urandom
    return (data / "sessions" / "s1" / "events.jsonl").read_bytes()


def many(n: int) -> list[bytes]:
    return lines([{"role": "user" if i % 2 else "assistant", "text": f"message {i} \u00e9", "meta": {"i": i}} for i in range(n)])


@pytest.mark.usefixtures("fixed")
class TestWorkers:
    @pytest.fixture(autouse=True)
    def _small_blocks(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(importer, "BLOCK_LINES", 7)

    def test_workers_write_the_bytes_one_process_writes(self, tmp_path: Path) -> None:
        rows = many(60) + lines(ROWS[:6]) + lines(ROWS[:6], spaced=True)
        serial = import_file(tmp_path / "a", rows, 0)
        assert import_file(tmp_path / "b", rows, 2) == serial
        assert import_file(tmp_path / "c", rows, 3) == serial
        assert import_file(tmp_path / "e", rows, 1) == serial
        report = Ledger(tmp_path / "b").verify("s1")
        assert report.ok and report.events == len(rows)

    def test_a_bad_line_in_a_later_block_is_named_and_nothing_is_appended(self, tmp_path: Path) -> None:
        rows = many(40)
        rows[33] = b'{"role":"user","text":"a","text":"b"}\n'
        with pytest.raises(ImportError_) as err:
            import_file(tmp_path / "d", rows, 2)
        assert err.value.line == 34 and "duplicate" in str(err.value)
        assert not Ledger(tmp_path / "d").exists("s1")

    def test_the_first_bad_line_is_the_one_named(self, tmp_path: Path) -> None:
        rows = many(40)
        rows[30] = b'{"role":"user"}\n'
        rows[9] = b'{"role":"user","text":"   "}\n'
        with pytest.raises(ImportError_) as err:
            import_file(tmp_path / "d", rows, 2)
        assert err.value.line == 10 and "empty or only whitespace" in str(err.value)

    def test_a_blank_line_ending_one_block_before_a_message_in_the_next_is_refused(self, tmp_path: Path) -> None:
        rows = many(20)
        rows[5] = b"\n"  # the last line of block 1 (lines 1-7): block 2 starts with a message
        rows[6] = b"  \n"
        with pytest.raises(ImportError_) as err:
            import_file(tmp_path / "d", rows, 2)
        assert err.value.line == 6 and "empty line" in str(err.value)

    def test_blank_lines_ending_the_file_across_blocks_are_accepted(self, tmp_path: Path) -> None:
        rows = many(12) + [b"\n"] * 10
        assert import_file(tmp_path / "a", rows, 2) == import_file(tmp_path / "b", rows, 0)
        assert Ledger(tmp_path / "a").head("s1")[0] == 12

    def test_a_byte_order_mark_starts_the_first_block_only(self, tmp_path: Path) -> None:
        rows = many(20)
        rows[0] = b"\xef\xbb\xbf" + rows[0]
        assert import_file(tmp_path / "a", rows, 2) == import_file(tmp_path / "b", rows, 0)
        rows[8] = b"\xef\xbb\xbf" + rows[8]
        with pytest.raises(ImportError_) as err:
            import_file(tmp_path / "c", rows, 2)
        assert err.value.line == 9

    def test_a_worker_that_cannot_run_changes_nothing_but_speed(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        rows = many(50)
        serial = import_file(tmp_path / "a", rows, 0)
        monkeypatch.setattr(bulkpool.sys, "executable", "/bin/false")
        assert import_file(tmp_path / "b", rows, 2) == serial

    def test_a_worker_that_dies_mid_import_changes_nothing_but_speed(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        rows = many(90)
        serial = import_file(tmp_path / "a", rows, 0)
        cut = tmp_path / "cut-python"  # each worker's answers end after 5,000 bytes, in the middle of its second block
        cut.write_text(f'#!/bin/sh\n"{sys.executable}" "$@" | head -c 5000\n')
        cut.chmod(0o755)
        monkeypatch.setattr(bulkpool.sys, "executable", str(cut))
        with caplog.at_level("WARNING", logger="ledger"):
            assert import_file(tmp_path / "b", rows, 2) == serial
        assert "encoding the rest in this process" in caplog.text

    def test_a_failure_while_workers_run_imports_nothing_and_stops_them(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        started: list[bulkpool._Worker] = []
        real_init = bulkpool._Worker.__init__

        def init(w: bulkpool._Worker) -> None:
            real_init(w)
            started.append(w)

        monkeypatch.setattr(bulkpool._Worker, "__init__", init)

        class Fails:
            blocks = 0

            def update(self, n: int) -> None:
                self.blocks += 1
                if self.blocks == 3:
                    raise RuntimeError("disk full, say")

        led = Ledger(tmp_path / "d")
        led.append("s1", "user", "before")
        with pytest.raises(RuntimeError, match="disk full"):
            led.import_jsonl("s1", many(60), Fails(), workers=2)
        assert len(started) == 2 and all(w.proc.poll() is not None for w in started)
        assert [e.text for e in Ledger(tmp_path / "d").events("s1")] == ["before"]
        assert Ledger(tmp_path / "d").verify("s1").ok

    def test_an_import_after_another_writer_appended_is_renumbered(self, tmp_path: Path) -> None:
        led = Ledger(tmp_path / "d")
        led.append("s1", "user", "first")
        staged = importer.stage(led, "s1", many(30), workers=2)
        other = Ledger(tmp_path / "d")
        other.append("s1", "user", "came in between")
        events = importer.commit(led, staged)
        assert (events.first.seq, events.last.seq, len(events)) == (2, 31, 30)
        report = Ledger(tmp_path / "d").verify("s1")
        assert report.ok and report.events == 32
        assert [e.text for e in Ledger(tmp_path / "d").events("s1")][1:4] == ["came in between", "message 0 \u00e9", "message 1 \u00e9"]


class TestWorkersFor:
    def test_small_files_and_busy_machines_stay_in_one_process(self) -> None:
        big = importer.PARALLEL_MIN_LINES
        assert importer.workers_for(big - 1, load=0.0) == 0
        cores = len(os.sched_getaffinity(0))
        if cores >= 2:
            assert importer.workers_for(big, load=0.0) == min(cores, importer.MAX_WORKERS)
            assert importer.workers_for(big, load=float(cores)) == 0


class TestImported:
    def test_the_returned_events_read_as_a_list_would(self, tmp_path: Path) -> None:
        led = Ledger(tmp_path / "d")
        led.append("s1", "user", "before")
        events = led.import_jsonl("s1", many(25))
        stored = list(led.events("s1"))[1:]
        assert len(events) == 25
        assert events[0] == stored[0]._replace(line=None) and events[-1] == stored[-1]._replace(line=None)
        assert [e.chain for e in events] == [e.chain for e in stored]
        assert [e.seq for e in events[3:6]] == [4, 5, 6]
        assert events[-1].chain == led.head("s1")[1]
        with pytest.raises(IndexError):
            events[25]
