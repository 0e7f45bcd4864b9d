"""The control state kept on disk (control-state.json, control.state_file; issue 15): a fresh process folds only the
lines appended since it was written, and the state it gets is always derive(ledger.events(session)) — after revokes,
restores, supersessions, erasures, appends by another process, and with the file missing, stale, torn or forged.
A reader's ledger (record_tails=False, as `retrieval search` opens it) never writes it."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

import control.revocation as revocation
from control import state_file
from control.revocation import current, restore, revoke
from control.state import ControlState, derive, erases_folded
from control.supersession import supersede
from storage.files.ledger import control_scan
from storage.files.ledger.store import Ledger

S = "s"
ROOT = Path(__file__).resolve().parents[2]


def saved_in(session_dir: Path) -> state_file.Saved | None:
    """The state control-state.json holds in `session_dir`, as a fresh process would read it."""
    data = control_scan.load_state(session_dir)
    return None if data is None else state_file.decode(data)


def fields(st: ControlState) -> tuple[object, ...]:
    return (st.size, st.head, st.revoked, st.controls, st.supersessions.links, st.supersessions.superseded)


def fresh(data: Path, *, reader: bool = False) -> ControlState:
    """current() as a new process sees it: no in-process cache, a new Ledger."""
    revocation._cache.clear()
    return current(Ledger(data, record_tails=not reader), S, save=True)


def assert_derived(data: Path, got: ControlState) -> None:
    full = derive(Ledger(data).events(S))
    assert fields(got) == fields(full)


def build(data: Path, n: int = 40) -> Ledger:
    led = Ledger(data)
    for i in range(n):
        led.append(S, "user" if i % 2 == 0 else "assistant", f"line {i}: I live in town {i}", {"i": i})
    revoke(data, S, 4, "not relevant", ledger=led)
    revoke(data, S, 6, ledger=led)
    restore(data, S, 4, ledger=led)
    led.append(S, "user", "I live in Porto now", {})
    supersede(data, S, led.head(S)[0] - 1, 2, ledger=led)
    return led


@pytest.fixture(autouse=True)
def no_cache() -> None:
    revocation._cache.clear()


def scans(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Record every byte scan current() makes: (first seq, offset)."""
    seen: list[tuple[int, int]] = []
    real = control_scan.scan

    def spy(f, offset, first, count, needles):  # type: ignore[no-untyped-def]
        seen.append((first, offset))
        return real(f, offset, first, count, needles)

    monkeypatch.setattr(control_scan, "scan", spy)
    return seen


