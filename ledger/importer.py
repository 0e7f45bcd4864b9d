"""Importing a file of messages: every line validated and encoded first, then one append.

`stage` reads the whole file and refuses it at its first bad line (ImportError_, docs/FORMAT.md
§7) before anything is written; what it keeps is each event encoded (ledger/bulk.py) and
chained from the session's tail as its tail record tells it, so that `commit` has only to
take the lock and write. Files of PARALLEL_MIN_LINES lines or more, on a machine with a core
to spare (workers_for), are encoded in worker processes (ledger/bulkpool.py), one block of
BLOCK_LINES lines at a time, and chained here in order as the blocks come back: the chain is
the only sequential part. Under the lock,
`commit` encodes again whatever the guess got wrong (another writer appended in between)
and writes the same bytes a serial import would.

A message without `ts` gets the time the import started.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain as concat
from itertools import islice
from typing import TYPE_CHECKING, Any, Protocol, overload

import orjson

from ledger.bulk import ID_BYTES, Block, chain, encode_messages, random_ids
from ledger.bulkpool import Task, encode_blocks, run_task
from ledger.event import SALT_BYTES, Event, event_from_dict, now_ts, validate_session_id
from ledger.messages import ImportError_, Message, latest_ts

if TYPE_CHECKING:
    from ledger.appending import Appended

PARALLEL_MIN_LINES = 100_000  # below this, starting worker processes (~0.2 s of CPU each) costs more than it saves
BLOCK_LINES = 16_384
MAX_WORKERS = 4
TAG_IMPORT = b"mre:v1:import\x00"  # ledger/imports.py's content hash (its own copy: that module imports the store)


@dataclass(slots=True)
class Staged:
    """An import file validated and encoded, nothing written: `commit` appends it."""

    session: str
    blocks: list[Block]
    seq: int  # the first event's seq, as guessed
    head: bytes  # the chain head the blocks are chained from, as guessed
    count: int
    sha256: str | None  # the import's content hash (ledger/imports.py), when asked


def workers_for(lines: int, load: float | None = None) -> int:
    """Worker processes for an import of `lines` lines: none below PARALLEL_MIN_LINES, on one core, or on a busy machine.

    Workers add CPU (their start-up, moving the lines and blocks between processes: 12.6 against
    10.6 us per event measured at 1M) and pay it back only with a core that would otherwise idle.
    On a machine whose 1-minute load average (`load`, default os.getloadavg; this process counts
    as 1) leaves no half core free, the import runs in this process (measured there, with other
    work running: 52.7k events/s with workers, 68.6k/s without).
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    if lines < PARALLEL_MIN_LINES or cores < 2:
        return 0
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:  # pragma: no cover - no load average here
            load = 0.0
    return min(cores, MAX_WORKERS) if load < cores - 0.5 else 0


def stage(
    ledger: TailGuesser | None,
    session: str,
    lines: Iterable[bytes],
    progress: Any = None,
    *,
    allow_system: bool = False,
    content: bool = False,
    workers: int | None = None,
    tail: tuple[int, bytes] | None = None,
) -> Staged:
    """Parse, validate and encode every line; ImportError_ naming the first bad one. Nothing is written.

    `workers`: None decides by the file's size (workers_for), 0 encodes here. `tail`: the session's
    (next seq, head) as the caller guesses it (a backend without tail records); `commit` checks it.
    """
    validate_session_id(session)
    if tail is None:
        if ledger is None:
            raise TypeError("stage: give a file Ledger or the session's tail")
        tail = ledger.guess_tail(session)
    seq, head = tail
    now, latest = now_ts(), latest_ts()
    todo = iter(lines)
    first = list(islice(todo, PARALLEL_MIN_LINES))
    if workers is None:
        workers = workers_for(len(first))

    def tasks() -> Iterator[Task]:
        n = 1
        rest = concat(first, todo)
        while block := list(islice(rest, BLOCK_LINES)):
            yield Task(session, block, n, seq, now, latest, allow_system, random_ids(len(block)), content)
            n += len(block)

    blocks = encode_blocks(tasks(), workers) if workers else map(run_task, tasks())
    kept: list[Block] = []
    digest = hashlib.sha256(TAG_IMPORT) if content else None
    count = 0
    blank = 0  # the first of the blank lines the blocks so far end with
    prev = head
    try:
        for block in blocks:
            if blank and (block.first_text or block.error):
                raise ImportError_(blank, "empty line (blank lines are accepted only at the end of the file)")
            if block.error is not None:
                raise ImportError_(*block.error)
            blank = block.blank_from if block.count else blank or block.blank_from
            prev = chain(block, prev)
            if digest is not None and block.content is not None:
                digest.update(block.content)
                block.content = None
            count += block.count
            if block.count:
                kept.append(block)
            if progress is not None:
                progress.update(block.lines)
    finally:
        close = getattr(blocks, "close", None)
        if close is not None:
            close()  # stops the workers when a bad line ended the import early
    if not count:
        raise ImportError_(0, "the import file holds no messages")
    return Staged(session, kept, seq, head, count, digest.hexdigest() if digest is not None else None)


