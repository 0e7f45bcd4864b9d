"""The durable append path: events encoded (ledger/bulk.py), chained, written with one fsync under the lock.

`append` and `append_many` encode under the lock; `import_jsonl` validates and encodes a whole file
first (ledger/importer.py, in worker processes for large files) and appends it in one batch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import NamedTuple

from ledger.bulk import ID_BYTES, Block, encode_messages, random_ids
from ledger.event import GENESIS, SALT_BYTES, Event, now_ts, validate_session_id
from ledger.messages import Message, validate_message

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


