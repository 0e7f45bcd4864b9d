"""The parallel verifier agrees with the serial walk, and defers to it on any doubt."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger import verify_stream
from ledger.messages import Message
from storage.files.ledger.parallel import verify_file_parallel
from storage.files.ledger.store import Ledger


@pytest.fixture
def log(tmp_path: Path) -> Path:
    led = Ledger(tmp_path)
    led.append_many("s", [Message("user", f"event {i} " + "word " * (i % 30), {"i": i}) for i in range(3000)])
    return led.log_path("s")


@pytest.mark.parametrize("workers", [2, 3, 7])
def test_parallel_verification_of_an_intact_ledger_equals_the_serial_walk(log: Path, workers: int) -> None:
    serial = verify_stream("s", [log.read_bytes()])
    assert verify_file_parallel(log, "s", workers=workers, min_bytes=0) == (serial.events, serial.head)


@pytest.mark.parametrize("where", [10, 1500, 2999])
def test_any_tampered_line_makes_the_parallel_verifier_defer(log: Path, where: int) -> None:
    lines = log.read_bytes().splitlines(keepends=True)
    lines[where] = lines[where].replace(b"event", b"Event", 1)
    log.write_bytes(b"".join(lines))
    assert verify_file_parallel(log, "s", workers=3, min_bytes=0) is None
    report = Ledger(log.parents[2]).verify("s")  # the serial walk names the break
    assert not report.ok and report.brk is not None and report.brk.line == where + 1


def test_a_dropped_line_at_a_range_boundary_is_caught(log: Path) -> None:
    lines = log.read_bytes().splitlines(keepends=True)
    for drop in (999, 1000, 1001, 1499, 1500, 1501):
        data = b"".join(lines[:drop] + lines[drop + 1 :])
        log.write_bytes(data)
        assert verify_file_parallel(log, "s", workers=2, min_bytes=0) is None, drop
    log.write_bytes(b"".join(lines))
    assert verify_file_parallel(log, "s", workers=2, min_bytes=0) is not None


def test_small_files_are_left_to_the_serial_walk(log: Path) -> None:
    assert verify_file_parallel(log, "s", workers=2) is None
