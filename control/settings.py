"""A session's settings kept on the server (issue 11): today one, `consent` ("ask me first"), off by default.

The setting belongs to the session, not to a page: a reload, or another device opening the same session,
finds it as it was left, so memories never flow to the model again because a checkbox was redrawn off.
It lives in `DATA_DIR/sessions/<session>/settings.json` — `{"consent": true|false, "v": 1}`, written
atomically (a temp file in the same folder, fsync, rename, fsync of the folder; 0600, ledger.fsmode) — and
goes with the session folder when the session is forgotten (control.forget.forget_session, retention).
It holds no memory text, so erasing an event never needs to touch it.

A file that cannot be read as exactly that is an error naming the file, never a silent "off": a person who
turned "ask me first" on must not lose it to a broken file. `refuse_direct_turn` is what the one-step turn
(the web chat, MCP `ask`, `python -m chat`) calls first: with consent on, the turn is refused in one line
pointing at the two-step propose / answer, and nothing is stored or sent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ledger.event import EventError, validate_session_id
from ledger.fsmode import private_dir, replace_durable

SETTINGS_FILE = "settings.json"
VERSION = 1
MAX_BYTES = 4096  # a settings file is a few bytes; anything bigger is not one


class SettingsError(ValueError):
    """A session's settings could not be read or written (one line, naming the session or the file)."""


class ConsentRequired(SettingsError):
    """A one-step turn was asked on a session whose "ask me first" is on."""


def _session_dir(data_dir: str | os.PathLike[str], session: object) -> Path:
    if not isinstance(session, str):
        raise SettingsError("settings: session: must be text")
    try:
        validate_session_id(session)
    except EventError as exc:
        raise SettingsError(str(exc)) from None  # the ledger's own words: "session id '…': must be …"
    return Path(data_dir) / "sessions" / session


def settings_path(data_dir: str | os.PathLike[str], session: str) -> Path:
    return _session_dir(data_dir, session) / SETTINGS_FILE


def get_consent(data_dir: str | os.PathLike[str], session: str) -> bool:
    """Whether "ask me first" is on for the session. No settings file (a new session, or never set): off.
    Raises SettingsError for an invalid session id, or for a settings file that cannot be read (naming it)."""
    path = settings_path(data_dir, session)
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise SettingsError(f"settings: {path} cannot be read ({exc.strerror or 'no details'})") from None
    return _parse(path, raw)


def _parse(path: Path, raw: bytes) -> bool:
    fix = "turn the setting on or off again to rewrite it"
    if len(raw) > MAX_BYTES:
        raise SettingsError(f"settings: {path} is over {MAX_BYTES} bytes, so it is not a settings file; {fix}")
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise SettingsError(f"settings: {path} is not valid JSON (a corrupt file); {fix}") from None
    if not isinstance(obj, dict) or obj.get("v") != VERSION or set(obj) != {"v", "consent"}:
        raise SettingsError(f'settings: {path} is not a settings file (expected {{"consent": …, "v": 1}}); {fix}')
    consent = obj["consent"]
    if not isinstance(consent, bool):
        raise SettingsError(f"settings: {path}: consent must be true or false, found {json.dumps(consent)[:40]}; {fix}")
    return consent


def set_consent(data_dir: str | os.PathLike[str], session: str, on: bool, *, create: bool = False) -> bool:
    """Turn "ask me first" on or off for the session; returns the value stored.

    A session that has no folder yet is refused ("unknown session") unless `create`: the web app passes it, as a
    session key opens exactly one session and a new one has no events until its first message (the setting can be
    turned on before that message)."""
    if not isinstance(on, bool):
        raise SettingsError("settings: consent must be true or false")
    sdir = _session_dir(data_dir, session)
    if not sdir.is_dir():
        if not create:
            raise SettingsError(f"settings: session {session} is unknown in {Path(data_dir)}")
        private_dir(sdir)
    data = json.dumps({"consent": on, "v": VERSION}, sort_keys=True).encode("ascii") + b"\n"
    _write_atomic(sdir / SETTINGS_FILE, data)
    return on


def _write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` durably (ledger.fsmode.replace_durable): a crash leaves the old file or the new one."""
    replace_durable(path, data)


def refuse_direct_turn(data_dir: str | os.PathLike[str], session: str) -> None:
    """Before a one-step turn: refuse it (ConsentRequired) when the session's "ask me first" is on. A settings
    file that cannot be read refuses it too (SettingsError naming the file): the person may have turned it on."""
    if get_consent(data_dir, session):
        raise ConsentRequired(
            f"session {session}: ask me first is on, so the memories must be approved before the model sees them: "
            "use propose then answer (MCP propose_turn / answer_turn; `python -m chat propose` / `answer`); "
            "nothing was stored or sent"
        )
