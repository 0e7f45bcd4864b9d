"""Revoke and restore (I/O): take a memory out of retrieval, and bring it back, on the record.

Neither touches the event. `revoke` appends a control event (docs/FORMAT.md §17) saying which event,
when, and the optional reason; `restore` appends another. The state is derived from the ledger
(control.state), so a rebuilt index, another process or a restarted app all see the same state.
Revoke is not erasure: the words stay in the ledger, unused (forget destroys them).

`current(ledger, session)` is the state now, cached per session (in the process, and on disk in
control-state.json: control.state_file) and brought up to date from the ledger's new events (the caller holds
the turn lock when it needs the state not to move). On files the lines appended since are found by the backend's
byte search (Ledger.system_lines, storage/files/ledger/control_scan.py) and folded here. On any other ledger
(PostgreSQL) nothing is persisted: the state is derived from the session's role 'system' events, which the store selects (LedgerStore.system_events: every
control, supersession and erasure record, the only lines that change it), cached in the process and extended
by the system events appended since; control-state.json is the file backend's cache only.

Every command takes an optional `stores=` (storage.stores.Stores, control.where): the turn lock, the checkpoint
(storage.files.receipts.file_backend.issue) and the ledger are then the stores', on files or PostgreSQL.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

import orjson

from control import state_file
from control.plan import PlanError, quoted
from control.state import ControlState, RoleOf, derive, erases_folded
from control.where import where
from ledger import Event
from ledger.controls import CONTROL_TEXTS, MAX_CONTROL_REASON, RESTORE, REVOKE, control_meta
from ledger.event import (
    EVENT_ID_RE,
    EventError,
    event_from_dict,
    is_erasure_record,
    validate_session_id,
)
from ledger.supersessions import is_control_record
from storage.api import LineMark, SystemLines, file_ledger

if TYPE_CHECKING:
    from receipts.keys import SigningKey
    from storage.api import LedgerStore
    from storage.stores import Stores

if TYPE_CHECKING:
    from storage.api import LedgerStore as AnyLedger
    from storage.api import Stores


class ControlError(PlanError):
    """A revoke or restore that cannot be done; nothing was appended. One line naming the session and seq."""


@dataclass(frozen=True, slots=True)
class ControlResult:
    """What one revoke or restore appended."""

    session: str
    action: str  # "revoke" or "restore"
    seq: int  # the event revoked or restored
    event_id: str
    control_seq: int  # the control event appended
    control_id: str
    reason: str | None

    def summary(self) -> str:
        done = "revoked (kept on record, no longer retrieved)" if self.action == REVOKE else "restored (retrieved again)"
        return f"session {self.session}: seq {self.seq} ({self.event_id}) {done}; control event at seq {self.control_seq}"


@dataclass(slots=True)
class _Derived:
    """A state with the span of its last folded line in the log (state_file.Saved), and what of it is on disk."""

    state: ControlState
    start: int
    end: int
    on_disk: tuple[int, int, int] | None = None  # (size, controls, links) of the file this process last read or wrote

    def saved(self) -> state_file.Saved:
        return state_file.Saved(self.state, self.start, self.end)

    def worth_saving(self) -> bool:
        """Whether the file should be written: it is missing, other than ours in content, or SAVE_EVERY lines behind."""
        s = self.state
        if self.start >= self.end:  # the span is unknown (a derivation that could not use the byte search)
            return False
        if self.on_disk is None:
            return True
        size, controls, links = self.on_disk
        return (controls, links) != (len(s.controls), len(s.supersessions.links)) or s.size - size >= SAVE_EVERY or s.size < size


SAVE_EVERY = 1024  # a fresh process folds at most this many lines' worth of bytes the file did not cover

class _FileLedger(Protocol):
    """What the O(1) control-state path asks of a ledger kept as files in DATA_DIR (the file backend's Ledger, named by
    shape so control imports no backend): its system lines by a byte search of the log, and the cached state."""

    data_dir: Path
    record_tails: bool

    def head(self, session: str) -> tuple[int, str]: ...

    def events(self, session: str) -> Iterator[Event]: ...

    def read_events(self, session: str, seqs: Iterable[int]) -> list[Event]: ...

    def system_lines(self, session: str, count: int, head: str, after: LineMark | None) -> SystemLines | None: ...

    def control_state_cache(self, session: str) -> bytes | None: ...

    def keep_control_state_cache(self, session: str, data: bytes) -> None: ...


_cache: dict[tuple[str, str], _Derived] = {}
_cache_lock = threading.Lock()


def current(ledger: AnyLedger, session: str, *, save: bool = False) -> ControlState:
    """The control state of `session` as its ledger holds it now (a copy: the caller may keep it).

    From this process's cache, else from the session's control-state.json (control.state_file), each extended by
    the lines appended since (a byte search of those lines only); else derived from the whole log. With `save`, a
    ledger opened with record_tails=True (a writer's) writes the file back when it is missing or behind: a command
    that appends says so (revoke, restore, supersede, rebuild); one that may refuse, or only reads (propose, a search,
    an export), leaves the data directory as it found it. A reader's ledger never writes it. On PostgreSQL `save`
    changes nothing: the state is derived from the system rows (module docstring), never written."""
    count, head = ledger.head(session)
    if count == 0:
        return ControlState()
    if ledger.kept_elsewhere() is not None:  # PostgreSQL: the state from the system rows
        return _current_from_rows(ledger, session, count, head)
    fl = cast("_FileLedger", ledger)  # the files in DATA_DIR: their log read by byte offsets (the O(1) open)
    key = (os.path.realpath(fl.data_dir), session)
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None and cached.state.size == count and cached.state.head == head:
        if not (save and fl.record_tails and cached.worth_saving()):
            return cached.state.copy()
        derived: _Derived | None = cached  # level with the ledger, but the file is missing or behind: written below
    else:
        derived = _extended(fl, session, cached, count, head) if cached is not None else None
    if derived is None:
        cached_bytes = fl.control_state_cache(session)
        disk = None if cached_bytes is None else state_file.decode(cached_bytes)
        if disk is not None:
            base = _Derived(disk.state, disk.start, disk.end, _counts(disk.state))
            derived = _extended(fl, session, base, count, head)
    if derived is None:
        derived = _derived_in_full(fl, session, count, head)
    if save and fl.record_tails and derived.worth_saving():
        try:
            fl.keep_control_state_cache(session, state_file.encode(derived.saved()))
            derived.on_disk = _counts(derived.state)
        except OSError:
            pass  # a hint: the next process derives it again
    with _cache_lock:
        _cache[key] = _Derived(derived.state.copy(), derived.start, derived.end, derived.on_disk)
    return derived.state


def _current_from_rows(ledger: AnyLedger, session: str, count: int, head: str) -> ControlState:
    """current() on a ledger that selects its system events (PostgreSQL): the cached state extended by the system
    events after it, else derived from them all."""
    key = (ledger.location, session)
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None and cached.state.size == count and cached.state.head == head:
        return cached.state.copy()
    state = _rows_extended(ledger, session, cached.state, count, head) if cached is not None else None
    if state is None:
        state = _rows_folded(ledger, session, ControlState(), 0, count, head)
        assert state is not None  # a fold from nothing has no folded record to erase
    with _cache_lock:
        _cache[key] = _Derived(state.copy(), 0, 0)
    return state


def _rows_extended(ledger: AnyLedger, session: str, st: ControlState, count: int, head: str) -> ControlState | None:
    """`st` brought up to `count` events, or None when its prefix is not the session's (the row at its size - 1
    does not end the chain on its head) or an erasure record erased a record it folded."""
    if not 0 < st.size <= count:
        return None
    (last,) = ledger.read_events(session, [st.size - 1])
    if last.chain != st.head:
        return None
    return _rows_folded(ledger, session, st.copy(), st.size, count, head)


def _rows_folded(ledger: AnyLedger, session: str, state: ControlState, start: int, count: int, head: str) -> ControlState | None:
    role_of = _roles(ledger, session)
    for ev in ledger.system_events(session, start, count):
        if erases_folded(state, ev):
            return None
        state.apply(ev, role_of)
    state.size, state.head = count, head  # the other lines change nothing but these
    return state


def _counts(state: ControlState) -> tuple[int, int, int]:
    return state.size, len(state.controls), len(state.supersessions.links)


def _roles(ledger: AnyLedger | _FileLedger, session: str) -> RoleOf:
    """role_of for ControlState.apply: the role of the event at a seq, read from the ledger (asked only for the newer
    statement of a supersession record, so rarely)."""

    def role_of(seq: int) -> str | None:
        try:
            (ev,) = ledger.read_events(session, [seq])
        except (EventError, LookupError, ValueError, OSError):
            return None
        return ev.role

    return role_of


def _fold(state: ControlState, lines: list[tuple[int, bytes]], role_of: RoleOf) -> bool:
    """Fold the candidate lines into `state`; False when one is not the line it should be, or erases a folded
    control record (the caller derives the state again)."""
    for seq, raw in lines:
        try:
            ev = event_from_dict(orjson.loads(raw), seq + 1)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, EventError):
            return False
        if ev.seq != seq or erases_folded(state, ev):
            return False
        state.apply(ev, role_of)
    return True


def _extended(ledger: _FileLedger, session: str, base: _Derived, count: int, head: str) -> _Derived | None:
    """`base` brought up to the first `count` events (the last with chain `head`) by folding only the lines after it;
    None when its prefix is not the log's (the line at its span is not its last event) or the fold cannot be trusted."""
    st = base.state
    if not 0 < st.size <= count:
        return None
    try:
        found = ledger.system_lines(session, count, head, LineMark(st.size - 1, st.head, base.start, base.end))
    except OSError:
        return None
    if found is None:
        return None
    state = st.copy()
    if not _fold(state, found.lines, _roles(ledger, session)):
        return None
    state.size, state.head = count, head
    return _Derived(state, found.last.start, found.last.end, base.on_disk)


