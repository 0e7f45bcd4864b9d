"""Ask me first on PostgreSQL: the consent proposals (chat.consent) and the per-session setting (control.settings).

What the file backend keeps in DATA_DIR/proposals/ and sessions/<s>/settings.json, in tables every replica shares
(storage/pg/sql.py, CONSENT_SCHEMA), so a token proposed on one replica is answered on any other, exactly once:

- the MAC secret is one row, created once: each replica offers 32 random bytes (INSERT … ON CONFLICT DO NOTHING)
  and then reads the row that won, so all of them sign and check tokens with the same secret;
- a proposal is a row holding the same JSON the file backend writes; spending it is one UPDATE … WHERE
  state = 'waiting' RETURNING, so of two spends on any replicas exactly one finds it waiting. The spend drops the
  JSON (the question leaves the database) and the row stays as the tombstone that says how it was spent;
- the setting is one row per session; no row is "off", as no file is on the file backend.

The callers (chat.consent, control.settings) check tokens, sessions and values; this module only stores them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ledger.event import validate_session_id
from storage import BackendError
from storage.pg import sql
from storage.pg.connect import Database

SPENT = ("used", "cancelled", "expired")


class PgProposals:
    """chat.consent's proposal store on PostgreSQL (receipts.stores.ProposalStore, as storage.files.receipts.file_backend.FileProposals). `ttl`: the tokens'
    lifetime in seconds (chat.consent.TOKEN_TTL), how long a tombstone outlives its proposal's expiry."""

    def __init__(self, db: Database, *, ttl: int) -> None:
        self.db = db
        self.ttl = ttl

    def __repr__(self) -> str:
        return f"PgProposals({self.db.shown!r})"

    def secret(self) -> bytes:
        with self.db.transaction() as conn:
            conn.execute(sql.CONSENT_SECRET_CREATE, (os.urandom(32),))
        with self.db.transaction() as conn:  # a new snapshot: sees the row of whichever replica won
            row = conn.execute(sql.CONSENT_SECRET_READ).fetchone()
        raw = bytes(row[0]) if row is not None else b""
        if len(raw) != 32:
            raise BackendError(f"PostgreSQL at {self.db.shown}: consent_secret: not a consent secret (expected 32 bytes, found {len(raw)})")
        return raw

    def save(self, session: str, nonce: str, pending: dict[str, Any]) -> None:
        text = json.dumps(pending, sort_keys=True)  # the bytes the file backend writes
        with self.db.transaction() as conn:
            conn.execute(sql.PROPOSAL_SAVE, (nonce, session, int(pending["expires"]), text))

    def load(self, nonce: str) -> dict[str, Any] | None:
        """The waiting proposal, or None (spent, swept or never made). ValueError for a row that is not JSON."""
        with self.db.transaction() as conn:
            row = conn.execute(sql.PROPOSAL_LOAD, (nonce,)).fetchone()
        if row is None:
            return None
        try:
            obj = json.loads(row[0])
        except ValueError as exc:
            raise ValueError(f"consent_proposals row {nonce} is not JSON ({exc})") from None
        if not isinstance(obj, dict):
            raise ValueError(f"consent_proposals row {nonce} is not a JSON object")
        return obj

    def spend(self, nonce: str, how: str) -> bool:
        """Mark the waiting proposal spent `how` and drop its question; False when it was no longer waiting."""
        if how not in SPENT:
            raise ValueError(f"consent proposal {nonce}: cannot be spent as {how!r} (one of {', '.join(SPENT)})")
        with self.db.transaction() as conn:
            row = conn.execute(sql.PROPOSAL_SPEND, (how, nonce)).fetchone()
        return row is not None

    def spent(self, nonce: str) -> str | None:
        with self.db.transaction() as conn:
            row = conn.execute(sql.PROPOSAL_SPENT, (nonce,)).fetchone()
        return str(row[0]) if row is not None else None

    def sweep(self, now: float) -> None:
        """Drop waiting proposals a minute past their expiry, tombstones a token lifetime after that."""
        with self.db.transaction() as conn:
            conn.execute(sql.PROPOSAL_SWEEP, (int(now) - 60, int(now) - self.ttl - 60))

    def forget_session(self, session: str) -> None:
        """Every proposal of the session, waiting or spent (a deleted session leaves no question behind)."""
        validate_session_id(session)  # a path-like id is refused before any file or row is touched
        with self.db.transaction() as conn:
            conn.execute(sql.PROPOSAL_DELETE_SESSION, (session,))


