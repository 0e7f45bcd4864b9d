"""The file Ledger's erasure: rewrite events.jsonl without the erased lines and append the erasure records.
What an erasure is and how one is planned (EraseError, Erasure, plan_erasure) is pure, in ledger/erasing.py."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from pathlib import Path

import orjson

from ledger.erasing import EraseError, Erasure, check_erase_args, log, plan_erasure
from ledger.event import (
    Event,
    event_from_dict,
)
from storage.files.ledger.recovery import Recovery, _mark, _stat_key, _Tail
from storage.files.ledger.rewrite import rewrite


class Erasing(Recovery):
    """Erasure (Ledger's base)."""

    def erase(self, session: str, seqs: Iterable[int], *, reason: str | None = None) -> Erasure:
        """Erase events: their lines rewritten in erased form, erasure records appended, in one transaction.

        Under the session's lock: validate (EraseError, one line, nothing changed), write the
        whole new file to a temp file beside it, fsync, rename over events.jsonl, fsync the
        folder (ledger/rewrite.py). Every digest and chain hash stays the same; one erasure
        record per MAX_RECORD_ENTRIES erased events (consecutive, in seq order, the same ts and
        reason) grows the chain, all in that one rename. Writers in other processes see the replaced file under the
        lock and walk its changed chunks again (Ledger._tail_state).
        """
        wanted = check_erase_args(session, seqs, reason)
        if not self.exists(session):
            raise EraseError(f"session {session}: no such session")
        with self._locked(session, create=False) as sdir:
            path = self._paths(session)[1]
            tail = self._tail_state(session, sdir, full=True)  # rewrite needs every offset and chunk
            for seq in wanted:
                if not seq < tail.next_seq:
                    raise EraseError(f"session {session}: no event at seq {seq} (it holds {tail.next_seq})")
            old = self._read_lines(path, tail, wanted)
            erasures = tail.erasures.copy()  # what the tail will know once the new file is in place
            gone, records, appended = plan_erasure(session, old, tail.head, tail.next_seq, reason, erasures)
            at, prev = tail.next_seq, appended[-1][1]
            done = rewrite(
                path,
                tail.size,
                tail.offsets,
                tail.chunks.chunks(),
                {e.seq: e.to_line() for e in gone},
                appended,
                tail.chunks.open_hash(),
            )
            self._drop_log_fd(session)  # it writes to the old file: the next append opens the new one
            marks = array("Q", tail.marks)
            marks.extend(_mark(head) for _line, head in appended)
            new = _Tail(done.size, at + len(records), prev, done.offsets, done.chunks, marks, _stat_key(done.stat), erasures)
            self._tails[session] = new
            self._save_record(sdir, new)
            log.info(
                "session %s: erased %d event(s) (seqs %s), erasure record(s) at seq %d-%d",
                session, len(gone), wanted, records[0].seq, records[-1].seq,
            )
            return Erasure(gone, records[-1], records)

    @staticmethod
    def _read_lines(path: Path, tail: _Tail, seqs: Sequence[int]) -> list[Event]:
        out = []
        with open(path, "rb") as f:
            for seq in seqs:
                start = tail.offsets[seq]
                end = tail.offsets[seq + 1] if seq + 1 < tail.next_seq else tail.size
                f.seek(start)
                out.append(event_from_dict(orjson.loads(f.read(end - start)), seq + 1))
        return out
