"""Which events are revoked, derived from the ledger (pure).

The ledger is the only truth (docs/FORMAT.md §17): replaying its control events in seq order
gives the state. A revoke of a seq already revoked, or a restore of one that is not, changes
nothing (the library never appends either; an imported ledger might hold them). An erased line
holds no meta, so it is never a control event (and a control event cannot be forgotten).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ledger import Event
from receipts.decisions import REVOKE, control_of


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
    """The state after the first `size` events: revoked seq -> its revocation; every control event's seq."""

    size: int = 0
    head: str = ""  # chain hash of event size-1 ("" for none): how a cached state knows its prefix is unchanged
    revoked: dict[int, Revocation] = field(default_factory=dict)
    controls: list[int] = field(default_factory=list)

    def apply(self, ev: Event) -> None:
        """Fold one event (the next in seq order) into the state."""
        what = None if ev.erased else control_of(ev.role, ev.text, ev.meta, ev.seq)
        if what is not None:
            action, seq, event_id, reason = what
            self.controls.append(ev.seq)
            if action == REVOKE:
                self.revoked.setdefault(seq, Revocation(seq, event_id, ev.seq, ev.id, reason))
            else:
                self.revoked.pop(seq, None)
        self.size = ev.seq + 1
        self.head = ev.chain

    def copy(self) -> ControlState:
        return ControlState(self.size, self.head, dict(self.revoked), list(self.controls))

    def excluded(self) -> list[int]:
        """Seqs retrieval never hands the model: the revoked events and the control events themselves."""
        return sorted({*self.revoked, *self.controls})


def derive(events: Iterable[Event]) -> ControlState:
    """The state after `events` (a session's events from seq 0, in order)."""
    state = ControlState()
    for ev in events:
        state.apply(ev)
    return state
