"""ledger/chunks.py: the per-chunk sha256 the writer and the auditor share, built any way, is the same record."""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path

import pytest

import ledger.chunks
from ledger.chunks import Chunk, ChunkLog, check_contiguous, rehash


def _lines(rng: random.Random, n: int) -> list[bytes]:
    return [(b"x" * rng.randint(1, 300)) + b"\n" for _ in range(n)]


def _heads(n: int, base: int = 0) -> list[bytes]:
    return [hashlib.sha256(str(base + i).encode()).digest() for i in range(n)]


def _expected(lines: list[bytes], size: int) -> list[tuple[int, int, int, int, bytes]]:
    out, pos = [], 0
    for first in range(0, len(lines), size):
        seg = b"".join(lines[first : first + size])
        out.append((pos, pos + len(seg), first, len(lines[first : first + size]), hashlib.sha256(seg).digest()))
        pos += len(seg)
    return out


def _walk(log: ChunkLog, data: bytes, lines: list[bytes], heads: list[bytes], block: int) -> None:
    """What a walk does: tee the blocks it reads, then report each accepted line."""
    blocks = (data[i : i + block] for i in range(0, len(data), block))
    k = 0
    for _block in log.tee(blocks):
        # lines wholly inside what has been read so far are "accepted"
        while k < len(lines) and log.end + len(lines[k]) <= log._pending_pos + len(log._pending):
            log.line(len(lines[k]), heads[k])
            k += 1
    log.finish()
    assert k == len(lines)


@pytest.mark.parametrize("seed", range(8))
def test_walked_appended_and_resumed_logs_record_the_same_chunks(seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger.chunks, "CHUNK_LINES", 5)
    rng = random.Random(seed)
    lines = _lines(rng, rng.randint(1, 40))
    heads = _heads(len(lines))
    data = b"".join(lines)
    want = _expected(lines, 5)

    walked = ChunkLog()
    _walk(walked, data, lines, heads, block=rng.randint(1, 700))
    appended = ChunkLog()
    cut = 0
    while cut < len(lines):
        step = rng.randint(1, 9)
        appended.append_lines(lines[cut : cut + step], heads[cut : cut + step])
        cut += step
    path = tmp_path / "log"
    split = rng.randint(0, len(lines))
    path.write_bytes(b"".join(lines[:split]))
    first = ChunkLog()
    _walk(first, b"".join(lines[:split]), lines[:split], heads[:split], block=64)
    fd = os.open(path, os.O_RDONLY)
    try:
        found = rehash(fd, first.chunks())
    finally:
        os.close(fd)
    assert found.first_changed is None and found.bytes_hashed == len(b"".join(lines[:split]))
    resumed = ChunkLog.resume(first.chunks(), found.last)
    _walk(resumed, b"".join(lines[split:]), lines[split:], heads[split:], block=128)

    for log in (walked, appended, resumed):
        got = [(c.start, c.end, c.first_line, c.lines, c.sha256) for c in log.chunks()]
        assert got == want
        check_contiguous(log.chunks())
        assert log.chunks()[-1].head == heads[-1] and log.end == len(data) and log.lines == len(lines)


def test_rehash_names_the_first_changed_chunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger.chunks, "CHUNK_LINES", 3)
    lines = _lines(random.Random(1), 10)
    log = ChunkLog()
    log.append_lines(lines, _heads(10))
    path = tmp_path / "log"
    data = bytearray(b"".join(lines))
    for target_line, chunk in ((0, 0), (4, 1), (8, 2), (9, 3)):
        changed = bytearray(data)
        at = sum(map(len, lines[:target_line]))
        changed[at] ^= 1
        path.write_bytes(bytes(changed))
        fd = os.open(path, os.O_RDONLY)
        try:
            assert rehash(fd, log.chunks()).first_changed == chunk
        finally:
            os.close(fd)
    path.write_bytes(bytes(data[:-1]))  # one byte short: the last chunk is missing bytes
    fd = os.open(path, os.O_RDONLY)
    try:
        assert rehash(fd, log.chunks()).first_changed == 3
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    "item",
    [None, [], [0, 10, 0, 1, "00" * 32], [0, 0, 0, 1, "00" * 32, "00" * 32], [0, 10, 0, 0, "00" * 32, "00" * 32],
     [0, 10, 0, 1, "zz" * 32, "00" * 32], [True, 10, 0, 1, "00" * 32, "00" * 32], [-1, 10, 0, 1, "00" * 32, "00" * 32]],
)
def test_a_chunk_read_back_from_outside_is_refused_unless_well_formed(item: object) -> None:
    with pytest.raises(ValueError):
        Chunk.from_list(item)