class PgSettings:
    """control.settings on PostgreSQL: one `session_settings` row per session that was ever set."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def __repr__(self) -> str:
        return f"PgSettings({self.db.shown!r})"

    def get_consent(self, session: str) -> bool:
        with self.db.transaction() as conn:
            row = conn.execute(sql.SETTINGS_GET, {"session": session}).fetchone()
        return bool(row[0]) if row is not None else False

    def set_consent(self, session: str, on: bool, *, create: bool) -> bool | None:
        """The value stored, or None when the session is unknown (no event, no setting) and `create` is off."""
        with self.db.transaction() as conn:
            row = conn.execute(sql.SETTINGS_SET, {"session": session, "consent": on, "create": create}).fetchone()
        return bool(row[0]) if row is not None else None

    def forget_session(self, session: str) -> None:
        with self.db.transaction() as conn:
            conn.execute(sql.SETTINGS_DELETE_SESSION, {"session": session})


class PgSuggestions:
    """control.suggestions on PostgreSQL: one `supersession_suggestions` row per suggested pair."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def __repr__(self) -> str:
        return f"PgSuggestions({self.db.shown!r})"

    def add(self, session: str, items: list[Any]) -> None:
        with self.db.transaction() as conn:
            for x in items:
                conn.execute(sql.SUGGESTION_ADD, (session, x.new_seq, x.older_seq, x.new_id, x.older_id, x.suggested_by, x.at))

    def all(self, session: str) -> list[Any]:
        from storage.contract import Suggestion

        with self.db.transaction() as conn:
            rows = conn.execute(sql.SUGGESTION_ALL, (session,)).fetchall()
        return [Suggestion(int(r[0]), r[1], int(r[2]), r[3], r[4], r[5]) for r in rows]

    def drop(self, session: str, new_seq: int, older_seq: int) -> None:
        with self.db.transaction() as conn:
            conn.execute(sql.SUGGESTION_DROP, (session, new_seq, older_seq))

    def forget_session(self, session: str) -> None:
        with self.db.transaction() as conn:
            conn.execute(sql.SUGGESTION_DELETE_SESSION, (session,))


class PgSessionState:
    """storage.api.SessionState on PostgreSQL: a session's consent proposals, settings and suggestions, as rows."""

    def __init__(self, db: Database, data_dir: Path) -> None:
        self.db = db
        self.data_dir = data_dir

    def __repr__(self) -> str:
        return f"PgSessionState({self.db.shown!r})"

    def settings(self) -> PgSettings:
        return PgSettings(self.db)

    def suggestions(self) -> PgSuggestions:
        return PgSuggestions(self.db)

    def forget_session(self, session: str) -> None:
        """Every proposal, setting and suggestion of the session gone, and the proposal files a file-backed past
        left in DATA_DIR/proposals/ (chat.consent.Store)."""
        for path in (self.data_dir / "proposals").glob(f"{session}.*"):
            path.unlink(missing_ok=True)
        for statement, params in (
            (sql.PROPOSAL_DELETE_SESSION, (session,)),
            (sql.SETTINGS_DELETE_SESSION, {"session": session}),
            (sql.SUGGESTION_DELETE_SESSION, (session,)),
        ):
            with self.db.transaction() as conn:
                conn.execute(statement, params)


__all__ = ["PgProposals", "PgSessionState", "PgSettings", "PgSuggestions"]
