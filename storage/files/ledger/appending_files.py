"""The file Ledger's append path: encode blocks, write them to events.jsonl under the session lock, fsync.
How messages become events (append_messages, Appended) is pure, in ledger/appending.py."""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Sequence
from typing import Any

from ledger.appending import Appended, append_messages
from ledger.bulk import Block, chain
from ledger.event import Event
from ledger.messages import Message, validate_message
from storage.common.fsmode import write_all as _write_all
from storage.files.ledger.recovery import Recovery, _stat_key, _Tail


class Appending(Recovery):
    """Appends (Ledger's base)."""

    # -- writing -----------------------------------------------------------
    def append(
        self,
        session: str,
        role: str,
        text: str,
        meta: dict[str, Any] | None = None,
        ts: str | None = None,
    ) -> Event:
        """Append one event; durable (fsync) before it returns."""
        return self.append_many(session, [validate_message(role, text, meta, ts)], _validated=True)[0]

    def append_many(self, session: str, messages: Sequence[Message], *, _validated: bool = False) -> list[Event]:
        """Append a batch with one write and one fsync.

        Every message is validated before anything is written: one bad message
        refuses the whole batch.
        """
        return append_messages(self.append_blocks, session, messages, validated=_validated)

    def append_blocks(self, session: str, encode: Callable[[int], list[Block]], seq: int, head: bytes) -> Appended:
        """Append blocks of encoded events (ledger/bulk.py) with one fsync; the blocks as written.

        `encode(seq)` gives the blocks, their first event at `seq`: it is called under the lock
        unless the blocks it gave for `seq` are already there, chained from `head` (both as the
        caller guessed them: ledger/importer.py encodes in other processes before the lock).
        Under the lock, the blocks are encoded again when the session's next seq is not `seq`,
        and chained again when its head is not `head`.
        """
        with self._locked(session, create=True) as sdir:
            log_file = self._paths(session)[1]
            st = os.stat(log_file)
            tail = self._tail_state(session, sdir, st)
            blocks = encode(tail.next_seq)
            if tail.next_seq != seq or tail.head != head or any(len(b.heads) != 32 * b.count for b in blocks):
                prev = tail.head
                for b in blocks:
                    prev = chain(b, prev)
            chunks = tail.chunks.copy()  # moves on only after the fsync, like the rest of the tail
            light = tail.light  # a tail from the record keeps no chunks or marks: a walk rebuilds them
            scanned = not light or len(tail.offsets) == tail.next_seq
            new_offsets = array("Q")
            new_marks = array("Q")
            pos = tail.size
            fd = self._log_fd(session, log_file, st.st_ino)
            for b in blocks:
                _write_all(fd, b.data)
                if not light:
                    chunks.append_block(b.data, b.starts, b.heads)
                    new_marks.extend(b.marks())
                new_offsets.extend(map(pos.__add__, b.starts))
                pos += len(b.data)
            os.fsync(fd)
            stat = _stat_key(os.fstat(fd))
            # only now does the cache move on: after a failed write the next call re-reads the tail
            if scanned:
                tail.offsets.extend(new_offsets)
            if not light:
                tail.marks.extend(new_marks)
            head0 = tail.head
            next_seq = tail.next_seq + len(new_offsets)
            new = _Tail(
                pos, next_seq, blocks[-1].head(blocks[-1].count - 1), tail.offsets, chunks, tail.marks, stat if stat[1] == pos else None,
                tail.erasures, light, new_offsets[-1],
            )
            self._tails[session] = new
            self._save_record(sdir, new)
            return Appended(blocks, head0)
