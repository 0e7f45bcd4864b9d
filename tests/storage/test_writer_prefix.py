"""The writer refuses to append on top of a prefix that changed under it (issue 17 §1).

Its tail cache used to be keyed on the file's size only: after an in-place edit
a running app kept appending (and signing) on top of a ledger that no longer
verified. Now the tail is trusted as is only while (inode, size, mtime, ctime)
are what the writer last saw; otherwise the prefix is re-hashed chunk by chunk
and must be unchanged, and a changed line is named.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import ledger.chunks
import storage.files.ledger.recovery
from ledger.corrupted import LedgerCorrupted
from ledger.event import make_event
from ledger.verify import ChainWalker
from storage.files.ledger.store import Ledger

ROOT = Path(__file__).resolve().parents[2]
S = "alice"


def _filled(tmp_path: Path, n: int = 20) -> Ledger:
    led = Ledger(tmp_path)
    for i in range(n):
        led.append(S, "user" if i % 2 == 0 else "assistant", f"message number {i:04d}")
    return led


def _lines(led: Ledger) -> list[bytes]:
    return led.log_path(S).read_bytes().splitlines(keepends=True)


def _write_back(led: Ledger, lines: list[bytes], *, restore_mtime: bool) -> None:
    path = led.log_path(S)
    before = os.stat(path)
    with open(path, "r+b") as f:  # in place: same inode
        f.write(b"".join(lines))
        f.truncate()
    if restore_mtime:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert os.stat(path).st_mtime_ns == before.st_mtime_ns


def _flip_text(line: bytes) -> bytes:
    """The same line, same length, one character of its text changed (its digest no longer matches)."""
    at = line.index(b"message number ") + len(b"message number ")
    return line[:at] + (b"9" if line[at : at + 1] != b"9" else b"8") + line[at + 1 :]


def _rechained(line: bytes, prev: bytes, seq: int) -> bytes:
    """A different, valid event at `seq` linked to `prev` (same length): it verifies, the next line does not."""
    import orjson

    old = orjson.loads(line)
    ev = make_event(
        session=S, seq=seq, prev=prev, role=old["role"], text=old["text"].replace("number", "NUMBER"),
        meta=old["meta"], ts=old["ts"], event_id=old["id"], salt=bytes.fromhex(old["salt"]),
    )
    out = ev.to_line()
    assert len(out) == len(line)
    return out


class TestInPlaceEdits:
    @pytest.mark.parametrize("restore_mtime", [True, False])
    def test_an_edited_middle_line_refuses_the_next_append_naming_it(self, tmp_path: Path, restore_mtime: bool) -> None:
        led = _filled(tmp_path)
        lines = _lines(led)
        lines[7] = _flip_text(lines[7])
        _write_back(led, lines, restore_mtime=restore_mtime)
        size = led.log_path(S).stat().st_size
        with pytest.raises(LedgerCorrupted, match=r"line 8 \(seq 7\) changed after this writer verified it"):
            led.append(S, "user", "on top of an edited ledger")
        assert led.log_path(S).stat().st_size == size  # nothing appended
        with pytest.raises(LedgerCorrupted, match=r"line 8 \(seq 7\)"):  # and it stays refused
            led.append(S, "user", "again")

    def test_every_line_edited_in_place_is_named_and_restoring_it_is_accepted(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Generated: each line in turn (chunks of 4 lines, so every chunk position is hit), mtime restored."""
        monkeypatch.setattr(ledger.chunks, "CHUNK_LINES", 4)
        led = _filled(tmp_path, 14)
        pristine = _lines(led)
        wrong = []
        for i in range(len(pristine)):
            lines = list(pristine)
            lines[i] = _flip_text(lines[i])
            _write_back(led, lines, restore_mtime=True)
            try:
                led.open_session(S)
                wrong.append((i, "accepted"))
            except LedgerCorrupted as exc:
                if f"line {i + 1} (seq {i}) changed" not in str(exc):
                    wrong.append((i, str(exc)))
            _write_back(led, pristine, restore_mtime=True)
            led.open_session(S)  # the prefix is back, byte for byte: trusted again
        assert wrong == []
        assert led.append(S, "user", "after all that").seq == 14

    def test_a_rewritten_and_rechained_line_is_named_not_the_one_after_it(self, tmp_path: Path) -> None:
        led = _filled(tmp_path)
        lines = _lines(led)
        import orjson

        prev = bytes.fromhex(orjson.loads(lines[10])["chain"])
        lines[11] = _rechained(lines[11], prev, 11)
        _write_back(led, lines, restore_mtime=True)
        with pytest.raises(LedgerCorrupted, match=r"line 12 \(seq 11\) changed after this writer verified it: its bytes differ") as err:
            led.open_session(S)
        assert err.value.report.brk is not None and err.value.report.brk.kind == ledger.chunks.PREFIX_CHANGED

    def test_a_truncated_prefix_is_refused(self, tmp_path: Path) -> None:
        led = _filled(tmp_path)
        lines = _lines(led)
        _write_back(led, lines[:5], restore_mtime=False)
        with pytest.raises(LedgerCorrupted, match=r"line 6 \(seq 5\) changed .*the file now ends before it"):
            led.append(S, "user", "x")

    def test_an_edit_in_a_later_chunk_is_found_and_named(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(ledger.chunks, "CHUNK_LINES", 4)
        led = _filled(tmp_path, 30)
        assert len(led._tails[S].chunks.chunks()) == 8  # 7 full chunks of 4 lines and one of 2
        lines = _lines(led)
        lines[25] = _flip_text(lines[25])
        _write_back(led, lines, restore_mtime=True)
        with pytest.raises(LedgerCorrupted, match=r"line 26 \(seq 25\)"):
            led.append(S, "user", "x")


class TestWhatIsStillTrusted:
    def test_appends_with_nothing_changed_never_re_hash(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        led = _filled(tmp_path, 5)

        def boom(*_a: object) -> None:
            raise AssertionError("re-hashed although the file is as this writer left it")

        monkeypatch.setattr(storage.files.ledger.recovery, "rehash", boom)
        for i in range(5):
            led.append(S, "user", f"more {i}")
        assert led.head(S)[0] == 10

    def test_lines_another_process_appends_are_accepted_and_walked_alone(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        led = _filled(tmp_path, 10)
        code = (
            "import sys; from storage.files.ledger.store import Ledger\n"
            "led = Ledger(sys.argv[1])\n"
            "for i in range(7): led.append('alice', 'user', f'from elsewhere {i}')\n"
        )
        subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, cwd=ROOT, timeout=60)
        steps = []
        real_step = ChainWalker.step

        def counting(self: ChainWalker, raw: bytes, *, last: bool = False) -> object:
            steps.append(self.line_no)
            return real_step(self, raw, last=last)

        monkeypatch.setattr(ChainWalker, "step", counting)
        ev = led.append(S, "assistant", "mine again")
        assert ev.seq == 17
        assert steps == list(range(10, 17))  # only the 7 new lines were walked, from where this writer stood
        monkeypatch.undo()
        report = led.verify(S, parallel=False)
        assert report.ok and report.events == 18

    def test_a_writer_after_another_process_still_catches_a_later_edit(self, tmp_path: Path) -> None:
        led = _filled(tmp_path, 10)
        other = Ledger(tmp_path)
        other.append(S, "user", "from another writer")
        led.append(S, "user", "mine")  # accepted: the prefix it held is unchanged
        lines = _lines(led)
        lines[10] = _flip_text(lines[10]) if b"message number" in lines[10] else lines[10].replace(b"another", b"ANOTHER")
        _write_back(led, lines, restore_mtime=True)
        with pytest.raises(LedgerCorrupted, match=r"line 11 \(seq 10\)"):
            led.append(S, "user", "x")
