"""Supersede and correct (I/O): a newer statement replaces an older one, on the record (issue 12).

Neither touches an event. `supersede` appends a supersession record (docs/FORMAT.md §19) saying which newer
event supersedes which older one, who decided (the visitor, a rule of the detector, or a model checked by a
rule) and an optional reason that quotes nothing; `correct` appends the visitor's new statement as a user
event and then the record. The state is derived from the ledger (control.state, folded into the same cached
state as revocations: `current_supersessions`), so a rebuilt index, another process or a restarted app see
the same. Both take the session's turn lock and keep a signed checkpoint after the append, as a revoke does;
`supersede_locked` is for a caller already holding the lock (a turn that runs the detector). Each takes an
optional `stores=` (storage.stores, control.where): the ledger, index, turn lock and checkpoint are then the
stores', on files or PostgreSQL.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from control.plan import quoted
from control.revocation import ControlError, _target, current
from control.supersession_state import Supersession, SupersessionState, shown_reason
from control.where import Where, where
from ledger import Event
from ledger.controls import MAX_CONTROL_REASON
from ledger.event import EventError, is_erasure_record, validate_session_id
from ledger.supersessions import SUPERSEDE_TEXT, VISITOR, decider_problem, is_control_record, supersession_meta
from storage.api import file_ledger

if TYPE_CHECKING:
    from receipts.keys import SigningKey
    from storage.api import LedgerStore, SearchIndex
    from storage.api import LedgerStore as AnyLedger
    from storage.stores import Stores

# chat.engine.MAX_MESSAGE_CHARS, not imported (chat imports control); tests/services/test_control_supersede.py checks they agree
MAX_STATEMENT_CHARS = 8000
CORRECTION_META: dict[str, Any] = {"kind": "chat"}  # a correction is said like any message; the record says it corrects


def _key(data: Path) -> SigningKey:
    """The data directory's signing key. storage.local is imported here, not at the top: it imports receipts (~0.1 s),
    and `import control` is on every search's path (the CLI reads the control state), which signs nothing."""
    from storage.local import load_or_create

    return load_or_create(data)


class SupersedeError(ControlError):
    """A supersession or history that cannot be done; nothing was appended. One line naming the session and seq."""


