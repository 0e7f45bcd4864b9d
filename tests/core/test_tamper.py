"""Generated tampering: every mutation of a 200-event ledger is detected at the right line."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from ledger import verify_stream
from ledger.event import LINE_KEYS, make_event
from ledger.messages import Message
from storage.files.ledger.store import Ledger

N = 200
SESSION = "tamper"


@dataclass(frozen=True)
class Mutation:
    name: str
    data: bytes
    line: int  # 1-based line where verification must report the break
    kinds: tuple[str, ...] = ()  # acceptable kinds of break; empty = any


@pytest.fixture(scope="module")
def ledger_lines(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    d = tmp_path_factory.mktemp("tamper")
    led = Ledger(d)
    msgs = [
        Message("user" if i % 2 == 0 else "assistant", f"turn {i}: some text é 😀 about topic {i % 7}", {"i": i, "tag": ["x", i]})
        for i in range(N)
    ]
    led.append_many(SESSION, msgs)
    raw = led.log_path(SESSION).read_bytes()
    assert raw.endswith(b"\n")
    return raw[:-1].split(b"\n")


def join(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def value_span(line: bytes, key: str) -> tuple[int, int]:
    """Byte span of a field's value inside a stored line."""
    start = line.index(b'"' + key.encode() + b'":') + len(key) + 3
    obj = orjson.loads(line)
    end = start + len(orjson.dumps(obj[key], option=orjson.OPT_SORT_KEYS))
    assert line[start:end] == orjson.dumps(obj[key], option=orjson.OPT_SORT_KEYS)
    return start, end


def generate(lines: list[bytes]) -> Iterator[Mutation]:
    rng = random.Random(1234)
    # 1. flip one byte in each field, at several lines
    for i in (0, 1, 57, 100, N - 1):
        for key in LINE_KEYS:
            start, end = value_span(lines[i], key)
            for pos in {start, (start + end) // 2, end - 1}:
                mutated = bytearray(lines[i])
                mutated[pos] ^= 0x01
                if bytes(mutated) == lines[i]:
                    continue
                new = list(lines)
                new[i] = bytes(mutated)
                yield Mutation(f"flip {key}@{pos} line {i + 1}", join(new), i + 1)
    # 2. drop a line (not the last: a shortened tail needs an external checkpoint — the receipts' job)
    for i in range(N - 1):
        yield Mutation(f"drop line {i + 1}", join(lines[:i] + lines[i + 1 :]), i + 1, ("seq_gap",))
    # 3. duplicate a line
    for i in range(0, N, 7):
        yield Mutation(f"duplicate line {i + 1}", join(lines[: i + 1] + lines[i:]), i + 2, ("seq_repeat",))
    # 4. swap two lines
    for _ in range(40):
        i, j = sorted(rng.sample(range(N), 2))
        new = list(lines)
        new[i], new[j] = new[j], new[i]
        yield Mutation(f"swap lines {i + 1},{j + 1}", join(new), i + 1)
    # 5. insert a forged line with a recomputed digest and chain: the next original line no longer links
    for i in (1, 50, 150, N - 2):
        prev = orjson.loads(lines[i - 1])
        forged = make_event(
            session=SESSION, seq=i, prev=bytes.fromhex(prev["chain"]), role="user", text="forged",
            meta={}, ts=prev["ts"], event_id="evt_" + "ab" * 16, salt=bytes(32),
        )
        yield Mutation(f"insert forged line before {i + 1}", join(lines[:i] + [forged.to_line()[:-1]] + lines[i:]), i + 2, ("seq_repeat",))
        # and the same forged event *replacing* line i+1: the line after it breaks
        yield Mutation(f"replace line {i + 1} with forged", join(lines[:i] + [forged.to_line()[:-1]] + lines[i + 1 :]), i + 2, ("chain_mismatch",))
    # 6. truncate mid-line
    for i in (0, 10, 199):
        data = join(lines[:i]) + lines[i][: len(lines[i]) // 2]
        yield Mutation(f"truncate mid line {i + 1}", data, i + 1, ("torn_tail",))
    # 7. edit a prev / chain value to another line's value
    for i in (3, 120, N - 1):
        for key in ("prev", "chain"):
            obj = orjson.loads(lines[i])
            other = orjson.loads(lines[(i + 5) % N])
            obj[key] = other[key]
            new = list(lines)
            new[i] = orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
            yield Mutation(f"edit {key} line {i + 1}", join(new), i + 1, ("chain_mismatch",))
    # 8. change the session id (valid value, other session)
    for i in (0, 42, N - 1):
        obj = orjson.loads(lines[i])
        obj["session"] = "other"
        new = list(lines)
        new[i] = orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
        yield Mutation(f"change session id line {i + 1}", join(new), i + 1, ("wrong_session",))
    # 9. re-order a block
    for i in (0, 90, N - 6):
        new = lines[:i] + list(reversed(lines[i : i + 5])) + lines[i + 5 :]
        yield Mutation(f"reverse block at line {i + 1}", join(new), i + 1)


def slipped_through(mutations: list[Mutation]) -> list[str]:
    """Every mutation that verification missed or pinpointed wrongly (does not stop at the first)."""
    missed = []
    for m in mutations:
        report = verify_stream(SESSION, [m.data])
        if report.ok:
            missed.append(f"{m.name}: not detected")
            continue
        brk = report.brk
        assert brk is not None
        if brk.line != m.line:
            missed.append(f"{m.name}: reported line {brk.line} ({brk.kind}), expected line {m.line}")
        elif m.kinds and brk.kind not in m.kinds:
            missed.append(f"{m.name}: kind {brk.kind}, expected one of {m.kinds}")
    return missed


def test_untouched_ledger_verifies(ledger_lines: list[bytes]) -> None:
    report = verify_stream(SESSION, [join(ledger_lines)])
    assert report.ok and report.events == N


def test_every_generated_mutation_is_detected_at_the_right_line(ledger_lines: list[bytes]) -> None:
    mutations = list(generate(ledger_lines))
    assert len(mutations) > 400
    assert slipped_through(mutations) == []


def test_byte_flips_in_each_field_are_named_by_kind(ledger_lines: list[bytes]) -> None:
    kinds = set()
    for m in generate(ledger_lines):
        if m.name.startswith("flip"):
            report = verify_stream(SESSION, [m.data])
            assert report.brk is not None
            kinds.add(report.brk.kind)
    assert {"digest_mismatch", "chain_mismatch", "unknown_version", "wrong_session"} <= kinds


def test_verify_streams_in_chunks_of_any_size(ledger_lines: list[bytes], tmp_path: Path) -> None:
    data = join(ledger_lines)
    for size in (1, 7, 4096):
        chunks = [data[i : i + size] for i in range(0, len(data), size)]
        assert verify_stream(SESSION, chunks).ok