class TailGuesser(Protocol):
    """A backend that can say a session's (next seq, head) without a walk or a write (the file Ledger's tail record)."""

    def guess_tail(self, session: str) -> tuple[int, bytes]: ...


class BlockWriter(Protocol):
    """What `commit` and Imported need of a ledger (the file Ledger, storage.pg.ledger.PgLedger)."""

    def append_blocks(self, session: str, encode: Callable[[int], list[Block]], seq: int, head: bytes) -> Appended: ...

    def read_events(self, session: str, seqs: Iterable[int]) -> list[Event]: ...


def commit(ledger: BlockWriter, staged: Staged) -> Imported:
    """Append a staged import in one batch (one fsync); the events it appended."""
    blocks = staged.blocks

    def encode(seq: int) -> list[Block]:
        return blocks if seq == staged.seq else [_renumber(staged.session, b, seq + b.seq - staged.seq) for b in blocks]

    written = ledger.append_blocks(staged.session, encode, staged.seq, staged.head)
    first, last = written.blocks[0], written.blocks[-1]
    events = Imported(ledger, staged.session, _event_at(first, 0), _event_at(last, last.count - 1))
    staged.blocks = []  # the bytes are in the ledger now: let them go
    return events


def _line(block: Block, i: int) -> bytes:
    end = block.starts[i + 1] if i + 1 < block.count else len(block.data)
    return bytes(block.data[block.starts[i] : end])


def _event_at(block: Block, i: int) -> Event:
    return event_from_dict(orjson.loads(_line(block, i)))


def _renumber(session: str, block: Block, seq: int) -> Block:
    """The block's events encoded again from `seq` (same messages, ids, salts and ts): another writer came first."""
    messages, ids = [], bytearray()
    for i in range(block.count):
        obj = orjson.loads(_line(block, i))
        messages.append(Message(obj["role"], obj["text"], obj["meta"], obj["ts"]))
        ids += bytes.fromhex(obj["salt"]) + bytes.fromhex(obj["id"].removeprefix("evt_"))
    assert len(ids) == block.count * ID_BYTES and SALT_BYTES == 32
    return encode_messages(session, seq, messages, "", bytes(ids))


class Imported(Sequence[Event]):
    """The events an import appended: the first and last at hand, any other read from the ledger."""

    def __init__(self, ledger: BlockWriter, session: str, first: Event, last: Event) -> None:
        self._ledger, self._session = ledger, session
        self.first, self.last = first, last

    def __len__(self) -> int:
        return self.last.seq - self.first.seq + 1

    @overload
    def __getitem__(self, i: int) -> Event: ...

    @overload
    def __getitem__(self, i: slice) -> list[Event]: ...

    def __getitem__(self, i: int | slice) -> Event | list[Event]:
        n = len(self)
        if isinstance(i, slice):
            return self._ledger.read_events(self._session, [self.first.seq + k for k in range(*i.indices(n))])
        k = i + n if i < 0 else i
        if not 0 <= k < n:
            raise IndexError(f"import of {n} events: no event {i}")
        if k == 0:
            return self.first
        if k == n - 1:
            return self.last
        (ev,) = self._ledger.read_events(self._session, [self.first.seq + k])
        return ev

    def __repr__(self) -> str:
        return f"<Imported {len(self)} events into {self._session}: seq {self.first.seq}..{self.last.seq}>"


__all__ = ["BLOCK_LINES", "PARALLEL_MIN_LINES", "Imported", "Staged", "commit", "stage", "workers_for"]
