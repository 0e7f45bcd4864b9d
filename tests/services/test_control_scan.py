"""The control state of a session not yet cached in the process is found by a byte search, not a parse of every line
(issue 15: the first turn of each process, every `python -m chat` turn and `retrieval search` parsed a 1M-event ledger).

control.revocation.current derives it from the lines that may be control events only; the state must be exactly
derive(ledger.events(session)): same revocations, control seqs, supersessions, size and head.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import control.revocation as revocation
from control.revocation import _derive_scanned, current, restore, revoke
from control.state import derive
from control.supersession import supersede
from storage.files.ledger.control_scan import candidates
from storage.files.ledger.store import Ledger

S = "s"


def same(a: object, b: object) -> None:
    assert a == b, (a, b)


def build(data: Path) -> Ledger:
    led = Ledger(data)
    for i in range(30):
        led.append(S, "user" if i % 2 == 0 else "assistant", f"line {i}: I live in town {i}", {"i": i})
    led.append(S, "user", "[control record: revoke]", {})  # a person typing a control text: not a control event
    led.append(S, "user", 'a quote: "text":"[control record: revoke]"', {})  # escaped in the line: no match
    led.append(S, "user", "a meta value", {"text": "[control record: restore]"})  # a match, read for nothing
    revoke(data, S, 4, "not relevant", ledger=led)
    revoke(data, S, 6, ledger=led)
    restore(data, S, 4, ledger=led)
    led.append(S, "user", "I live in Porto now", {})
    count, _ = led.head(S)
    supersede(data, S, count - 1, 2, ledger=led)
    led.erase(S, [8, 9])
    for i in range(5):
        led.append(S, "user", f"after {i}", {})
    return led


@pytest.fixture(autouse=True)
def fresh_cache() -> None:
    revocation._cache.clear()


class TestTheScannedStateIsTheParsedOne:
    def test_every_field_equals_a_full_replay(self, tmp_path: Path) -> None:
        data = tmp_path / "data"
        led = build(data)
        count, head = led.head(S)
        full = derive(led.events(S))
        scanned = _derive_scanned(led, S, count, head)
        same(scanned.size, full.size)
        same(scanned.head, full.head)
        same(scanned.revoked, full.revoked)
        same(scanned.controls, full.controls)
        same(scanned.supersessions.links, full.supersessions.links)
        same(scanned.supersessions.superseded, full.supersessions.superseded)
        assert set(full.revoked) == {6} and len(full.controls) == 3 and full.supersessions.superseded

    def test_current_with_no_cache_is_the_full_replay(self, tmp_path: Path) -> None:
        data = tmp_path / "data"
        led = build(data)
        full = derive(led.events(S))
        got = current(Ledger(data), S)
        same((got.size, got.head, got.revoked, got.controls, got.supersessions.links), (full.size, full.head, full.revoked, full.controls, full.supersessions.links))

    def test_only_lines_holding_a_control_text_are_candidates(self, tmp_path: Path) -> None:
        data = tmp_path / "data"
        led = build(data)
        count, _ = led.head(S)
        found = candidates(led.log_path(S), count)
        events = {ev.seq: ev for ev in led.events(S)}
        controls = set(derive(events.values()).controls) | {x.record_seq for x in derive(events.values()).supersessions.links}
        assert controls <= set(found)
        assert 30 in found and 32 in found  # a user's text equal to a control text, a meta value: read for nothing
        assert 31 not in found  # the escaped quote in a user's text is not the field
        assert found == sorted(found)

    def test_lines_after_the_count_are_not_candidates(self, tmp_path: Path) -> None:
        data = tmp_path / "data"
        led = build(data)
        count, _ = led.head(S)
        found = candidates(led.log_path(S), count)
        assert candidates(led.log_path(S), found[1]) == found[:1]

    def test_a_read_size_smaller_than_a_line_still_finds_every_candidate(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        data = tmp_path / "data"
        led = build(data)
        count, _ = led.head(S)
        whole = candidates(led.log_path(S), count)
        real_open = open

        class Small:
            def __init__(self, path: Path, mode: str) -> None:
                self.f = real_open(path, mode)

            def __enter__(self) -> Small:
                return self

            def __exit__(self, *exc: object) -> None:
                self.f.close()

            def read(self, _n: int) -> bytes:
                data: bytes = self.f.read(37)  # much less than a line: every needle straddles some reads
                return data

        monkeypatch.setattr(revocation, "open", Small, raising=False)
        assert candidates(led.log_path(S), count) == whole
