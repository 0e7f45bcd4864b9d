"""The visitor's two controls from the app and MCP (issue 11): ask me first, and revoke / restore.

The rules are chat.consent's and control.revocation's, called with the service's engine; this module
only checks the session key and the page's inputs first, and turns the domain's one-line refusals
into the app's families (BadInput for a refused token or approval, ControlError for a refused
revoke or restore), so the page and the MCP tools say the same thing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chat.consent import Proposal
from chat.engine import InputError, Turn
from control.revocation import ControlError, ControlResult
from control.revocation import restore as _restore
from control.revocation import revoke as _revoke
from control.settings import SettingsError, get_consent, set_consent
from webui.inputs import K_MAX, BadInput
from webui.service import Service
from webui.sessions import SessionKeyError


@dataclass(frozen=True, slots=True)
class Waiting:
    """A consent turn waiting for the person: its one-time token and the question (kept server-side, in a gr.State)."""

    token: str
    message: str


def consent_setting(service: Service, key: object) -> bool:
    """The key's session's "ask me first" setting, kept on the server (control.settings): what the checkbox shows
    whenever the session loads or switches. Raises SessionKeyError, BadInput (a settings file that cannot be read,
    named: never a silent off)."""
    session = service.session(key)
    try:
        return get_consent(service.engine.stores, session)
    except SettingsError as exc:
        raise BadInput(str(exc)) from None


def save_consent(service: Service, key: object, on: object) -> bool:
    """The checkbox changed: store it for the session (a new session's folder is made for it). Returns the value."""
    session = service.session(key)
    if not isinstance(on, bool):
        raise BadInput("ask me first: the setting must be on or off")
    try:
        return set_consent(service.engine.stores, session, on, create=True)
    except SettingsError as exc:
        raise BadInput(str(exc)) from None


def asks_first(service: Service, key: object, page: object) -> bool:
    """Whether a message is to be proposed rather than answered: the page's checkbox is on, or the session's
    setting is (set on another device, or the page has not loaded it yet). A setting that cannot be read counts
    as on: the turn is proposed, never sent without asking. An invalid key: False (the turn refuses it)."""
    if page is True:
        return True
    try:
        return consent_setting(service, key)
    except BadInput:
        return True
    except SessionKeyError:  # the turn refuses the key, with its own message
        return False


def _engine_call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except InputError as exc:  # ConsentError is one: a refused token or approval, nothing appended
        raise BadInput(str(exc)) from None


def propose(service: Service, key: object, message: object, k: object, *, k_max: int = K_MAX) -> Proposal:
    """Step 1 of a consent turn: the memories retrieval would hand the model, and a one-time token. Appends nothing."""
    session, k_, text = service.check_turn(key, message, k, k_max=k_max)
    service.settle(session)  # the memories shown come from the index: an erasure stopped half way is finished first
    proposal: Proposal = _engine_call(service.engine.propose, session, text, k_)
    return proposal


def answer(service: Service, key: object, token: object, approved: Sequence[object], on_delta: Any = None) -> Turn:
    """Step 2: answer with the approved memories only. Raises BadInput (refused, nothing appended), TurnError."""
    session = service.session(key)
    if not isinstance(token, str) or not token:
        raise BadInput("nothing to send: ask something first (with “ask me first” on, the memories are shown first)")
    turn: Turn = _engine_call(service.engine.answer, token, list(approved), session=session, on_delta=on_delta)
    return turn


def cancel(service: Service, key: object, token: object) -> None:
    """End a consent turn with nothing sent to the model: no event, no receipt."""
    session = service.session(key)
    _engine_call(service.engine.cancel, token, session=session)


def _seq(value: object, action: str) -> object:
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ControlError(f"{action}: choose a memory first (pick it in the list, select its row, or type its seq)")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value.strip() if isinstance(value, str) else value


def _reason(reason: object) -> str | None:
    if reason is not None and not isinstance(reason, str):
        raise ControlError("reason: must be text")
    return (reason or "").strip() or None


def revoke(service: Service, key: object, seq: object, reason: object = None) -> ControlResult:
    """Take a memory of the key's session out of retrieval (a control event). ControlError: nothing appended."""
    session = service.session(key)
    eng = service.engine
    return _revoke(eng.data_dir, session, _seq(seq, "revoke"), _reason(reason), key=eng.key, stores=eng.stores)


def restore(service: Service, key: object, seq: object, reason: object = None) -> ControlResult:
    """Bring a revoked memory of the key's session back into retrieval. ControlError: nothing appended."""
    session = service.session(key)
    eng = service.engine
    return _restore(eng.data_dir, session, _seq(seq, "restore"), _reason(reason), key=eng.key, stores=eng.stores)
