"""A session's settings kept on the server (issue 11): today one, `consent` ("ask me first"), off by default.

The setting belongs to the session, not to a page: a reload, or another device opening the same session,
finds it as it was left, so memories never flow to the model again because a checkbox was redrawn off.
It lives in `DATA_DIR/sessions/<session>/settings.json` — `{"consent": true|false, "v": 1}`, written
atomically (a temp file in the same folder, fsync, rename, fsync of the folder; 0600, storage.common.fsmode) — and
goes with the session folder when the session is forgotten (control.forget.forget_session, retention).
It holds no memory text, so erasing an event never needs to touch it.

A file that cannot be read as exactly that is an error naming the file, never a silent "off": a person who
turned "ask me first" on must not lose it to a broken file. `refuse_direct_turn` is what the one-step turn
(the web chat, MCP `ask`, `python -m chat`) calls first: with consent on, the turn is refused in one line
pointing at the two-step propose / answer, and nothing is stored or sent.

Where it is kept follows the deployment's stores (storage.stores): every function takes a data directory (the
files, as above) or a `Stores` — on files the same files under `stores.data_dir`; on PostgreSQL a
`session_settings` row, so every replica reads the switch another one set.
`settings_store` gives the one for a place (storage.api.SessionState.settings): the same three methods.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from ledger.event import EventError, validate_session_id
from storage.api import SettingsError as SettingsError
from storage.api import SettingsStore as SettingsStore
from storage.api import file_session_state

if TYPE_CHECKING:
    from storage.api import Stores

SETTINGS_FILE = "settings.json"  # the file backend's (storage.file_state.FileSettings)


class ConsentRequired(SettingsError):
    """A one-step turn was asked on a session whose "ask me first" is on."""


Where: TypeAlias = "str | os.PathLike[str] | Stores"  # a data directory (files), or a deployment's stores (either backend)


def settings_store(where: Where) -> SettingsStore:
    """The settings of a data directory (files), or of a deployment's stores (either backend: SessionState)."""
    if isinstance(where, (str, os.PathLike)):
        return file_session_state(where).settings()
    return where.session_state.settings()


def _shown(where: Where) -> str:
    """What a message names: the data folder, or the database (never its password)."""
    return str(Path(where)) if isinstance(where, (str, os.PathLike)) else where.where


def _check_session(session: object) -> str:
    """The session id, checked before any store sees it (it names a folder on files)."""
    if not isinstance(session, str):
        raise SettingsError("settings: session: must be text")
    try:
        validate_session_id(session)
    except EventError as exc:
        raise SettingsError(str(exc)) from None  # the ledger's own words: "session id '…': must be …"
    return session


def _session_dir(data_dir: str | os.PathLike[str], session: object) -> Path:
    return Path(data_dir) / "sessions" / _check_session(session)


def settings_path(data_dir: str | os.PathLike[str], session: str) -> Path:
    return _session_dir(data_dir, session) / SETTINGS_FILE


def get_consent(where: Where, session: str) -> bool:
    """Whether "ask me first" is on for the session. No settings file or row (a new session, or never set): off.
    Raises SettingsError for an invalid session id, or for a settings file that cannot be read (naming it);
    storage.BackendError when the database cannot be reached."""
    _check_session(session)
    return settings_store(where).get_consent(session)


def set_consent(where: Where, session: str, on: bool, *, create: bool = False) -> bool:
    """Turn "ask me first" on or off for the session; returns the value stored.

    A session that has no folder yet (on PostgreSQL: no event and no setting) is refused ("unknown session") unless
    `create`: the web app passes it, as a session key opens exactly one session and a new one has no events until
    its first message (the setting can be turned on before that message)."""
    if not isinstance(on, bool):
        raise SettingsError("settings: consent must be true or false")
    _check_session(session)
    stored = settings_store(where).set_consent(session, on, create=create)
    if stored is None:
        raise SettingsError(f"settings: session {session} is unknown in {_shown(where)}")
    return stored


def forget_settings(where: Where, session: str) -> None:
    """The session's settings, gone (idempotent): what deleting a session does on PostgreSQL, where no session
    folder takes them along. On files only settings.json goes (the folder is control.forget's to remove)."""
    _check_session(session)
    settings_store(where).forget_session(session)


def refuse_direct_turn(where: Where, session: str) -> None:
    """Before a one-step turn: refuse it (ConsentRequired) when the session's "ask me first" is on. A settings
    file that cannot be read refuses it too (SettingsError naming the file): the person may have turned it on.
    `where`: a data directory, or the engine's stores (either backend)."""
    if get_consent(where, session):
        raise ConsentRequired(
            f"session {session}: ask me first is on, so the memories must be approved before the model sees them: "
            "use propose then answer (MCP propose_turn / answer_turn; `python -m chat propose` / `answer`); "
            "nothing was stored or sent"
        )
