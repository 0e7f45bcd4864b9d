"""The supersession records a ledger walk passes over (docs/FORMAT.md §19), found without a second parse (pure).

The auditor (receipts/audit.py) walks every line once; `ledger.states` (§20) then needs, for a receipt, the
records before its answer. Asking the ledger line by line from the oldest cited memory to the answer is a scan
per receipt; instead the walk keeps the list of (record seq, superseded seq), a few entries per change of fact,
with its cache, and the check reads that list.

How the walk finds them without parsing twice: a verified line is its canonical bytes (§1), so a supersession
record's line holds `"text":"[control record: supersede]"` verbatim. `RecordScan` notes where that byte string
occurs in the stream as it goes by (a C-speed search per block); only the lines holding it are parsed again and
kept when `supersession_of_record` says they are records. A match elsewhere (the string inside meta, say) is a
line parsed for nothing, never a record missed: a user's text holding it is escaped (`\\"text\\":…`), and an
erased line has no text, so is no record.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ledger.canonical import dumps_unchecked
from ledger.supersessions import SUPERSEDE_TEXT, supersession_of_record

NEEDLE = b'"text":' + dumps_unchecked(SUPERSEDE_TEXT)

Record = tuple[int, int]  # (record seq, seq of the event it supersedes)


class RecordScan:
    """Byte offsets (in the ledger) at which a supersession record's text field may begin, as blocks go by."""

    __slots__ = ("hits", "_pos", "_tail")

    def __init__(self, start: int) -> None:
        self.hits: list[int] = []
        self._pos = start  # ledger offset of the next block's first byte
        self._tail = b""  # the previous block's last len(NEEDLE) - 1 bytes: a match may straddle two blocks

    def tee(self, blocks: Iterable[bytes]) -> Iterator[bytes]:
        keep = len(NEEDLE) - 1
        for block in blocks:
            if self._tail:  # only matches that begin in the tail: the rest are found in the block itself
                seam = self._tail + block[:keep]
                i = seam.find(NEEDLE)
                while i != -1:
                    self.hits.append(self._pos - len(self._tail) + i)
                    i = seam.find(NEEDLE, i + 1)
            i = block.find(NEEDLE)
            while i != -1:
                self.hits.append(self._pos + i)
                i = block.find(NEEDLE, i + 1)
            self._tail = (self._tail + block)[-keep:] if len(block) < keep else block[-keep:]
            self._pos += len(block)
            yield block


def records_at(
    hits: Sequence[int], line_starts: Sequence[int], first_seq: int, end: int, verified: int, read: Callable[[int, int], dict[str, Any]]
) -> list[Record]:
    """The supersession records among the lines holding `hits`.

    `line_starts[i]` is where the line of seq `first_seq + i` begins (ascending), `end` where the last one ends;
    only lines below seq `verified` count; `read(start, end)` gives a line's fields."""
    out: dict[int, int] = {}
    for hit in hits:
        i = bisect_right(line_starts, hit) - 1
        seq = first_seq + i
        if i < 0 or seq >= verified or seq in out:
            continue
        start, stop = line_starts[i], line_starts[i + 1] if i + 1 < len(line_starts) else end
        if not start <= hit < stop:
            continue
        what = supersession_of_record(read(start, stop))
        if what is not None:
            out[seq] = what.old_seq
    return sorted(out.items())


def cut(records: Iterable[Record], n: int) -> tuple[Record, ...]:
    """The records before seq `n` (a walk restarting there)."""
    return tuple(r for r in records if r[0] < n)


def to_json(records: Iterable[Record]) -> list[list[int]]:
    return [[s, old] for s, old in records]


def from_json(obj: Any, verified: int) -> tuple[Record, ...]:
    """From `to_json` output covering `verified` lines; ValueError for anything else (a cache is outside input)."""
    if type(obj) is not list:
        raise ValueError("supersession records")
    out: list[Record] = []
    for item in obj:
        if type(item) is not list or len(item) != 2 or not all(type(v) is int for v in item):
            raise ValueError("supersession record")
        seq, old = item
        if not 0 <= old < seq < verified or (out and seq <= out[-1][0]):
            raise ValueError("supersession record seqs")
        out.append((seq, old))
    return tuple(out)


__all__ = ["NEEDLE", "Record", "RecordScan", "cut", "from_json", "records_at", "to_json"]
