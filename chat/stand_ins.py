"""Which events of a session are the offline stand-in's replies, so that retrieval leaves them out (I/O: the ledger).

A stand-in reply (chat.offline.is_stand_in_reply) is boilerplate around quotes of memories the session already holds:
handed back to a model it fills the budget with noise (issue 31). It stays in the ledger, the record of what was said,
and is left out of every search whose results a model is handed, by seq, before the search's LIMIT — as an answer that
may quote a revoked memory is (chat.citing) — so it never crowds a statement out of the candidates either.

What a search needs is only that none of the replies it would return is in its result: a reply left out that would not
have ranked changes nothing (a search leaves seqs out before its LIMIT, one row at a time). So the replies are learnt
from the hits the searches return (their role and meta, which the index holds as the ledger does), never by reading the
session: a search that returns one is run again with it left out, until none comes back — each round costs one search
and learns at least one seq. A session is followed from the first time a search returns a reply: from then on the
events appended since are read (a turn's own reply among them), so a reply this process wrote never costs a round.
A pile of them (an offline app's session holds one a turn) would cost a search per K learnt: past LEARN_ROUNDS rounds
the session is read whole instead, once a process, as before (issue 30: at 1M events that read is seconds; when a few
replies rank, the usual case in a session a model answered, the first turn after a start no longer pays it).

What is known is trusted only while the ledger still holds the same event at the last seq it covers (its chain hash
commits to every event before it): a session deleted and made anew, or cut by a repair, is learnt again from nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from chat.offline import is_stand_in_reply
from retrieval.model import Hit
from storage.api import LedgerStore

R = TypeVar("R")
LEARN_ROUNDS = 2  # searches that returned a reply, learnt from their hits, before the session is read whole (once)


@dataclass
class _Known:
    count: int  # the events covered: seqs 0 .. count-1 (those before `start` only as far as hits showed them)
    chain: str  # the chain hash of the event at count-1 when they were covered
    seqs: set[int] = field(default_factory=set)
    start: int = 0  # every event from here to count-1 was read; those before were learnt from the hits searches returned


class StandIns:
    """The stand-in replies of each session of one ledger, as far as this process has learnt them."""

    def __init__(self, ledger: LedgerStore) -> None:
        self.ledger = ledger
        self._known: dict[str, _Known] = {}
        self._lock = threading.Lock()

    def known(self, session: str) -> list[int]:
        """The seqs known so far, brought up to the ledger's end when the session is followed; [] when it is not."""
        with self._lock:
            if session not in self._known:
                return []
        return self.read(session)

    def read(self, session: str, learnt: Sequence[Hit] = (), *, whole: bool = False) -> list[int]:
        """The replies known of the session, with those among `learnt` (hits a search returned) added and the events
        appended since it was last read read now (only those: O(appended), never the whole session). A session not
        followed yet is followed from its present end; with `whole` every event not read yet is read (from seq 0)."""
        count, head = self.ledger.head(session)
        if count == 0:  # no such session (deleted since, by anyone), or an empty one: nothing to know
            self.forget(session)
            return []
        with self._lock:
            known = self._known.get(session)
        if known is not None and not self._still(session, known, count):
            known = None
        if known is None and not whole:  # followed from here on: what came before is learnt from hits only
            known = _Known(count, head, start=count)
        elif known is None or (whole and known.start > 0):
            known = _Known(0, "")
        seqs = set(known.seqs)
        n, chain = known.count, known.chain
        if n < count:
            for ev in self.ledger.events(session, start_seq=n):
                if is_stand_in_reply(ev.role, ev.meta):
                    seqs.add(ev.seq)
                n, chain = ev.seq + 1, ev.chain
        seqs.update(h.seq for h in learnt if h.seq < n and is_stand_in_reply(h.role, h.meta))
        with self._lock:
            self._known[session] = _Known(n, chain, seqs, min(known.start, n))
        return sorted(seqs)

    def _still(self, session: str, known: _Known, count: int) -> bool:
        """Whether the ledger still holds what `known` covers (the same event at its last seq)."""
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
        """`search(skip)` with every stand-in reply of the session it would return in `skip`: first with those known,
        and again with each reply a search still returned added (learnt from its hits) while one comes back. Each round
        adds at least one seq to `skip`, so it ends; the call reads of the ledger its head, the event at the last seq
        known and what was appended since, never more."""
        skip = set(self.known(session))
        rounds = 0
        while True:
            got = search(sorted(skip))
            returned = hits(got)
            found = {h.seq for h in returned if is_stand_in_reply(h.role, h.meta)}
            if not found:
                return got
            rounds += 1
            # a pile of them (an offline app's session: one a turn) would cost a search per K learnt: past the first
            # round the session is read once instead (then only what is appended), as before issue 30's change
            learnt = self._learn(session, returned) if rounds < LEARN_ROUNDS else self.read(session, returned, whole=True)
            skip |= found | set(learnt)

    def _learn(self, session: str, returned: Sequence[Hit]) -> list[int]:
        """The known replies with those among `returned` added: the first time the session is followed from its
        present end (`read`); after that without a read (what is known was checked against the ledger this call)."""
        with self._lock:
            known = self._known.get(session)
            if known is not None:
                known.seqs = known.seqs | {h.seq for h in returned if h.seq < known.count and is_stand_in_reply(h.role, h.meta)}
                return sorted(known.seqs)
        return self.read(session, returned)
