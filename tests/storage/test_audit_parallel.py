"""The auditor's cold walk on several cores keeps exactly what the serial walk keeps (issue 15).

receipts/audit_parallel.py walks ranges of the ledger in child processes and
stitches the chain, the erasure state, the Merkle tree and the chunk hashes.
It is an accelerator: its cache must be byte for byte the serial walk's, and
anything it cannot vouch for leaves the verdict to the serial walk.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ledger.chunks
import storage.files.receipts.audit_parallel as ap
from control.supersession import supersede
from receipts.merkle import leaf_hash
from storage.files.ledger.store import Ledger
from storage.files.receipts.audit import Auditor, cache_dir
from storage.files.receipts.merkle_store import MerkleStore

S = "s"


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(ledger.chunks, "CHUNK_LINES", 4)  # many chunks, some across range boundaries
    monkeypatch.setenv("MRE_CACHE_DIR", str(tmp_path / "cache"))


def build(data: Path, *, erase: bool = True, supersessions: bool = True, n: int = 40) -> Path:
    led = Ledger(data)
    for i in range(n):
        led.append(S, "user" if i % 2 == 0 else "assistant", f"line {i}: I live in town {i} " + "words " * (i % 7), {"i": i})
    if supersessions:
        led.append(S, "user", "I live in Porto now", {})
        supersede(data, S, n, 2, ledger=led)
    if erase:
        led.erase(S, [3, 17])
    for i in range(9):
        led.append(S, "user", f"after {i}", {})
    return data / "sessions" / S / "events.jsonl"


def cache_files(data: Path) -> dict[str, bytes]:
    root = cache_dir(data, S)
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            if name != "lock":
                path = Path(dirpath) / name
                out[str(path.relative_to(root))] = path.read_bytes()
    return out


def audited(data: Path, monkeypatch: pytest.MonkeyPatch, *, parallel: bool, workers: int = 2) -> tuple[dict[str, bytes], str, tuple[int, ...], tuple[Any, ...]]:
    calls: list[bool] = []
    real = ap.walk

    def spy(fd: int, session: str, size: int, **kw: object) -> ap.WholeWalk | None:
        out = real(fd, session, size, workers=workers, min_bytes=1 if parallel else 1 << 62)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(ap, "walk", spy)
    with Auditor(data, full=True).facts(S) as facts:
        summary = (facts.verified, facts.first_break, facts.erased, facts.supersessions, facts.root_at(facts.verified))
        notes = facts.notes[0]
    monkeypatch.setattr(ap, "walk", real)
    assert calls and calls[-1] is parallel
    return cache_files(data), notes, facts.erased, summary


class TestTheParallelWalkKeepsWhatTheSerialWalkKeeps:
    @pytest.mark.parametrize("workers", [2, 3, 5])
    def test_the_cache_is_byte_for_byte_the_serial_one(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int) -> None:
        data = tmp_path / "data"
        build(data)
        serial, serial_note, erased, serial_summary = audited(data, monkeypatch, parallel=False)
        parallel, note, _, summary = audited(data, monkeypatch, parallel=True, workers=workers)
        assert erased == (3, 17)
        assert summary == serial_summary
        assert serial_summary[3], "the ledger holds a supersession record the cache must list"
        assert parallel == serial
        assert note == serial_note

    def test_a_ledger_without_erasures_or_records(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        data = tmp_path / "data"
        build(data, erase=False, supersessions=False)
        serial = audited(data, monkeypatch, parallel=False)[0]
        assert audited(data, monkeypatch, parallel=True, workers=3)[0] == serial

    def test_a_warm_check_after_a_parallel_walk_reuses_it(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        data = tmp_path / "data"
        build(data)
        audited(data, monkeypatch, parallel=True)
        with Auditor(data).facts(S) as facts:
            assert facts.cached_lines == facts.verified and facts.rewalked_from_line is None


def walk_all(path: Path, workers: int = 3) -> ap.WholeWalk | None:
    fd = os.open(path, os.O_RDONLY)
    try:
        return ap.walk(fd, S, os.fstat(fd).st_size, workers=workers, min_bytes=1)
    finally:
        os.close(fd)


def replace_line(path: Path, line_no: int, old: bytes, new: bytes) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    assert old in lines[line_no - 1]
    lines[line_no - 1] = lines[line_no - 1].replace(old, new, 1)
    path.write_bytes(b"".join(lines))


class TestWhatItCannotVouchForGoesToTheSerialWalk:
    def test_a_good_ledger_walks(self, tmp_path: Path) -> None:
        assert walk_all(build(tmp_path / "data")) is not None

    @pytest.mark.parametrize("line_no", [2, 30, 50])
    def test_an_edited_line_in_any_range_is_no_parallel_result(self, tmp_path: Path, line_no: int) -> None:
        path = build(tmp_path / "data", erase=False)
        replace_line(path, line_no, b'"text":"', b'"text":"X')
        assert walk_all(path) is None

    def test_a_torn_last_line_is_no_parallel_result(self, tmp_path: Path) -> None:
        path = build(tmp_path / "data")
        with open(path, "ab") as f:
            f.write(b'{"seq":')
        assert walk_all(path) is None

    def test_an_erased_line_no_record_lists_is_no_parallel_result(self, tmp_path: Path) -> None:
        path = build(tmp_path / "data")
        lines = path.read_bytes().splitlines(keepends=True)
        record = next(i for i, line in enumerate(lines) if b'"erasure"' in line)
        path.write_bytes(b"".join(lines[:record]))  # the record and everything after it gone
        assert walk_all(path) is None

    def test_a_broken_ledger_gets_the_serial_walks_verdict(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        data = tmp_path / "data"
        path = build(data, erase=False)
        replace_line(path, 30, b'"text":"', b'"text":"X')
        monkeypatch.setattr(ap, "MIN_PARALLEL_BYTES", 1)
        with Auditor(data, full=True).facts(S) as facts:
            assert facts.verified == 29
            assert facts.first_break is not None and facts.first_break.line == 30

    def test_a_chunk_across_two_ranges_must_hash_as_each_range_walked_it(self, tmp_path: Path) -> None:
        path = build(tmp_path / "data")
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            bounds = ap._boundaries(fd, size, 2)
            assert bounds is not None
            (mid, seq, head) = bounds[0]
            assert seq % ledger.chunks.CHUNK_LINES, "the test needs a boundary inside a chunk"
            left = ap.walk_range(fd, S, 0, mid, 0, bytes(32))
            right = ap.walk_range(fd, S, mid, size, seq, head)
            assert left is not None and right is not None
            pieces = left.pieces + right.pieces
            assert ap._chunks(fd, pieces) is not None
            a, b, f, n, _sha, h = left.pieces[-1]
            forged = [*left.pieces[:-1], (a, b, f, n, bytes(32), h), *right.pieces]  # not what was walked
            assert ap._chunks(fd, forged) is None
        finally:
            os.close(fd)

    def test_a_child_result_round_trips(self, tmp_path: Path) -> None:
        path = build(tmp_path / "data")
        fd = os.open(path, os.O_RDONLY)
        try:
            r = ap.walk_range(fd, S, 0, os.fstat(fd).st_size, 0, bytes(32))
        finally:
            os.close(fd)
        assert r is not None
        back = ap.decode(ap.encode(r))
        assert back == r
        with pytest.raises(ValueError):
            ap.decode(ap.encode(r) + b"x")


def leaves(n: int) -> Iterator[bytes]:
    return (i.to_bytes(4, "big") for i in range(n))


class TestLoadLevels:
    @pytest.mark.parametrize("n", [1, 2, 7, 64, 100])
    def test_a_loaded_tree_is_the_extended_one(self, tmp_path: Path, n: int) -> None:
        with MerkleStore(tmp_path / "a") as a:
            a.extend(leaves(n))
        levels = [(tmp_path / "a" / f"level-{i:02d}.bin").read_bytes() for i in range(n.bit_length())]
        with MerkleStore(tmp_path / "b") as b:
            b.load_levels(levels, durable=True)
        with MerkleStore(tmp_path / "a") as a, MerkleStore(tmp_path / "b") as b:
            assert b.size == a.size == n
            assert b.root() == a.root()
            assert b.inclusion_proof(n - 1) == a.inclusion_proof(n - 1)
            b.append(b"more")
            a.append(b"more")
            assert b.root() == a.root()

    def test_a_store_that_is_not_empty_or_levels_of_the_wrong_shape_are_refused(self, tmp_path: Path) -> None:
        leaf = leaf_hash(b"x")
        with MerkleStore(tmp_path / "a") as a:
            with pytest.raises(ValueError, match="levels do not describe"):
                a.load_levels([leaf * 3, leaf * 2])  # level 1 of 3 leaves holds one node
            with pytest.raises(ValueError, match="levels do not describe"):
                a.load_levels([leaf * 2])
            a.append(b"x")
            with pytest.raises(ValueError, match="not empty"):
                a.load_levels([leaf])


class TestNoChildIsNoFailure:
    def test_a_child_that_cannot_start_leaves_the_walk_to_the_serial_one(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        data = tmp_path / "data"
        build(data)

        def no_process(*_a: object, **_kw: object) -> None:
            raise OSError("no process left")

        monkeypatch.setattr(subprocess, "Popen", no_process)
        monkeypatch.setattr(ap, "MIN_PARALLEL_BYTES", 1)
        assert walk_all(data / "sessions" / S / "events.jsonl") is None
        with Auditor(data, full=True).facts(S) as facts:
            assert facts.first_break is None and facts.erased == (3, 17)

    def test_a_child_that_fails_leaves_the_walk_to_the_serial_one(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        path = build(tmp_path / "data")
        monkeypatch.setattr(sys, "executable", "/bin/false")
        assert walk_all(path) is None
