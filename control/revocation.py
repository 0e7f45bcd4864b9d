"""Revoke and restore (I/O): take a memory out of retrieval, and bring it back, on the record.

Neither touches the event. `revoke` appends a control event (docs/FORMAT.md §17) saying which event,
when, and the optional reason; `restore` appends another. The state is derived from the ledger
(control.state), so a rebuilt index, another process or a restarted app all see the same state.
Revoke is not erasure: the words stay in the ledger, unused (forget destroys them).

`current(ledger, session)` is the state now, cached per session and brought up to date from the
ledger's new events (the caller holds the turn lock when it needs the state not to move).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from ledger import Event, Ledger
from ledger.event import EVENT_ID_RE, EventError, is_erasure_record, validate_session_id
from receipts import checkpoints, files
from receipts.decisions import CONTROL_TEXTS, MAX_CONTROL_REASON, RESTORE, REVOKE, control_meta
from receipts.keys import SigningKey, load_or_create
from receipts.supersessions import SUPERSEDE_TEXT, is_control_record

from .plan import PlanError, quoted
from .state import ControlState, derive


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


_cache: dict[tuple[str, str], ControlState] = {}
_cache_lock = threading.Lock()


def current(ledger: Ledger, session: str) -> ControlState:
    """The control state of `session` as its ledger holds it now (a copy: the caller may keep it)."""
    count, head = ledger.head(session)
    if count == 0:
        return ControlState()
    key = (os.path.realpath(ledger.data_dir), session)
    with _cache_lock:
        cached = _cache.get(key)
    state: ControlState | None = None
    if cached is not None and cached.size == count and cached.head == head:
        return cached.copy()
    if cached is not None and 0 < cached.size < count and ledger.read_events(session, [cached.size - 1])[0].chain == cached.head:
        state = cached.copy()  # the prefix it folded is unchanged: fold only the new events
        for ev in ledger.read_events(session, range(cached.size, count)):
            state.apply(ev)
    if state is None or state.size != count or state.head != head:
        state = _derive_scanned(ledger, session, count, head)
    with _cache_lock:
        _cache[key] = state.copy()
    return state


# Every control event's line holds its text verbatim: canonical JSON (docs/FORMAT.md §1) writes the top-level
# field as `"text":"[control record: revoke]"` (restore, supersede alike: CONTROL_TEXTS, SUPERSEDE_TEXT), with
# nothing to escape. A user's text holding these bytes is escaped (`\"text\":…`); an erased line has no text.
_NEEDLE = b'"text":"[control record: '
assert all(('"text":"' + t).encode().startswith(_NEEDLE) for t in (*CONTROL_TEXTS.values(), SUPERSEDE_TEXT))


def _control_candidates(path: Path, count: int) -> list[int]:
    """The seqs among the first `count` lines of the log at `path` that may be control events, by a byte search
    (no parse): every control event is among them; a match elsewhere (a meta value) is a line read for nothing."""
    out: list[int] = []
    line = 0  # newlines before the current position: the seq of the line there
    rest = b""  # the start of a line the previous reads did not finish
    with open(path, "rb") as f:
        while line < count:
            block = f.read(1 << 22)
            if not block:
                break
            first = block.find(b"\n")
            if first < 0:
                rest += block
                continue
            start = 0
            if rest:  # the line across reads, searched whole (the needle holds no newline: no other match straddles)
                if _NEEDLE in rest + block[: first + 1]:
                    out.append(line)
                line += 1
                start, rest = first + 1, b""
            end = block.rfind(b"\n") + 1
            at = start
            i = block.find(_NEEDLE, start, end)
            while i >= 0:
                line += block.count(b"\n", at, i)
                at = i
                if line >= count:
                    return [s for s in out if s < count]
                if not out or out[-1] != line:
                    out.append(line)
                i = block.find(_NEEDLE, i + 1, end)
            line += block.count(b"\n", at, end)
            rest = block[end:]
    return [s for s in out if s < count]


def _derive_scanned(ledger: Ledger, session: str, count: int, head: str) -> ControlState:
    """derive(ledger.events(session)) over the first `count` events, whose last has chain `head`, parsing only the
    lines that may be control events (a byte search finds them): the other events change nothing but size and head.
    At 1M events (565 MB) the first turn of a process took 1.5 s instead of 7-11 s (a busy 2-core machine)."""
    state = derive(ledger.read_events(session, _control_candidates(ledger.log_path(session), count)))
    state.size, state.head = count, head
    return state


def revoked_seqs(data_dir: str | os.PathLike[str], session: str, *, ledger: Ledger | None = None) -> dict[int, int]:
    """revoked seq -> the seq of the control event that revoked it (for labelling search results and the ledger view)."""
    led = ledger if ledger is not None else Ledger(data_dir)
    if not led.exists(session):
        return {}
    return {s: r.control_seq for s, r in current(led, session).revoked.items()}


def _target(led: Ledger, session: str, value: object, count: int) -> Event:
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
    ledger: Ledger | None,
    key: SigningKey | None,
) -> ControlResult:
    data = Path(data_dir)
    led = ledger if ledger is not None else Ledger(data)
    try:
        validate_session_id(session)
    except EventError as exc:
        raise ControlError(str(exc)) from None
    if not led.exists(session):
        raise ControlError(f"session {session}: no such session in {data}")
    if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_CONTROL_REASON):
        raise ControlError(f"reason: must be text of at most {MAX_CONTROL_REASON} characters")
    reason = reason.strip() or None if reason is not None else None
    with files.session_turn_lock(data, session):
        count, _head = led.head(session)
        ev = _target(led, session, seq, count)
        _check(session, ev, current(led, session), action, reason)
        k = key if key is not None else load_or_create(data)
        control = led.append(session, "system", CONTROL_TEXTS[action], control_meta(action, ev.seq, ev.id, reason))
        checkpoints.issue(data, led, session, k)
    return ControlResult(session, action, ev.seq, ev.id, control.seq, control.id, reason)


def revoke(
    data_dir: str | os.PathLike[str],
    session: str,
    seq: object,
    reason: str | None = None,
    *,
    ledger: Ledger | None = None,
    key: SigningKey | None = None,
) -> ControlResult:
    """Take the event at `seq` (or with id `evt_…`) out of retrieval from now on; the event is kept unchanged.

    Raises ControlError (one line, nothing appended) for an unknown session or seq, an erased event, an
    erasure or control record, an event already revoked, or a reason that repeats a word of the event."""
    return _control(REVOKE, data_dir, session, seq, reason, ledger, key)


def restore(
    data_dir: str | os.PathLike[str],
    session: str,
    seq: object,
    reason: str | None = None,
    *,
    ledger: Ledger | None = None,
    key: SigningKey | None = None,
) -> ControlResult:
    """Bring a revoked event back into retrieval. ControlError as for `revoke` (and for an event not revoked)."""
    return _control(RESTORE, data_dir, session, seq, reason, ledger, key)
