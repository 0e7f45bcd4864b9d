"""`Ledger.events(session, start_seq)` seeks to the line of start_seq (the writer's offsets, or a bisection on a tail
opened from the tail record) instead of parsing from the start: over generated ledgers (lines of very different
lengths, erased lines, a torn tail, a reader that walked or one opened from the record, any start_seq), it returns
exactly what the full parse filtered by seq returns."""

from __future__ import annotations

import random
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.messages import Message
from storage.files.ledger.store import RECORD_MIN_LINES, Ledger

S = "alice"
N = RECORD_MIN_LINES + 76  # a session that large is opened from its tail record, and bisected


def _base() -> Path:
    """One ledger of N lines, texts from 1 to ~6,000 characters, built once and copied for each example."""
    found = getattr(_base, "path", None)
    if found is not None:
        return Path(found)
    rng = random.Random(7)
    data = Path(tempfile.mkdtemp(prefix="events-from-seq-"))
    texts = ["x" * rng.choice([1, 3, 40, 200, 6000]) + f" {i}" for i in range(N)]
    Ledger(data).append_many(S, [Message("user" if i % 2 == 0 else "assistant", t, {}) for i, t in enumerate(texts)])
    _base.path = str(data)  # type: ignore[attr-defined]
    return data


def _full(led: Ledger, start: int) -> list[tuple[int | None, dict[str, object]]]:
    return [(e.line, e.to_dict()) for e in led.events(S) if e.seq >= start]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    erased=st.lists(st.integers(0, N - 1), max_size=4, unique=True),
    torn=st.sampled_from([b"", b'{"seq": 99', b"garbage without newline"]),
    fresh=st.booleans(),
    starts=st.lists(st.one_of(st.integers(-3, N + 8), st.sampled_from([N - 1, N, 10**12, -(10**12)])), min_size=1, max_size=6),
)
def test_events_from_a_seq_are_the_full_parse_from_that_seq(erased: list[int], torn: bytes, fresh: bool, starts: list[int]) -> None:
    data = Path(tempfile.mkdtemp(prefix="events-from-seq-"))
    try:
        shutil.copytree(_base(), data, dirs_exist_ok=True)
        writer = Ledger(data)
        if erased:
            writer.erase(S, erased)
        if torn:
            with open(data / "sessions" / S / "events.jsonl", "ab") as f:
                f.write(torn)
        reader = Ledger(data) if fresh else writer
        want = {s: _full(Ledger(data), s) for s in starts}  # a third reader, walking from genesis
        for s in starts:
            assert [(e.line, e.to_dict()) for e in reader.events(S, start_seq=s)] == want[s], s  # each with its line
    finally:
        shutil.rmtree(data, ignore_errors=True)
