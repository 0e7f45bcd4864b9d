"""Which events are revoked, derived from the ledger (pure).

The ledger is the only truth (docs/FORMAT.md §17): replaying its control events in seq order
gives the state. A revoke of a seq already revoked, or a restore of one that is not, changes
nothing (the library never appends either; an imported ledger might hold them). An erased line
holds no meta, so it is never a control event (and a control event cannot be forgotten).
The same replay folds the supersession records (§19) into `ControlState.supersessions`, so one cached
state (control.revocation.current) serves both.

`quoting_answers` extends a revocation to the answers that may repeat the revoked words: every answer
whose turn cited a revoked event (its question or a memory), and every answer citing one of those.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field

from control.supersession_state import SupersessionState
from ledger import Event
from ledger.controls import REVOKE, control_of
from ledger.event import is_erasure_record
from ledger.supersessions import supersession_of

RoleOf = Callable[[int], "str | None"]  # the role of the event at a seq (None: no such event)


@dataclass(frozen=True, slots=True)
class Revocation:
    """The revocation in force for one event: the control event that made it."""

    seq: int  # the revoked event
    event_id: str
    control_seq: int
    control_id: str
    reason: str | None


@dataclass(slots=True)
class ControlState:
    """The state after the first `size` events: revoked seq -> its revocation; every revoke's and restore's seq;
    which statements newer ones superseded (§19, control.supersession_state)."""

    size: int = 0
    head: str = ""  # chain hash of event size-1 ("" for none): how a cached state knows its prefix is unchanged
    revoked: dict[int, Revocation] = field(default_factory=dict)
    controls: list[int] = field(default_factory=list)
    supersessions: SupersessionState = field(default_factory=SupersessionState)

    def apply(self, ev: Event, role_of: RoleOf | None = None) -> None:
        """Fold one event (the next in seq order) into the state. `role_of(seq)`: the role of an earlier event, asked
        for the newer statement a supersession record names — one whose `new` is not a user statement is no
        supersession (§19: only what the person said supersedes); without it the record is folded as it stands."""
        what = None if ev.erased else control_of(ev.role, ev.text, ev.meta, ev.seq)
        if what is not None:
            action, seq, event_id, reason = what
            self.controls.append(ev.seq)
            if action == REVOKE:
                self.revoked.setdefault(seq, Revocation(seq, event_id, ev.seq, ev.id, reason))
            else:
                self.revoked.pop(seq, None)
        elif not ev.erased:
            record = supersession_of(ev.role, ev.text, ev.meta, ev.seq)
            if record is not None and (role_of is None or role_of(record.new_seq) == "user"):
                self.supersessions.apply(record, ev.seq, ev.id)
        self.size = ev.seq + 1
        self.head = ev.chain

    def copy(self) -> ControlState:
        return ControlState(self.size, self.head, dict(self.revoked), list(self.controls), self.supersessions.copy())

    def excluded(self) -> list[int]:
        """The revoked seqs: retrieval never hands them to the model. (Control events are not excluded here: the
        index holds no row for them, retrieval.indexing.skipped, so a session's exclusions grow with what is
        revoked now, not with every revoke and restore ever made.)"""
        return sorted(self.revoked)


def erases_folded(state: ControlState, ev: Event) -> bool:
    """Whether `ev` is an erasure record that erased a control or supersession record `state` already folded: the
    state then differs from a replay of the ledger as it is now (an erased line is no control event), so it must be
    derived again. (control.plan refuses to erase those records; Ledger.erase itself does not.)"""
    if ev.erased or not is_erasure_record(ev):
        return False
    items = ev.meta["erasure"].get("erased")
    seqs = {item.get("seq") for item in items if isinstance(item, dict)} if isinstance(items, list) else set()
    return bool(seqs & (set(state.controls) | {x.record_seq for x in state.supersessions.links}))


class Fold:
    """A session's control state folded event by event, from seq 0 in order (`derive` folds a whole run). A supersession
    record whose `new` is not a user statement is not folded (ControlState.apply): which events are user statements is
    kept as one byte per event for that."""

    def __init__(self) -> None:
        self.state = ControlState()
        self._users = bytearray()

    def _role_of(self, seq: int) -> str | None:
        return "user" if seq < len(self._users) and self._users[seq] else None

    def apply(self, ev: Event) -> None:
        if ev.seq == len(self._users):
            self._users.append(ev.role == "user")
        self.state.apply(ev, self._role_of)


def derive(events: Iterable[Event]) -> ControlState:
    """The state after `events` (a session's events from seq 0, in order)."""
    fold = Fold()
    for ev in events:
        fold.apply(ev)
    return fold.state


Edges = Callable[[Collection[int]], Iterable[tuple[int, int]]]  # cited seqs -> (cited seq, answer seq) pairs


def quoting_answers(revoked: Collection[int], citing: Edges) -> dict[int, int]:
    """answer seq -> the revoked seq it may quote, for every answer that cited a revoked event or such an answer.

    `citing(seqs)` gives (cited, answer) for every answer whose turn handed the model one of `seqs` (its receipt's
    question and memories, or a receipt-less turn's `.cites` record). An answer reached through several revoked
    events is attributed to the lowest of them, level by level, so the result does not depend on the order of the
    pairs. A revoked answer stays out by its own revocation, not as a quote."""
    root = {s: s for s in revoked}
    found: dict[int, int] = {}
    frontier: Collection[int] = sorted(root)
    while frontier:
        level: dict[int, int] = {}
        for cited, answer in citing(frontier):
            if answer in root or cited not in root:
                continue
            level[answer] = min(level.get(answer, root[cited]), root[cited])
        root.update(level)
        found.update(level)
        frontier = sorted(level)
    return found
