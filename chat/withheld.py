"""What a model may be handed of a session: the one rule every model call takes its texts through (issue 28).

Withheld from every model call, whatever it is for (the turn's answer, the supersession proposer, any later one):

- a revoked event, and every answer whose turn cited one or cited such an answer (it may repeat the revoked words;
  chat.citing) — the same closure the turn's retrieval leaves out;
- an erased event (its text is gone from the ledger; its placeholder is not sent either);
- with ask me first on (control.settings), every memory the person has not approved for the turn at hand: then only
  a consent turn's answer hands memories to a model, exactly those approved, and the supersession detector uses the
  local rules alone, which send nothing.

`model_view` reads the rule for a session (under its turn lock, by the caller); the supersession shortlist reads its
texts from the ledger through it (chat.supersede); `check_handed` is the last guard before a call: it raises rather
than send anything the view withholds.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from control.revocation import current as current_controls
from control.settings import get_consent
from control.state import Revocation
from ledger import Event

if TYPE_CHECKING:
    from chat.citing import Cites
    from control.state import ControlState
    from storage.stores import Stores


class WithheldError(RuntimeError):
    """A model call was about to carry an event the visitor withheld; nothing was sent."""


@dataclass(frozen=True, slots=True)
class ModelView:
    """Which events of one session a model call may carry. Has no truthiness: ask `may_see`."""

    session: str
    withheld: Mapping[int, Revocation]  # seq -> the revocation in force that keeps it out
    ask_first: bool  # "ask me first" on: only memories the person approved for this turn may be sent

    def __bool__(self) -> bool:
        raise TypeError("ModelView has no truth value: ask may_see(seq)")

    def may_see(self, seq: int, *, approved: Collection[int] = ()) -> bool:
        """Whether an event may reach a model: never when withheld; with ask me first on, only when approved."""
        if seq in self.withheld:
            return False
        return not self.ask_first or seq in approved

    @property
    def proposer_may_run(self) -> bool:
        """Whether a model may be asked about earlier statements at all (the supersession proposer): not with ask
        me first on, where no memory reaches a model unless a person approved it for a turn."""
        return not self.ask_first


def withheld(cites: Cites, session: str, state: ControlState) -> dict[int, Revocation]:
    """seq -> the revocation in force that keeps it from every model: each revoked event; each indexed line after a
    revoked event that is not the person's own (assistant, system or tool) and that no turn's cites account for
    (imported, say: it may repeat anything said before it — user lines are the person's statements, revoked
    directly); and each answer whose turn cited one of those or cited such an answer (chat.citing). The turn's retrieval leaves out
    exactly these."""
    if not state.revoked:
        return {}
    roots: dict[int, Revocation] = dict(state.revoked)
    revoked = sorted(state.revoked)
    for a in cites.unattributed(session, revoked[0]):
        roots.setdefault(a, state.revoked[max(r for r in revoked if r < a)])
    return {**cites.quoting(session, roots), **roots}


def model_view(stores: Stores, cites: Cites, session: str, *, state: ControlState | None = None) -> ModelView:
    """The rule for `session` now: `withheld`, and whether ask me first is on. `state`: the control state the
    caller has read already (under the same lock); read here when None."""
    state = state if state is not None else current_controls(stores.ledger, session)
    return ModelView(session, withheld(cites, session, state), get_consent(stores, session))


def check_handed(view: ModelView, events: Iterable[Event], *, approved: Collection[int] | None = None) -> None:
    """The last guard before a model call: WithheldError, naming seqs only, when any of `events` is withheld or
    erased, or — with ask me first on — not among `approved` (None: no person approved anything for this call)."""
    for ev in events:
        if ev.erased:
            raise WithheldError(f"session {view.session}: seq {ev.seq} is erased; nothing was sent to the model")
        if ev.seq in view.withheld:
            raise WithheldError(f"session {view.session}: seq {ev.seq} is revoked (or may quote a revoked memory); nothing was sent to the model")
        if view.ask_first and (approved is None or ev.seq not in approved):
            raise WithheldError(f"session {view.session}: ask me first is on and seq {ev.seq} was not approved; nothing was sent to the model")


__all__ = ["ModelView", "WithheldError", "check_handed", "model_view", "withheld"]