class TestAFreshProcessFoldsOnlyWhatIsNew:
    def test_a_writer_leaves_a_file_that_equals_the_full_replay(self, tmp_path: Path) -> None:
        data = tmp_path / "d"
        build(data)
        got = fresh(data)
        assert_derived(data, got)
        saved = saved_in(Ledger(data).session_dir(S))
        assert saved is not None and fields(saved.state) == fields(got)

    def test_the_next_process_scans_from_the_saved_line_not_from_genesis(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        data = tmp_path / "d"
        led = build(data)
        fresh(data)
        for i in range(5):
            led.append(S, "user", f"after {i}", {})
        seen = scans(monkeypatch)
        got = fresh(data)
        assert_derived(data, got)
        saved_size = saved_in(led.session_dir(S))
        assert saved_size is not None
        assert seen and all(first > 0 and offset > 0 for first, offset in seen), seen

    def test_an_up_to_date_file_is_used_without_any_scan(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        data = tmp_path / "d"
        build(data)
        fresh(data)
        seen = scans(monkeypatch)
        assert_derived(data, fresh(data))
        assert seen == []

    @pytest.mark.parametrize("step", ["revoke", "restore", "supersede", "append", "erase", "erase a control record"])
    def test_after_each_kind_of_change_in_another_process_the_state_is_the_full_replay(self, tmp_path: Path, step: str) -> None:
        data = tmp_path / "d"
        build(data)
        fresh(data)  # the file is written up to here
        other = Ledger(data)  # another process's ledger (and no shared cache: fresh() clears it)
        if step == "revoke":
            revoke(data, S, 10, ledger=other)
        elif step == "restore":
            restore(data, S, 6, ledger=other)
        elif step == "supersede":
            other.append(S, "user", "I live in Faro now", {})
            supersede(data, S, other.head(S)[0] - 1, 12, ledger=other)
        elif step == "append":
            for i in range(3):
                other.append(S, "user", f"more {i}", {})
        elif step == "erase":
            other.erase(S, [8, 9])
        else:  # Ledger.erase itself does not refuse a control record (control.plan does): the state must follow
            st = derive(other.events(S))
            other.erase(S, [st.controls[1]])
        got = fresh(data)
        assert_derived(data, got)
        if step == "erase a control record":
            assert 6 not in got.revoked  # the revoke of seq 6 is erased: no longer in force

    def test_after_an_erasure_moved_the_saved_line_it_is_found_by_seq_not_by_a_scan_from_genesis(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        data = tmp_path / "d"
        led = build(data)
        fresh(data)
        led.erase(S, [1])  # every later line moves: the saved span no longer holds the saved line
        seen = scans(monkeypatch)
        assert_derived(data, fresh(data))
        assert seen and all(first > 0 for first, _ in seen), seen

    def test_a_ledger_cut_and_written_again_past_the_saved_size_is_derived_again(self, tmp_path: Path) -> None:
        data = tmp_path / "d"
        led = build(data)
        fresh(data)
        saved = saved_in(led.session_dir(S))
        assert saved is not None and saved.state.revoked
        log = led.log_path(S)
        lines = log.read_bytes().splitlines(keepends=True)
        led.close()
        (data / "sessions" / S / "tail.json").unlink()
        log.write_bytes(b"".join(lines[:20]))  # before every control event
        other = Ledger(data)
        for i in range(saved.state.size + 5 - 20):
            other.append(S, "user", f"line {20 + i}: I live in town {20 + i}", {"i": 20 + i})
        got = fresh(data)
        assert_derived(data, got)
        assert not got.revoked and not got.controls  # the saved line's seq is there again, with another chain

    def test_a_file_ahead_of_a_cut_ledger_is_not_used(self, tmp_path: Path) -> None:
        data = tmp_path / "d"
        build(data)
        fresh(data)
        log = Ledger(data).log_path(S)
        lines = log.read_bytes().splitlines(keepends=True)
        (data / "sessions" / S / "tail.json").unlink()
        log.write_bytes(b"".join(lines[:20]))  # only events 0..19: before every control event
        got = fresh(data)
        assert_derived(data, got)
        assert got.size == 20 and not got.revoked and not got.controls


class TestADamagedFileMeansDeriveAgain:
    @pytest.mark.parametrize(
        "damage",
        ["empty", "torn", "not json", "sum of other bytes", "other version", "span moved, sum fixed", "head changed, sum fixed"],
    )
    def test_a_damaged_or_forged_file_never_gives_a_wrong_state(self, tmp_path: Path, damage: str) -> None:
        data = tmp_path / "d"
        build(data)
        fresh(data)
        path = control_scan.state_path(Ledger(data).session_dir(S))
        raw = path.read_bytes()
        body = raw.split(b"\n")[0]
        if damage == "empty":
            new = b""
        elif damage == "torn":
            new = raw[: len(raw) // 2]
        elif damage == "not json":
            new = b"{" + raw
        elif damage == "sum of other bytes":
            new = body.replace(b'"revoked":[[6,', b'"revoked":[[7,') + raw[len(body) :]
        elif damage == "other version":
            b2 = body.replace(b'"v":1', b'"v":2')
            new = b2 + b"\n" + hashlib.sha256(b2).hexdigest().encode() + b"\n"
        elif damage == "span moved, sum fixed":  # the span holds no line, or another one
            b2 = body.replace(b'"end":', b'"end":1').replace(b'"start":', b'"start":1')
            new = b2 + b"\n" + hashlib.sha256(b2).hexdigest().encode() + b"\n"
        else:
            b2 = body[: body.index(b'"head":"') + 8] + b"0" * 64 + body[body.index(b'"head":"') + 72 :]
            new = b2 + b"\n" + hashlib.sha256(b2).hexdigest().encode() + b"\n"
        path.write_bytes(new)
        assert_derived(data, fresh(data))

    def test_a_state_round_trips_through_the_file_format(self, tmp_path: Path) -> None:
        data = tmp_path / "d"
        build(data)
        st = derive(Ledger(data).events(S))
        back = state_file.decode(state_file.encode(state_file.Saved(st, 10, 20)))
        assert back is not None and fields(back.state) == fields(st) and (back.start, back.end) == (10, 20)
        assert back.state.supersessions.history(2) == st.supersessions.history(2)

    def test_decode_refuses_what_encode_did_not_write(self) -> None:
        assert state_file.decode(b"") is None
        assert state_file.decode(b"{}\n" + hashlib.sha256(b"{}").hexdigest().encode() + b"\n") is None


class TestErasuresOfFoldedRecords:
    def test_an_erasure_record_naming_a_folded_control_event_makes_it_derive_again(self, tmp_path: Path) -> None:
        data = tmp_path / "d"
        led = build(data)
        st = derive(led.events(S))
        led.erase(S, [st.controls[0]])
        record = list(led.events(S))[-1]
        assert erases_folded(st, record)
        assert not erases_folded(st, list(led.events(S))[0])
        led.erase(S, [3])
        assert not erases_folded(st, list(led.events(S))[-1])  # a plain event: nothing folded changes


class TestWhoWritesIt:
    def test_a_call_without_save_writes_nothing(self, tmp_path: Path) -> None:
        data = tmp_path / "d"
        build(data)
        path = control_scan.state_path(Ledger(data).session_dir(S))
        path.unlink()
        revocation._cache.clear()
        assert_derived(data, current(Ledger(data), S))
        assert not path.exists()

    def test_a_revoke_leaves_the_file_up_to_date(self, tmp_path: Path) -> None:
        data = tmp_path / "d"
        build(data)
        revoke(data, S, 11)
        saved = saved_in(Ledger(data).session_dir(S))
        assert saved is not None and fields(saved.state) == fields(derive(Ledger(data).events(S)))

    def test_a_readers_ledger_never_writes_it(self, tmp_path: Path) -> None:
        data = tmp_path / "d"
        build(data)
        path = control_scan.state_path(Ledger(data).session_dir(S))
        path.unlink(missing_ok=True)
        got = fresh(data, reader=True)
        assert_derived(data, got)
        assert not path.exists()

    def test_the_search_cli_writes_nothing_and_uses_a_file_a_writer_left(self, tmp_path: Path) -> None:
        data = tmp_path / "d"
        build(data)
        fresh(data)
        before = {p: p.read_bytes() for p in (data / "sessions").rglob("*") if p.is_file() and p.name != "lock"}
        out = subprocess.run(
            [sys.executable, "-m", "retrieval", "search", str(data), S, "town", "--json", "--include-revoked"],
            capture_output=True, text=True, cwd=ROOT, timeout=120,
        )
        assert out.returncode == 0, out.stderr
        assert '"revoked_by":' in out.stdout
        after = {p: p.read_bytes() for p in (data / "sessions").rglob("*") if p.is_file() and p.name != "lock"}
        assert after == before

    def test_a_rebuild_leaves_every_sessions_file_up_to_date(self, tmp_path: Path) -> None:
        data = tmp_path / "d"
        build(data)
        path = control_scan.state_path(Ledger(data).session_dir(S))
        path.unlink()
        out = subprocess.run([sys.executable, "-m", "retrieval", "rebuild", str(data)], capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert out.returncode == 0, out.stderr
        saved = saved_in(Ledger(data).session_dir(S))
        assert saved is not None and fields(saved.state) == fields(derive(Ledger(data).events(S)))

    def test_a_refused_revoke_writes_no_state_file(self, tmp_path: Path) -> None:
        data = tmp_path / "d"
        build(data)
        path = control_scan.state_path(Ledger(data).session_dir(S))
        path.unlink()
        revocation._cache.clear()
        with pytest.raises(revocation.ControlError):
            revoke(data, S, 6)  # already revoked
        assert not path.exists()


def test_a_chat_turn_leaves_the_control_state_file_level_with_the_ledger(tmp_path: Path) -> None:
    """A turn appends, so it keeps control-state.json for the next process (issue 15): after a revoke and two turns
    the file covers the ledger's controls, and a fresh process folds only what it does not cover."""
    from chat.engine import Engine
    from chat.llm import LLM

    eng = Engine(tmp_path, llm=LLM(api_key=""))
    first = eng.remember(S, "my cat is called Miso")
    eng.remember(S, "I live in Leeds")
    revoke(tmp_path, S, first.seq, ledger=eng.ledger)
    (Ledger(tmp_path).session_dir(S) / control_scan.STATE_FILE).unlink()  # as if only chat ever wrote to it
    revocation._cache.clear()  # and the app that chats is a new process
    eng.turn(S, "what is my cat called?")
    eng.turn(S, "where do I live?")
    saved = saved_in(Ledger(tmp_path).session_dir(S))
    assert saved is not None
    assert set(saved.state.revoked) == {first.seq}
    revocation._cache.clear()  # a fresh process: the file, then the lines after it
    assert current(Ledger(tmp_path), S).revoked.keys() == {first.seq}