def _derived_in_full(ledger: _FileLedger, session: str, count: int, head: str) -> _Derived:
    """derive(ledger.events(session)) over the first `count` events, whose last has chain `head`, parsing only the
    lines that may be control events (a byte search finds them): the other events change nothing but size and head.
    At 1M events (565 MB) the first turn of a process took 1.5 s instead of 7-11 s (a busy 2-core machine)."""
    state = ControlState()
    found = ledger.system_lines(session, count, head, None)
    if found is not None and _fold(state, found.lines, _roles(ledger, session)):
        state.size, state.head = count, head
        return _Derived(state, found.last.start, found.last.end)
    # the file is not the one head() described (replaced meanwhile): the slow way, every line parsed
    state = derive(itertools.islice(ledger.events(session), count))
    state.size, state.head = count, head
    return _Derived(state, 0, 0)


def _derive_scanned(ledger: _FileLedger, session: str, count: int, head: str) -> ControlState:
    return _derived_in_full(ledger, session, count, head).state


def revoked_seqs(
    data_dir: str | os.PathLike[str], session: str, *, ledger: LedgerStore | None = None, stores: Stores | None = None
) -> dict[int, int]:
    """revoked seq -> the seq of the control event that revoked it (for labelling search results and the ledger view)."""
    led = stores.ledger if stores is not None else (ledger if ledger is not None else file_ledger(data_dir))
    if not led.exists(session):
        return {}
    return {s: r.control_seq for s, r in current(led, session).revoked.items()}


