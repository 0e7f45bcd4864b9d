"""Supersessions a model suggested and the rules did not confirm: left to a person (issue 28, item 2).

A model's proposal that the rules do not read as the same subject and attribute (facts.rules.same_fact)
is never recorded as a supersession (facts.model.accept). It is kept here instead, as a suggestion a
person confirms or not: `python -m control suggestions DATA_DIR SESSION` lists the open ones, and confirming one is
recording the supersession oneself (`python -m control supersede DATA_DIR SESSION NEW OLD`, or Correct this in the
app), which records it as the visitor's decision — what it then is. A suggestion holds seqs, ids, the model's id and
when; never a statement's text, nor anything the model wrote (its label and reason may echo memory words).

Where it is kept follows the stores, as control.settings: `DATA_DIR/sessions/<session>/suggestions.json` (0600,
written atomically; it goes with the session folder), or `supersession_suggestions` rows on PostgreSQL
(storage.pg.consent.PgSuggestions; deleted with the session). `open_suggestions` leaves out what no longer applies:
a pair already recorded, an older statement superseded since, or either statement forgotten or revoked.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from control.settings import SettingsError, Where, _check_session, _session_dir
from ledger.event import now_ts
from storage.local import private_dir, replace_durable

if TYPE_CHECKING:
    from storage.stores import Stores

SUGGESTIONS_FILE = "suggestions.json"
VERSION = 1
MAX_KEPT = 200  # per session: the newest are kept (a suggestion is a hint, the ledger is the record)
MAX_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class Suggestion:
    """The statement at `new_seq` may supersede the one at `older_seq`, as `suggested_by` proposed at `at`."""

    new_seq: int
    new_id: str
    older_seq: int
    older_id: str
    suggested_by: str  # "model:<id>"
    at: str  # ledger ts form, UTC

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        return (
            f"seq {self.new_seq} may supersede seq {self.older_seq} (suggested by {self.suggested_by} at {self.at}; "
            "the rules did not read them as the same fact, so nothing was recorded)"
        )


def _from_dict(obj: object) -> Suggestion | None:
    if not isinstance(obj, dict) or set(obj) != {"new_seq", "new_id", "older_seq", "older_id", "suggested_by", "at"}:
        return None
    ints = [obj["new_seq"], obj["older_seq"]]
    strs = [obj["new_id"], obj["older_id"], obj["suggested_by"], obj["at"]]
    if any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in ints) or not all(isinstance(s, str) for s in strs):
        return None
    return Suggestion(**obj)


class SuggestionStore(Protocol):
    def add(self, session: str, items: list[Suggestion]) -> None: ...
    def all(self, session: str) -> list[Suggestion]: ...
    def drop(self, session: str, new_seq: int, older_seq: int) -> None: ...
    def forget_session(self, session: str) -> None: ...


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
                raw = f.read(MAX_BYTES + 1)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise SettingsError(f"suggestions of session {session} cannot be read ({exc.strerror or 'no details'})") from None
        try:
            obj = json.loads(raw.decode("utf-8")) if len(raw) <= MAX_BYTES else None
        except (UnicodeDecodeError, ValueError):
            obj = None
        items = obj.get("suggestions") if isinstance(obj, dict) and obj.get("v") == VERSION else None
        if not isinstance(items, list):
            raise SettingsError(f"suggestions of session {session}: {SUGGESTIONS_FILE} is not a suggestions file; delete it to start afresh")
        return [s for s in (_from_dict(x) for x in items) if s is not None]

    def _write(self, session: str, items: list[Suggestion]) -> None:
        sdir = _session_dir(self.data_dir, session)
        private_dir(sdir)
        data = json.dumps({"suggestions": [s.to_dict() for s in items[-MAX_KEPT:]], "v": VERSION}, sort_keys=True).encode("ascii") + b"\n"
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


def suggestion_store(where: Where) -> SuggestionStore:
    """The suggestions of a data directory (files), or of a deployment's stores (files or PostgreSQL)."""
    if isinstance(where, (str, os.PathLike)):
        return FileSuggestions(where)
    if where.kind == "files":
        return FileSuggestions(where.data_dir)
    if where.kind == "postgresql" and where.database is not None:
        from storage.pg.consent import PgSuggestions

        return PgSuggestions(where.database)
    raise SettingsError(f"suggestions: no store for a {where.kind!r} backend without a database")


def keep_suggestions(where: Where, session: str, pairs: list[tuple[int, str, int, str]], suggested_by: str) -> None:
    """Keep model proposals the rules did not confirm: (new_seq, new_id, older_seq, older_id) each."""
    if not pairs:
        return
    _check_session(session)
    at = now_ts()
    suggestion_store(where).add(session, [Suggestion(n, nid, o, oid, suggested_by, at) for n, nid, o, oid in pairs])


def open_suggestions(stores: Stores, session: str) -> list[Suggestion]:
    """The session's suggestions that still apply, oldest first: not a pair recorded since, not an older statement
    superseded since, neither statement revoked or forgotten, and the ids still the ledger's."""
    from control.revocation import current

    _check_session(session)
    items = suggestion_store(stores).all(session)
    if not items:
        return []
    state = current(stores.ledger, session)
    held = state.supersessions.superseded
    seqs = sorted({s for x in items for s in (x.new_seq, x.older_seq)})
    count, _head = stores.ledger.head(session)
    events = {ev.seq: ev for ev in stores.ledger.read_events(session, [s for s in seqs if s < count])}
    out: list[Suggestion] = []
    for x in items:
        new, old = events.get(x.new_seq), events.get(x.older_seq)
        if new is None or old is None or new.id != x.new_id or old.id != x.older_id or new.erased or old.erased:
            continue
        if x.older_seq in held or x.older_seq in state.revoked or x.new_seq in state.revoked:
            continue
        out.append(x)
    return out


def drop_suggestion(where: Where, session: str, new_seq: int, older_seq: int) -> None:
    """The pair was decided (recorded by a person, or by any rule): its suggestion goes."""
    suggestion_store(where).drop(_check_session(session), new_seq, older_seq)


def forget_suggestions(where: Where, session: str) -> None:
    suggestion_store(where).forget_session(_check_session(session))


__all__ = [
    "FileSuggestions", "Suggestion", "SuggestionStore", "drop_suggestion", "forget_suggestions", "keep_suggestions",
    "open_suggestions", "suggestion_store",
]