@dataclass(frozen=True, slots=True)
class SupersedeResult:
    """What one supersede (or correct) appended: the record, and for a correction the new statement before it."""

    session: str
    new_seq: int
    new_id: str
    old_seq: int
    old_id: str
    record_seq: int
    record_id: str
    decided_by: str
    checked_by: str | None
    reason: str | None
    corrected: bool = False  # the new statement was appended by this call (correct)
    named_seq: int | None = None  # correct: the seq the caller named, when a later statement held its fact (old_seq)

    def summary(self) -> str:
        said = f"the new statement at seq {self.new_seq} ({self.new_id})" if self.corrected else f"seq {self.new_seq} ({self.new_id})"
        held = f", which held since it superseded seq {self.named_seq}," if self.named_seq is not None else ""
        return (
            f"session {self.session}: seq {self.old_seq} ({self.old_id}){held} superseded by {said} (kept on record, no "
            f"longer served as current); decided by {self.decided_by}; supersession record at seq {self.record_seq}"
        )


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One statement of a fact, with its state now (control.supersession.history)."""

    seq: int
    event_id: str
    role: str
    ts: str
    text: str | None  # None once forgotten
    erased: bool
    revoked: bool
    superseded_by: int | None  # the seq that replaced it (its first supersession); None while live
    superseded_by_id: str | None
    supersedes: tuple[int, ...] = ()
    decided_by: str | None = None  # of its supersession
    record_seq: int | None = None  # its supersession record
    reason: str | None = None  # as stored (never quotes a value)
    shown_reason: str | None = None  # recomputed from the texts while both exist (may quote the values)
    live_seq: int = -1  # the statement holding now in its line of replacements

    @property
    def state(self) -> str:
        return "superseded" if self.superseded_by is not None else "live"

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq, "id": self.event_id, "role": self.role, "ts": self.ts, "text": self.text, "state": self.state,
            "erased": self.erased, "revoked": self.revoked, "superseded_by": self.superseded_by,
            "superseded_by_id": self.superseded_by_id, "supersedes": list(self.supersedes), "decided_by": self.decided_by,
            "record_seq": self.record_seq, "reason": self.reason, "shown_reason": self.shown_reason, "live_seq": self.live_seq,
        }


def current_supersessions(ledger: AnyLedger, session: str, *, save: bool = False) -> SupersessionState:
    """The supersession state of `session` as its ledger holds it now (cached with the revocations; a copy).
    `save`: as for control.revocation.current."""
    return current(ledger, session, save=save).supersessions


def superseded_seqs(
    data_dir: str | os.PathLike[str], session: str, *, ledger: LedgerStore | None = None, stores: Stores | None = None
) -> dict[int, int]:
    """superseded seq -> the seq that replaced it (for labelling search results and the ledger view)."""
    led = stores.ledger if stores is not None else (ledger if ledger is not None else file_ledger(data_dir))
    if not led.exists(session):
        return {}
    return {s: link.new_seq for s, link in current_supersessions(led, session).superseded.items()}


# -- checks (the caller holds the session's turn lock) -------------------------------------------------------
def _session(w: Where, session: str) -> None:
    try:
        validate_session_id(session)
    except EventError as exc:
        raise SupersedeError(str(exc)) from None
    if not w.ledger.exists(session):
        raise SupersedeError(f"session {session}: no such session in {w.where}")


def _reason(reason: object) -> str | None:
    if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_CONTROL_REASON):
        raise SupersedeError(f"reason: must be text of at most {MAX_CONTROL_REASON} characters")
    return reason.strip() or None if isinstance(reason, str) else None


def _statement(led: AnyLedger, session: str, value: object, count: int, what: str) -> Event:
    try:
        ev = _target(led, session, value, count)
    except ControlError as exc:
        raise SupersedeError(str(exc)) from None
    if ev.erased:
        raise SupersedeError(f"session {session}: seq {ev.seq} is erased (forgotten): it cannot {what}")
    if is_erasure_record(ev):
        raise SupersedeError(f"session {session}: seq {ev.seq} is an erasure record, not a statement: it cannot {what}")
    if is_control_record(ev.role, ev.text, ev.meta, ev.seq):
        raise SupersedeError(f"session {session}: seq {ev.seq} is a control record, not a statement: it cannot {what}")
    return ev


def _check_reason(session: str, reason: str | None, events: list[tuple[int, str]]) -> None:
    for seq, text in events:
        if reason and quoted(reason, text):
            raise SupersedeError(
                f"session {session}: the reason repeats a word of the event at seq {seq}, and the reason is kept for good; say why without quoting it"
            )


def supersede_locked(
    ledger: AnyLedger,
    session: str,
    new_seq: object,
    old_seq: object,
    *,
    reason: str | None = None,
    decided_by: str = VISITOR,
    checked_by: str | None = None,
) -> SupersedeResult:
    """`supersede` for a caller that holds the session's turn lock and keeps its own checkpoint (a turn)."""
    problem = decider_problem(decided_by, checked_by)
    if problem:
        raise SupersedeError(f"session {session}: {problem}")
    reason = _reason(reason)
    count, _head = ledger.head(session)
    new = _statement(ledger, session, new_seq, count, "supersede another")
    if new.role != "user":
        raise SupersedeError(
            f"session {session}: seq {new.seq} is a {new.role} event, not a user statement: only what the person said supersedes a statement"
        )
    old = _statement(ledger, session, old_seq, count, "be superseded")
    if not old.seq < new.seq:
        raise SupersedeError(f"session {session}: seq {old.seq} is not older than seq {new.seq}: only a newer statement supersedes an older one")
    held = current_supersessions(ledger, session)
    link = held.link(old.seq, new.seq)
    if link is not None:
        raise SupersedeError(f"session {session}: seq {old.seq} is already superseded by seq {new.seq} (the record at seq {link.record_seq})")
    live = held.live(old.seq)
    if live != old.seq:  # superseding it again would leave two live statements of one fact
        then = "supersede that one instead" if live < new.seq else f"which is newer than seq {new.seq}"
        raise SupersedeError(f"session {session}: seq {old.seq} is already superseded; seq {live} holds its fact now, {then}")
    _check_reason(session, reason, [(old.seq, old.text), (new.seq, new.text)])
    meta = supersession_meta(new_seq=new.seq, new_id=new.id, old_seq=old.seq, old_id=old.id, decided_by=decided_by, checked_by=checked_by, reason=reason)
    record = ledger.append(session, "system", SUPERSEDE_TEXT, meta)
    current(ledger, session, save=True)  # folds the record now and keeps control-state.json up to date
    return SupersedeResult(session, new.seq, new.id, old.seq, old.id, record.seq, record.id, decided_by, checked_by, reason)


def supersede(
    data_dir: str | os.PathLike[str],
    session: str,
    new_seq: object,
    old_seq: object,
    *,
    reason: str | None = None,
    decided_by: str = VISITOR,
    checked_by: str | None = None,
    ledger: LedgerStore | None = None,
    key: SigningKey | None = None,
    stores: Stores | None = None,
) -> SupersedeResult:
    """Record that the event at `new_seq` supersedes the older one at `old_seq` (a seq, or an id `evt_…`).

    Raises SupersedeError (one line, nothing appended) for an unknown session or seq, an erased event, an
    erasure or control record on either side, an older seq that is not older, a pair already recorded, an
    older event already superseded by another (one live statement per fact: the error names the statement that
    holds now, to supersede instead), a `decided_by`/`checked_by` that is not 'visitor', 'rule:<name>' or
    'model:<id>' checked by 'rule:<name>', or a reason that repeats a word of either statement (the record is kept for good)."""
    data = Path(data_dir)
    w = where(data, stores, ledger=ledger)
    led = w.ledger
    _session(w, session)
    with w.receipts.turn_lock(session):
        result = supersede_locked(led, session, new_seq, old_seq, reason=reason, decided_by=decided_by, checked_by=checked_by)
        w.receipts.issue_checkpoint(led, session, key if key is not None else _key(data))
    return result