def _target(led: AnyLedger, session: str, value: object, count: int) -> Event:
    """The event a revoke or restore names: a seq (int or decimal text) or an event id (evt_…)."""
    if isinstance(value, str) and value.startswith("evt_"):
        if not EVENT_ID_RE.fullmatch(value):
            raise ControlError(f"event id {value[:60]!r}: not an event id (evt_ and 32 lowercase hex digits)")
        found = next((ev for ev in led.events(session) if ev.id == value), None)
        if found is None:
            raise ControlError(f"session {session}: no event with id {value}")
        return found
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ControlError(f"seq {value!r}: not a non-negative integer"[:200])
    if value >= count:
        raise ControlError(f"session {session}: no event at seq {value} (it holds {count}, seqs 0–{count - 1})")
    return led.read_events(session, [value])[0]


def _check(session: str, ev: Event, state: ControlState, action: str, reason: str | None) -> None:
    if ev.erased:
        raise ControlError(f"session {session}: seq {ev.seq} is erased (forgotten): nothing is left to {action}")
    if is_erasure_record(ev):
        raise ControlError(f"session {session}: seq {ev.seq} is an erasure record, not a memory: it cannot be {action}d")
    if is_control_record(ev.role, ev.text, ev.meta, ev.seq):
        raise ControlError(f"session {session}: seq {ev.seq} is a control record, not a memory: it cannot be {action}d")
    held = state.revoked.get(ev.seq)
    if action == REVOKE and held is not None:
        raise ControlError(f"session {session}: seq {ev.seq} is already revoked (by the control event at seq {held.control_seq})")
    if action == RESTORE and held is None:
        raise ControlError(f"session {session}: seq {ev.seq} is not revoked: nothing to restore")
    if reason:
        if quoted(reason, ev.text):
            raise ControlError(f"reason: repeats a word of the event at seq {ev.seq}, and the reason is kept for good; say why without quoting it")


