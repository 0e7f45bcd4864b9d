"""The durable append path: events encoded (ledger/bulk.py), chained, written with one fsync under the lock.

`append` and `append_many` encode under the lock; `import_jsonl` validates and encodes a whole file
first (ledger/importer.py, in worker processes for large files) and appends it in one batch.
"""

from __future__ import annotations

import logging
import os
from array import array
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from ledger.bulk import ID_BYTES, Block, chain, encode_messages, random_ids
from ledger.event import GENESIS, SALT_BYTES, Event, now_ts, validate_session_id
from ledger.messages import Message, validate_message
from ledger.recovery import Recovery, _stat_key, _Tail
from ledger.sessions import _write_all

log = logging.getLogger("ledger")


class Appended(NamedTuple):
    """What Ledger.append_blocks wrote: the blocks, chained, and the chain head before them."""

    blocks: list[Block]
    head0: bytes


def _random_ids(n: int) -> tuple[list[bytes], list[str]]:
    blob = random_ids(n)
    salts, ids = [], []
    step = SALT_BYTES + 16
    for i in range(n):
        chunk = blob[i * step : (i + 1) * step]
        salts.append(chunk[:SALT_BYTES])
        ids.append("evt_" + chunk[SALT_BYTES:].hex())
    return salts, ids


def appended_events(session: str, messages: Sequence[Message], written: Appended, ids: bytes, now: str) -> list[Event]:
    """The Events an append_many wrote: its messages, ids and `now` as encoded in the one block `written` holds (pure)."""
    (block,) = written.blocks
    events = []
    prev = written.head0
    for i, m in enumerate(messages):
        at = i * ID_BYTES
        chain_hash = block.head(i)
        events.append(
            Event(
                session=session,
                seq=block.seq + i,
                id="evt_" + ids[at + SALT_BYTES : at + ID_BYTES].hex(),
                role=m.role,
                ts=m.ts or now,
                meta=m.meta,
                text=m.text,
                salt=ids[at : at + SALT_BYTES].hex(),
                digest=block.digests[32 * i : 32 * i + 32].hex(),
                prev=prev.hex(),
                chain=chain_hash.hex(),
            )
        )
        prev = chain_hash
    return events


def append_messages(
    append_blocks: Callable[[str, Callable[[int], list[Block]], int, bytes], Appended],
    session: str,
    messages: Sequence[Message],
    *,
    validated: bool = False,
) -> list[Event]:
    """`append_many` on either backend: validate every message first (one bad one refuses the batch), encode
    them at the seq the store's `append_blocks` finds under its lock, and return the events as written."""
    validate_session_id(session)
    if not validated:
        messages = [validate_message(m.role, m.text, m.meta, m.ts) for m in messages]
    if not messages:
        return []
    ids = random_ids(len(messages))
    now = ""

    def encode(seq: int) -> list[Block]:
        nonlocal now
        now = now_ts()
        return [encode_messages(session, seq, messages, now, ids)]

    written = append_blocks(session, encode, 0, GENESIS)
    return appended_events(session, messages, written, ids, now)


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
