"""The file backend's side of storage.api that is not one of its stores' own methods (I/O):
`FileSessionState` (a session's state kept beside the ledger: consent proposals, settings, suggestions), and
`drop_file_copy`, what a PostgreSQL deployment runs on the files a `ledger migrate` left in DATA_DIR
(storage.api.pg_stores wires it in: the two backends never import each other).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from ledger.event import EventError, validate_session_id
from storage.common.fsmode import private_dir, replace_durable
from storage.contract import SessionState, SettingsError, SettingsStore, Suggestion, SuggestionStore

SETTINGS_FILE = "settings.json"  # DATA_DIR/sessions/<session>/settings.json: {"consent": true|false, "v": 1}
SETTINGS_VERSION = 1
SETTINGS_MAX_BYTES = 4096  # a settings file is a few bytes; anything bigger is not one
SUGGESTIONS_FILE = "suggestions.json"  # DATA_DIR/sessions/<session>/suggestions.json: {"suggestions": [...], "v": 1}
SUGGESTIONS_VERSION = 1
MAX_KEPT = 200  # per session: the newest are kept (a suggestion is a hint, the ledger is the record)
SUGGESTIONS_MAX_BYTES = 256 * 1024


def _check_session(session: object) -> str:
    """The session id, checked before it names a folder (control.settings checks it first with the same words)."""
    if not isinstance(session, str):
        raise SettingsError("settings: session: must be text")
    try:
        validate_session_id(session)
    except EventError as exc:
        raise SettingsError(str(exc)) from None
    return session


def _session_dir(data_dir: str | os.PathLike[str], session: object) -> Path:
    return Path(data_dir) / "sessions" / _check_session(session)


class FileSettings:
    """DATA_DIR/sessions/<session>/settings.json (control.settings): written atomically, 0600; a file that cannot be
    read as exactly `{"consent": true|false, "v": 1}` is an error naming it, never a silent "off"."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.data_dir = Path(data_dir)

    def __repr__(self) -> str:
        return f"FileSettings({str(self.data_dir)!r})"

    def get_consent(self, session: str) -> bool:
        path = _session_dir(self.data_dir, session) / SETTINGS_FILE
        try:
            with path.open("rb") as f:
                raw = f.read(SETTINGS_MAX_BYTES + 1)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise SettingsError(f"settings: {path} cannot be read ({exc.strerror or 'no details'})") from None
        return _parse(path, raw)

    def set_consent(self, session: str, on: bool, *, create: bool) -> bool | None:
        sdir = _session_dir(self.data_dir, session)
        if not sdir.is_dir():
            if not create:
                return None
            private_dir(sdir)
        data = json.dumps({"consent": on, "v": SETTINGS_VERSION}, sort_keys=True).encode("ascii") + b"\n"
        replace_durable(sdir / SETTINGS_FILE, data)
        return on

    def forget_session(self, session: str) -> None:
        """Only the settings file: the session folder is the ledger's (control.forget removes it whole)."""
        (_session_dir(self.data_dir, session) / SETTINGS_FILE).unlink(missing_ok=True)


def _parse(path: Path, raw: bytes) -> bool:
    fix = "turn the setting on or off again to rewrite it"
    if len(raw) > SETTINGS_MAX_BYTES:
        raise SettingsError(f"settings: {path} is over {SETTINGS_MAX_BYTES} bytes, so it is not a settings file; {fix}")
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise SettingsError(f"settings: {path} is not valid JSON (a corrupt file); {fix}") from None
    if not isinstance(obj, dict) or obj.get("v") != SETTINGS_VERSION or set(obj) != {"v", "consent"}:
        raise SettingsError(f'settings: {path} is not a settings file (expected {{"consent": …, "v": 1}}); {fix}')
    consent = obj["consent"]
    if not isinstance(consent, bool):
        raise SettingsError(f"settings: {path}: consent must be true or false, found {json.dumps(consent)[:40]}; {fix}")
    return consent


def _from_dict(obj: object) -> Suggestion | None:
    if not isinstance(obj, dict) or set(obj) != {"new_seq", "new_id", "older_seq", "older_id", "suggested_by", "at"}:
        return None
    ints = [obj["new_seq"], obj["older_seq"]]
    strs = [obj["new_id"], obj["older_id"], obj["suggested_by"], obj["at"]]
    if any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in ints) or not all(
        isinstance(s, str) for s in strs
    ):
        return None
    return Suggestion(**obj)


