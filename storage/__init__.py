"""Where the memory is kept: the embedded default (JSONL files + SQLite FTS5) or PostgreSQL.

`DATABASE_URL=postgresql://…` selects PostgreSQL (storage/pg/); without it everything stays in
DATA_DIR as before. Each backend keeps the same formats: a PostgreSQL event row stores its exact
JSONL line, so receipts, bundles and the verifier cannot tell the two apart.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ledger import Ledger
    from storage.pg.ledger import PgLedger

ENV_VAR = "DATABASE_URL"
SCHEMES = ("postgresql://", "postgres://")


class BackendError(RuntimeError):
    """The storage backend cannot be used; the message says which and why (never a password)."""


def database_url(environ: dict[str, str] | None = None) -> str | None:
    """$DATABASE_URL when it names PostgreSQL, None when unset or empty; anything else is refused."""
    env = os.environ if environ is None else environ
    url = (env.get(ENV_VAR) or "").strip()
    if not url:
        return None
    if not url.startswith(SCHEMES):
        raise BackendError(f"{ENV_VAR}: must start with postgresql:// (got {redact(url)!r})")
    return url


def is_database_url(text: str) -> bool:
    """True when a command-line argument names a database rather than a folder."""
    return text.startswith(SCHEMES)


def redact(url: str) -> str:
    """The URL with any password replaced by ***, for messages and logs."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    creds, at, host = rest.rpartition("@")
    user, colon, _ = creds.partition(":")
    return f"{scheme}://{user}{':***' if colon else ''}{at}{host}"


_url_from_env = database_url  # open_ledger's parameter has the same name


def open_ledger(data_dir: str | os.PathLike[str], database_url: str | None = None) -> Ledger | PgLedger:
    """The ledger to use: PgLedger when `database_url` (or $DATABASE_URL) names PostgreSQL, else Ledger(data_dir).

    BackendError when the URL is not a PostgreSQL one or the server cannot be reached.
    """
    url = database_url if database_url is not None else _url_from_env()
    if url:
        if not is_database_url(url):
            raise BackendError(f"{ENV_VAR}: must start with postgresql:// (got {redact(url)!r})")
        from storage.pg.ledger import PgLedger

        return PgLedger(url, Path(data_dir))
    from ledger import Ledger

    return Ledger(data_dir)