def _control(
    action: str,
    data_dir: str | os.PathLike[str],
    session: str,
    seq: object,
    reason: str | None,
    ledger: LedgerStore | None,
    key: SigningKey | None,
    stores: Stores | None,
) -> ControlResult:
    data = Path(data_dir)
    w = where(data, stores, ledger=ledger)
    led = w.ledger
    try:
        validate_session_id(session)
    except EventError as exc:
        raise ControlError(str(exc)) from None
    if not led.exists(session):
        raise ControlError(f"session {session}: no such session in {w.where}")
    if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_CONTROL_REASON):
        raise ControlError(f"reason: must be text of at most {MAX_CONTROL_REASON} characters")
    reason = reason.strip() or None if reason is not None else None
    with w.receipts.turn_lock(session):
        count, _head = led.head(session)
        ev = _target(led, session, seq, count)
        _check(session, ev, current(led, session), action, reason)
        if key is None:
            # imported here: it imports receipts (~0.1 s), which a reader of the state never needs
            from storage.local import load_or_create

            key = load_or_create(data)
        k = key
        control = led.append(session, "system", CONTROL_TEXTS[action], control_meta(action, ev.seq, ev.id, reason))
        w.receipts.issue_checkpoint(led, session, k)
        current(led, session, save=True)  # folds it now and keeps control-state.json up to date
    return ControlResult(session, action, ev.seq, ev.id, control.seq, control.id, reason)


def revoke(
    data_dir: str | os.PathLike[str],
    session: str,
    seq: object,
    reason: str | None = None,
    *,
    ledger: LedgerStore | None = None,
    key: SigningKey | None = None,
    stores: Stores | None = None,
) -> ControlResult:
    """Take the event at `seq` (or with id `evt_…`) out of retrieval from now on; the event is kept unchanged.

    Raises ControlError (one line, nothing appended) for an unknown session or seq, an erased event, an
    erasure or control record, an event already revoked, or a reason that repeats a word of the event.
    `stores`: the session's stores (storage.stores), on files or PostgreSQL; default the files in `data_dir`."""
    return _control(REVOKE, data_dir, session, seq, reason, ledger, key, stores)


def restore(
    data_dir: str | os.PathLike[str],
    session: str,
    seq: object,
    reason: str | None = None,
    *,
    ledger: LedgerStore | None = None,
    key: SigningKey | None = None,
    stores: Stores | None = None,
) -> ControlResult:
    """Bring a revoked event back into retrieval. ControlError as for `revoke` (and for an event not revoked)."""
    return _control(RESTORE, data_dir, session, seq, reason, ledger, key, stores)