def correct(
    data_dir: str | os.PathLike[str],
    session: str,
    old_seq: object,
    new_text: str,
    *,
    reason: str | None = None,
    ledger: LedgerStore | None = None,
    index: SearchIndex | None = None,
    key: SigningKey | None = None,
    stores: Stores | None = None,
) -> SupersedeResult:
    """"Correct this": append `new_text` as the visitor's user statement, then the record that it supersedes what
    holds now for the fact of the event at `old_seq` (decided by the visitor): that event, or when a later statement
    already superseded it, the live one of its line (`SupersessionState.live`; the result's `named_seq` says so), and
    index the new statement. SupersedeError as for `supersede`
    (nothing appended), and for an empty or over-long text."""
    data = Path(data_dir)
    w = where(data, stores, ledger=ledger, index=index)
    led = w.ledger
    _session(w, session)
    if not isinstance(new_text, str) or not new_text.strip():
        raise SupersedeError(f"session {session}: the new statement is empty; type what holds now")
    if len(new_text) > MAX_STATEMENT_CHARS:
        raise SupersedeError(f"session {session}: the new statement is {len(new_text)} characters, over the limit of {MAX_STATEMENT_CHARS}")
    reason = _reason(reason)
    with w.receipts.turn_lock(session):
        count, _head = led.head(session)
        named = _statement(led, session, old_seq, count, "be superseded")
        old = _live_statement(led, session, named)
        _check_reason(session, reason, [(old.seq, old.text), (count, new_text)])
        k = key if key is not None else _key(data)
        try:
            new = led.append(session, "user", new_text, dict(CORRECTION_META))
        except EventError as exc:
            raise SupersedeError(f"session {session}: the new statement cannot be recorded: {exc}") from None
        meta = supersession_meta(new_seq=new.seq, new_id=new.id, old_seq=old.seq, old_id=old.id, decided_by=VISITOR, reason=reason)
        record = led.append(session, "system", SUPERSEDE_TEXT, meta)
        w.receipts.issue_checkpoint(led, session, k)
        current(led, session, save=True)  # folds the record now and keeps control-state.json up to date
    try:
        w.index.index_session(session, [new, record])
    finally:
        w.close_index()  # the index, when this call opened it
    return SupersedeResult(session, new.seq, new.id, old.seq, old.id, record.seq, record.id, VISITOR, None, reason, corrected=True, named_seq=None if old is named else named.seq)


def _live_statement(led: AnyLedger, session: str, named: Event) -> Event:
    """What a correction of `named` replaces: the statement holding its fact now (`SupersessionState.live`), so a
    fact has one live statement after it. `named` itself while nothing replaced it, or when the one holding now
    is forgotten (no words of it are served; a record naming an erased event is refused)."""
    live = current_supersessions(led, session).live(named.seq)
    if live == named.seq:
        return named
    (ev,) = led.read_events(session, [live])
    return named if ev.erased else ev


def history(
    data_dir: str | os.PathLike[str], session: str, seq: object, *, ledger: LedgerStore | None = None, stores: Stores | None = None
) -> list[HistoryEntry]:
    """All statements of the fact `seq` states (linked to it by supersessions, either way), oldest first, each
    with its state now. SupersedeError for an unknown session or seq, or a record (not a statement)."""
    w = where(data_dir, stores, ledger=ledger)
    led = w.ledger
    _session(w, session)
    count, _head = led.head(session)
    try:
        target = _target(led, session, seq, count)
    except ControlError as exc:
        raise SupersedeError(str(exc)) from None
    if is_erasure_record(target) or (not target.erased and is_control_record(target.role, target.text, target.meta, target.seq)):
        raise SupersedeError(f"session {session}: seq {target.seq} is a record, not a statement: it has no history")
    state = current(led, session)
    held = state.supersessions
    seqs = held.history(target.seq)
    events = {ev.seq: ev for ev in led.read_events(session, seqs)}
    return [_entry(events[s], held, s in state.revoked, events) for s in seqs]


def _entry(ev: Event, held: SupersessionState, revoked: bool, events: Mapping[int, Event]) -> HistoryEntry:
    link: Supersession | None = held.superseded.get(ev.seq)
    text = None if ev.erased else ev.text
    if link is None:
        return HistoryEntry(ev.seq, ev.id, ev.role, ev.ts, text, ev.erased, revoked, None, None, tuple(held.supersedes(ev.seq)), live_seq=held.live(ev.seq))
    newer = events.get(link.new_seq)
    new_text = None if newer is None or newer.erased else newer.text
    return HistoryEntry(
        ev.seq, ev.id, ev.role, ev.ts, text, ev.erased, revoked, link.new_seq, link.new_id, tuple(held.supersedes(ev.seq)),
        link.decided_by, link.record_seq, link.reason, shown_reason(link, text, new_text), held.live(ev.seq),
    )
