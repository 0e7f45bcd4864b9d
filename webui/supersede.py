"""Correct this, and a memory's history, from the app and MCP (issue 12).

The rules are control.supersession's, called with the service's engine (its ledger, index and signing key),
after the session key is checked; the session's turn lock is taken there. A refusal is a SupersedeError (a
ControlError: one line, nothing appended), which the page shows as a toast and an MCP client as a tool error.
"""

from __future__ import annotations

from control.revocation import ControlError
from control.suggestions import Suggestion, open_suggestions
from control.supersession import HistoryEntry, SupersedeResult
from control.supersession import correct as _correct
from control.supersession import history as _history
from webui.service import Service


def _seq(value: object, action: str) -> object:
    """What an entry point gave as the memory: the turn dropdown's int, a selected row's or typed seq, or an id."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ControlError(f"{action}: choose a memory first (pick it in the list, select its row, or type its seq)")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value.strip() if isinstance(value, str) else value


def _text(value: object, what: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ControlError(f"{what}: must be text")
    return (value or "").strip() or None


def correct(service: Service, key: object, seq: object, new_text: object, reason: object = None) -> SupersedeResult:
    """"Correct this": the visitor's new statement is appended as a user event that supersedes the memory at `seq`
    (decided by the visitor). SupersedeError / ControlError: nothing appended."""
    session = service.session(key)
    eng = service.engine
    target = _seq(seq, "correct this")
    text = _text(new_text, "correct this")
    if text is None:
        raise ControlError("correct this: type the statement that holds now in the box beside the button")
    return _correct(
        eng.data_dir, session, target, text, reason=_text(reason, "reason"), key=eng.key, stores=eng.stores
    )


def suggestions(service: Service, key: object, entries: list[HistoryEntry]) -> list[Suggestion]:
    """The open suggestions (control.suggestions) that name any statement of these history entries."""
    session = service.session(key)
    seqs = {e.seq for e in entries}
    return [x for x in open_suggestions(service.engine.stores, session) if x.new_seq in seqs or x.older_seq in seqs]


def history(service: Service, key: object, seq: object) -> list[HistoryEntry]:
    """Every statement of the fact the memory at `seq` (or id) states, oldest first, each with its state now."""
    session = service.session(key)
    return _history(service.data_dir, session, _seq(seq, "history"), stores=service.engine.stores)
