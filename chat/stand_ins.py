"""Which events of a session are the offline stand-in's replies, so that retrieval leaves them out (I/O: the ledger).

A stand-in reply (chat.offline.is_stand_in_reply) is boilerplate around quotes of memories the session already holds:
handed back to a model it fills the budget with noise (issue 31). It stays in the ledger, the record of what was said,
and is left out of every search whose results a model is handed, by seq, before the search's LIMIT — as an answer that
may quote a revoked memory is (chat.citing) — so it never crowds a statement out of the candidates either.

The seqs are learnt from the ledger once per session and process, and only when a search first returns one (a session
that never had a stand-in reply costs nothing); after that each call reads only the events appended since. Only the
lines holding the provider's canonical bytes are parsed (LedgerStore.events_with_meta: a byte search on files, one
statement on PostgreSQL; issue 30: parsing every line was 2.2 s at 100k events, 9.6 s at 1M). What is
known is trusted only while the ledger still holds the same event at the last seq read (its chain hash commits to every
event before it): a session deleted and made anew, or cut by a repair, is read again from the start.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from chat.offline import PROVIDER, is_stand_in_reply
from retrieval.model import Hit
from storage.api import LedgerStore

R = TypeVar("R")


@dataclass
class _Known:
    count: int  # events read: seqs 0 .. count-1
    chain: str  # the chain hash of the event at count-1 when they were read
    seqs: set[int] = field(default_factory=set)


class StandIns:
    """The stand-in replies of each session of one ledger, as far as this process has read them."""

    def __init__(self, ledger: LedgerStore) -> None:
        self.ledger = ledger
        self._known: dict[str, _Known] = {}
        self._lock = threading.Lock()

    def known(self, session: str) -> list[int]:
        """The seqs known so far, brought up to the ledger's end when the session was read before; [] when it never was."""
        with self._lock:
            if session not in self._known:
                return []
        return self.read(session)

    def read(self, session: str) -> list[int]:
        """Every stand-in reply the session's ledger holds now, ascending (read from the start the first time)."""
        count, head = self.ledger.head(session)
        if count == 0:  # no such session (deleted since, by anyone), or an empty one: nothing to know
            self.forget(session)
            return []
        with self._lock:
            known = self._known.get(session)
        if known is not None and not self._still(session, known, count):
            known = None
        if known is None:
            known = _Known(0, "")
        seqs = set(known.seqs)
        if count > known.count:
            found = self.ledger.events_with_meta(session, "provider", PROVIDER, known.count, count)
            seqs.update(ev.seq for ev in found if is_stand_in_reply(ev.role, ev.meta))
            # read up to count-1, whose chain hash is `head` while the ledger is the one head() described; when it is
            # not (deleted and made anew, cut by a repair, in between), the next read finds out and reads it again
            known = _Known(count, head, seqs)
        with self._lock:
            self._known[session] = _Known(known.count, known.chain, seqs)
        return sorted(seqs)

    def _still(self, session: str, known: _Known, count: int) -> bool:
        """Whether the ledger still holds what `known` was read from (the same event at its last seq)."""
        if known.count == 0:
            return True
        if count < known.count:
            return False
        at = self.ledger.read_events(session, [known.count - 1])
        return len(at) == 1 and at[0].chain == known.chain

    def forget(self, session: str) -> None:
        """The session was deleted: what was known of it goes."""
        with self._lock:
            self._known.pop(session, None)

    def left_out(self, session: str, search: Callable[[list[int]], R], hits: Callable[[R], Sequence[Hit]]) -> R:
        """`search(skip)` with every stand-in reply of the session in `skip`: first with those known, and again with
        the ledger read (and any reply a search still returned: appended since, or an index ahead of what was read)
        while one comes back. Each round adds at least one seq to `skip`, so it ends."""
        skip = set(self.known(session))
        while True:
            got = search(sorted(skip))
            found = {h.seq for h in hits(got) if is_stand_in_reply(h.role, h.meta)}
            if not found:
                return got
            skip |= found | set(self.read(session))
