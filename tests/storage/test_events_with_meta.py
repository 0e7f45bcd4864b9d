"""`LedgerStore.events_with_meta` (issue 30: how chat.stand_ins learns the offline stand-in's replies without parsing
every line) on both backends: over generated sessions — the stand-in's replies, a model's, user lines quoting the
provider's bytes in their text or holding them in a nested or a user's meta, erased lines, a torn tail on files, any
(start, stop) — it returns exactly the events the full parse (LedgerStore.events) filtered by meta[key] == value
returns, and so exactly the seqs the full parse and chat.offline.is_stand_in_reply find.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chat.offline import PROVIDER, is_stand_in_reply
from ledger.canonical import member_bytes
from ledger.messages import Message
from storage.api import Stores, file_stores, pg_stores

NEEDLE = member_bytes("provider", PROVIDER).decode()
REPLY = {"kind": "chat", "receipt_id": "rcpt_1", "provider": PROVIDER, "model": "offline-stand-in"}
KINDS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "stand_in": ("assistant", "[Offline stand-in] - (seq 0, user) cat Miso", REPLY),
    "model": ("assistant", "Miso is your cat.", {**REPLY, "provider": "groq", "model": "llama"}),
    "no_receipt": ("assistant", "a human's turn", {"provider": PROVIDER}),  # not a turn's answer: no receipt id
    "user_quotes": ("user", f"my meta said {NEEDLE} and {{{NEEDLE}}}", {}),  # the bytes only in the text (escaped)
    "user_meta": ("user", "hello", {"provider": PROVIDER}),  # the member, on a user's line
    "nested": ("assistant", "nested", {"kind": "chat", "receipt_id": "r", "x": {"provider": PROVIDER}, "provider": "p"}),
    "other_value": ("assistant", "near miss", {**REPLY, "provider": PROVIDER + "x"}),
    "plain": ("user", "the tram in Lisbon", {}),
}
_ids = itertools.count()


@pytest.fixture(params=["files", pytest.param("pg", marks=pytest.mark.pg)])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    data = tmp_path / "data"
    data.mkdir()
    opened = file_stores(data) if request.param == "files" else pg_stores(request.getfixturevalue("pg_url"), data, pool_size=2)
    try:
        yield opened
    finally:
        opened.close()


def _expected(stores: Stores, session: str, start: int, stop: int) -> list[dict[str, Any]]:
    return [e.to_dict() for e in stores.ledger.events(session) if start <= e.seq < stop and e.meta.get("provider") == PROVIDER]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    kinds=st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=40),
    erase=st.lists(st.integers(0, 39), max_size=4, unique=True),
    torn=st.sampled_from([b"", b'{"meta":{"provider":"offline","receipt_id":"r"},"role":"assistant"', b"x"]),
    ranges=st.lists(st.tuples(st.integers(-2, 45), st.integers(-2, 45)), max_size=4),
)
def test_events_with_meta_is_the_full_parse_filtered(
    stores: Stores, kinds: list[str], erase: list[int], torn: bytes, ranges: list[tuple[int, int]]
) -> None:
    session = f"s{next(_ids)}"
    ledger = stores.ledger
    ledger.append_many(session, [Message(*KINDS[k]) for k in kinds])
    erased = sorted(s for s in erase if s < len(kinds))
    if erased:
        ledger.erase(session, erased)  # type: ignore[attr-defined]  # both backends (control's path adds a journal)
    if torn and stores.kind == "files":  # a writer's torn tail: no whole line, so no event
        with open(ledger.log_path(session), "ab") as f:  # type: ignore[attr-defined]
            f.write(torn)
    count, _ = ledger.head(session)
    assert count == len(kinds) + (1 if erased else 0)  # the erasure record
    for start, stop in [(0, count), (0, 10**12), *ranges]:
        got = ledger.events_with_meta(session, "provider", PROVIDER, start, stop)
        assert [e.to_dict() for e in got] == _expected(stores, session, start, stop), (start, stop)
    found = [e.seq for e in ledger.events_with_meta(session, "provider", PROVIDER, 0, count) if is_stand_in_reply(e.role, e.meta)]
    want = [i for i, k in enumerate(kinds) if k == "stand_in" and i not in erased]
    assert found == want == [e.seq for e in ledger.events(session) if is_stand_in_reply(e.role, e.meta)]


def test_the_needle_is_the_member_as_a_canonical_line_writes_it(stores: Stores) -> None:
    ledger = stores.ledger
    ledger.append("a", "assistant", "x", dict(REPLY))
    ledger.append("a", "user", NEEDLE, {})
    with ledger.stored_lines("a", 2) as (_size, chunks):
        lines = b"".join(chunks).splitlines()
    assert member_bytes("provider", PROVIDER) in lines[0] and member_bytes("provider", PROVIDER) not in lines[1]
    assert [e.seq for e in ledger.events_with_meta("a", "provider", PROVIDER, 0, 2)] == [0]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    read_size=st.sampled_from([64, 4096, 1 << 22]),
    fresh=st.booleans(),
    ranges=st.lists(st.tuples(st.integers(-2, 1200), st.integers(0, 1200)), min_size=1, max_size=4),
)
def test_on_files_from_any_seq_of_a_long_log_in_any_read_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read_size: int, fresh: bool, ranges: list[tuple[int, int]]
) -> None:
    """A log long enough to be opened from its tail record (a fresh reader finds `start` by bisection), lines of very
    different lengths, matches across the byte search's reads."""
    from storage.files.ledger import control_scan
    from storage.files.ledger.store import RECORD_MIN_LINES, Ledger

    monkeypatch.setattr(control_scan, "READ_SIZE", read_size)
    data = tmp_path / f"long-{next(_ids)}"
    writer = Ledger(data)
    n = RECORD_MIN_LINES + 60
    order = sorted(KINDS)
    writer.append_many("s", [Message(*KINDS[order[(i * 5) % len(order)]]) for i in range(n)])
    writer.append("s", "user", "x" * 9000, {})
    reader = Ledger(data) if fresh else writer
    full = [e.to_dict() for e in Ledger(data).events("s") if e.meta.get("provider") == PROVIDER]
    assert full
    for start, stop in [(0, n + 1), *ranges]:
        got = [e.to_dict() for e in reader.events_with_meta("s", "provider", PROVIDER, start, stop)]
        assert got == [d for d in full if max(start, 0) <= d["seq"] < stop], (start, stop)


def test_no_such_session_holds_none(stores: Stores) -> None:
    stores.ledger.append("a", "assistant", "x", dict(REPLY))
    assert stores.ledger.events_with_meta("nobody", "provider", PROVIDER, 0, 10) == []
    assert [e.seq for e in stores.ledger.events_with_meta("a", "provider", PROVIDER, 0, 10)] == [0]
