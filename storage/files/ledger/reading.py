"""Reading a session: its events in order, a few by seq (by offset, or by bisection when the writer's tail
came from the tail record), and verification from genesis (serial walk, or ledger/parallel.py first).
"""

from __future__ import annotations

import logging
from array import array
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from ledger.canonical import member_bytes
from ledger.event import EVENTS_FILE, Event, event_from_dict
from ledger.verify import SessionReport, read_chunks, split_lines, verify_stream
from storage.files.ledger import control_scan, tailrecord
from storage.files.ledger.parallel import counted, verify_file_parallel_erased
from storage.files.ledger.recovery import Recovery, _Tail

log = logging.getLogger("ledger")
BISECT_MAX = 64  # seqs one read_events finds by bisection when the offsets are not known; more: one scan


class Reading(Recovery):
    """Reads (Ledger's base)."""

    # -- reading -----------------------------------------------------------
    @contextmanager
    def _snapshot(self, session: str, *, offsets: bool = False) -> Iterator[tuple[_Tail, BinaryIO]]:
        """The session's tail and its log opened under the lock: the same file, whatever happens next.

        An erasure in another process replaces the file by a rename (its lines shorter, every
        later offset moved): a descriptor opened under the lock still reads the file this tail
        describes, never the new one with this tail's offsets.
        """
        with self._locked(session, create=False) as sdir:
            tail = self._tail_state(session, sdir)
            if offsets and len(tail.offsets) != tail.next_seq:
                tail = self._scan_offsets(session, sdir, tail)
            f = open(sdir / EVENTS_FILE, "rb")  # noqa: SIM115 - closed below, after the lock is released
        try:
            yield tail, f
        finally:
            f.close()

    def _scan_offsets(self, session: str, sdir: Path, tail: _Tail) -> _Tail:
        """A tail opened from the record learns each line's offset by a newline scan (no parse).

        The scan must find exactly the record's lines, the last where the record says; else walk.
        """
        found = tailrecord.line_offsets(sdir / EVENTS_FILE, tail.size)
        if len(found) == tail.next_seq and found[-1] == tail.last:
            tail.offsets = array("Q", found)
            return tail
        log.info("session %s: the tail record does not match the file's lines; walking it", session)
        return self._tail_state(session, sdir, full=True)

    def events(self, session: str, start_seq: int = 0) -> Iterator[Event]:
        """Iterate a session's events in order (after recovering a torn tail).

        Reads the stored lines as they are; use verify() to check them.
        """
        with self._snapshot(session) as (tail, f):
            line_no, at = 0, 0
            if start_seq > 0:  # from its line on: the lines before are neither read nor parsed
                if start_seq >= tail.next_seq:
                    return
                at = self._line_start(tail, f, start_seq)
                if at > 0:
                    f.seek(at)
                    line_no = start_seq
            for raw, _torn in split_lines(read_chunks(f, tail.size - at)):
                line_no += 1
                obj = orjson.loads(raw)
                if obj["seq"] >= start_seq:
                    yield event_from_dict(obj, line_no)

    def events_with_meta(self, session: str, key: str, value: str, start: int, stop: int) -> list[Event]:
        """The events with start <= seq < stop whose meta holds `key` == `value`, in seq order (issue 30).

        A byte search of the lines (control_scan.scan, the control state's reader: no parse) for the member's canonical
        bytes (ledger.canonical.member_bytes), from the line of `start` on (found as events() finds it); only the lines
        holding them are parsed, and kept when their meta has the member. Every canonical line whose meta has it holds
        those bytes, so this is what events() filtered the same way returns; a line holding them elsewhere (a nested
        meta value, another string's escape does not match) is parsed for nothing. A torn tail is left out as there.
        [] for no such session (as on PostgreSQL: the caller read its head before, and it was deleted since)."""
        needle = member_bytes(key, value)
        out: list[Event] = []
        if not self.log_path(session).is_file():
            return out
        with self._snapshot(session) as (tail, f):
            stop = min(stop, tail.next_seq)
            start = max(start, 0)
            if start >= stop:
                return out
            at = self._line_start(tail, f, start) if start > 0 else 0
            f.seek(at)
            first = start if at > 0 else 0
            lines, _last = control_scan.scan(f, at, first, stop, (needle,))
        for n, raw in lines:
            obj = orjson.loads(raw)
            meta = obj.get("meta")
            if start <= obj["seq"] < stop and type(meta) is dict and meta.get(key) == value:
                out.append(event_from_dict(obj, n + 1))
        return out

    @staticmethod
    def _line_start(tail: _Tail, f: BinaryIO, seq: int) -> int:
        """Where the line of `seq` starts: from the offsets when known, else by bisection; 0 (read from the start)
        when the file does not behave like such a log (the seq filter then skips the lines before)."""
        if len(tail.offsets) == tail.next_seq:
            return int(tail.offsets[seq])
        span = tailrecord.find_line(f.fileno(), seq, tail.size, tail.last, tail.next_seq)
        return 0 if span is None else span[0]

    def read_events(self, session: str, seqs: Iterable[int]) -> list[Event]:
        """The events at the given seqs, read directly by byte offset (O(1) each).

        Raises IndexError for a seq the session does not hold. The lines are
        read as stored; their digests are what a caller checks against.
        """
        wanted = list(seqs)
        # A tail opened from the record finds a few lines by bisection (O(log n) lines each); many, by a scan.
        out = self._read_at(session, wanted, offsets=len(wanted) > BISECT_MAX)
        if out is None:  # when in doubt, scan
            out = self._read_at(session, wanted, offsets=True)
        assert out is not None  # every offset known: nothing was bisected
        return out

    def _read_at(self, session: str, wanted: list[int], *, offsets: bool) -> list[Event] | None:
        """read_events; None when a line could not be found by bisection (the caller scans instead)."""
        out = []
        with self._snapshot(session, offsets=offsets) as (tail, f):
            for seq in wanted:
                if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq < tail.next_seq:
                    raise IndexError(f"session {session}: no event at seq {seq!r} (it holds {tail.next_seq})")
                if len(tail.offsets) == tail.next_seq:
                    start = tail.offsets[seq]
                    end = tail.offsets[seq + 1] if seq + 1 < len(tail.offsets) else tail.size
                else:
                    span = tailrecord.find_line(f.fileno(), seq, tail.size, tail.last, tail.next_seq)
                    if span is None:
                        return None
                    start, end = span
                f.seek(start)
                out.append(event_from_dict(orjson.loads(f.read(end - start)), seq + 1))
        return out

    def verify(self, session: str, *, parallel: bool = True, progress: Any = None) -> SessionReport:
        """Verify one session from genesis, streaming, in constant memory.

        Ledgers over 64 MB are first checked in one process per core
        (ledger/parallel.py); any doubt falls back to the serial walk.
        `progress` (tqdm-like) is updated with the bytes read; a fallback walk starts it again.
        """
        path = self.log_path(session)
        if not path.is_file():
            raise FileNotFoundError(f"session {session}: no such session")
        tell = None if progress is None else progress.update
        start = None if progress is None else progress.n
        fast = verify_file_parallel_erased(path, session, progress=tell) if parallel else None
        if fast is not None:
            report = SessionReport(session, True, fast[0], fast[1], erased=fast[2])
        else:  # the serial walk is the judge: it names the first break
            if progress is not None and progress.n != start:
                progress.update(start - progress.n)  # what the parallel check read is read again
            with open(path, "rb") as f:
                report = verify_stream(session, counted(read_chunks(f), tell))
        torn = tuple(sorted(str(p) for p in path.parent.glob(f"{EVENTS_FILE}.torn-*")))
        if torn:
            report = report.with_quarantined(torn)
        return report