class FileSuggestions:
    """DATA_DIR/sessions/<session>/suggestions.json: {"suggestions": [...], "v": 1}."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.data_dir = Path(data_dir)

    def _path(self, session: str) -> Path:
        return _session_dir(self.data_dir, session) / SUGGESTIONS_FILE

    def all(self, session: str) -> list[Suggestion]:
        path = self._path(session)
        try:
            with path.open("rb") as f:
                raw = f.read(SUGGESTIONS_MAX_BYTES + 1)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise SettingsError(
                f"suggestions of session {session} cannot be read ({exc.strerror or 'no details'})"
            ) from None
        try:
            obj = json.loads(raw.decode("utf-8")) if len(raw) <= SUGGESTIONS_MAX_BYTES else None
        except (UnicodeDecodeError, ValueError):
            obj = None
        items = obj.get("suggestions") if isinstance(obj, dict) and obj.get("v") == SUGGESTIONS_VERSION else None
        if not isinstance(items, list):
            raise SettingsError(
                f"suggestions of session {session}: {SUGGESTIONS_FILE} is not a suggestions file; delete it to start afresh"
            )
        return [s for s in (_from_dict(x) for x in items) if s is not None]

    def _write(self, session: str, items: list[Suggestion]) -> None:
        sdir = _session_dir(self.data_dir, session)
        private_dir(sdir)
        data = (
            json.dumps(
                {"suggestions": [s.to_dict() for s in items[-MAX_KEPT:]], "v": SUGGESTIONS_VERSION}, sort_keys=True
            ).encode("ascii")
            + b"\n"
        )
        replace_durable(sdir / SUGGESTIONS_FILE, data)

    def add(self, session: str, items: list[Suggestion]) -> None:
        have = self.all(session)
        pairs = {(s.new_seq, s.older_seq) for s in have}
        self._write(session, have + [s for s in items if (s.new_seq, s.older_seq) not in pairs])

    def drop(self, session: str, new_seq: int, older_seq: int) -> None:
        have = self.all(session)
        kept = [s for s in have if (s.new_seq, s.older_seq) != (new_seq, older_seq)]
        if len(kept) != len(have):
            self._write(session, kept)

    def forget_session(self, session: str) -> None:
        self._path(session).unlink(missing_ok=True)


class FileSessionState:
    """storage.api.SessionState on files: the consent proposals in DATA_DIR/proposals/ (chat.consent.Store); the
    settings and suggestions live in the session's folder, which the ledger's delete_session removes whole."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    def __repr__(self) -> str:
        return f"FileSessionState({str(self.data_dir)!r})"

    def settings(self) -> SettingsStore:
        return FileSettings(self.data_dir)

    def suggestions(self) -> SuggestionStore:
        return FileSuggestions(self.data_dir)

    def forget_session(self, session: str) -> None:
        for path in (self.data_dir / "proposals").glob(f"{session}.*"):  # waiting with the question (chat.consent)
            path.unlink(missing_ok=True)


def drop_file_copy(data: Path, session: str) -> tuple[str, ...]:
    """On PostgreSQL: delete what a file-backed past of the session left in DATA_DIR — `python -m ledger migrate`
    copies a data directory into the database (verifying every line and receipt it copies) and leaves the files: the
    session's folder (events.jsonl, receipts, `.cites` records, import records), its Merkle tree and audit cache,
    and its rows in index.sqlite (purged: the WAL emptied, the freed pages zeroed), with any index copies moved aside.
    The database is the record; a forget there (and a session's deletion) must leave no older copy of the words
    in DATA_DIR. Idempotent (recover runs it again); returns the names of index copies overwritten and removed."""
    from retrieval.model import PurgeIncomplete
    from storage.common.scrub import scrub_prefixed
    from storage.files.ledger.store import Ledger
    from storage.files.receipts import files
    from storage.files.receipts.audit import forget_cache
    from storage.files.receipts.file_backend import IndexRows
    from storage.files.retrieval.db import INDEX_COPY_PREFIX, INDEX_FILE, Index

    validate_session_id(session)
    for path in (data / "sessions" / session, data / "merkle" / session):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        elif path.is_symlink():
            path.unlink(missing_ok=True)
    (data / "merkle" / f"{session}.lock").unlink(missing_ok=True)
    forget_cache(data, session)
    if not (data / INDEX_FILE).is_file():
        return ()
    scrubbed = scrub_prefixed(data, INDEX_COPY_PREFIX)  # before the index opens (it may move one aside itself)
    idx = Index(data, Ledger(data))
    try:
        idx.ensure_schema("receipts", files.RECEIPTS_DDL)
        IndexRows(idx).forget_rows(session)
        for n in range(2):  # as control.steps.purged: a reader that kept SQLite from emptying its WAL is waited out
            try:
                idx.purge_session(session)
                break
            except PurgeIncomplete:
                if n == 1:
                    raise
                time.sleep(0.05)
    finally:
        idx.close()
    return scrubbed


_: type[SessionState] = FileSessionState  # checked by mypy: the files implement the contract

__all__ = [
    "MAX_KEPT",
    "SETTINGS_FILE",
    "SUGGESTIONS_FILE",
    "FileSessionState",
    "FileSettings",
    "FileSuggestions",
    "drop_file_copy",
]
