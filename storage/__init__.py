"""Where the memory is kept: the embedded default (JSONL files + SQLite FTS5) or PostgreSQL.

`DATABASE_URL=postgresql://…` selects PostgreSQL (storage/pg/); without it everything stays in
DATA_DIR as before. Each backend keeps the same formats: a PostgreSQL event row stores its exact
JSONL line, so receipts, bundles and the verifier cannot tell the two apart.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ledger import Ledger
    from storage.pg.ledger import PgLedger

ENV_VAR = "DATABASE_URL"
SCHEMES = ("postgresql://", "postgres://")
_PASSWORD_KV = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]*)", re.IGNORECASE)


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


def _query_parts(query: str) -> list[tuple[str, str, str]]:
    """A URI query's `key=value` parts as (raw key, decoded key, raw value)."""
    from urllib.parse import unquote

    parts = []
    for part in query.split("&"):
        key, _, value = part.partition("=")
        parts.append((key, unquote(key).strip().lower(), value))
    return parts


def redact(url: str) -> str:
    """The URL with any password replaced by ***, for messages and logs.

    Both places libpq takes one from a URI: the userinfo (`user:PASSWORD@host`) and the query parameter
    (`?password=…`, its name percent-encoded or not), and in a `key=value` conninfo string `password=…`.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return _PASSWORD_KV.sub(r"\g<1>***", url)
    base, q, query = rest.partition("?")
    if "@" in base:
        creds, at, host = base.rpartition("@")
        user, colon, _ = creds.partition(":")
        base = f"{user}{':***' if colon else ''}{at}{host}"
    if q:
        query = "&".join(f"{raw}=***" if name == "password" else (f"{raw}={value}" if "=" in part else raw)
                         for (raw, name, value), part in zip(_query_parts(query), query.split("&"), strict=True))
    return f"{scheme}://{base}{q}{query}"


def secrets_in(url: str) -> list[str]:
    """Every form in which `url`'s password could appear in a message: as written and percent-decoded."""
    from urllib.parse import unquote

    found: list[str] = []
    scheme, sep, rest = url.partition("://")
    if sep:
        base, _, query = rest.partition("?")
        if "@" in base:
            creds = base.rpartition("@")[0]
            user, colon, pw = creds.partition(":")
            if colon:
                found.append(pw)
        found += [value for _raw, name, value in _query_parts(query) if name == "password"]
    else:
        found += [m.group(2).strip("'") for m in _PASSWORD_KV.finditer(url)]
    forms = {f for pw in found if pw for f in (pw, unquote(pw), unquote(pw, errors="replace"))}
    # the longest first, so a form inside another is not left half replaced
    return sorted((f for f in forms if len(f) >= 1), key=len, reverse=True)


def scrub(message: str, url: str) -> str:
    """`message` (a libpq or pool error) with every form of `url`'s password and the URL itself replaced."""
    message = message.replace(url, redact(url))
    for secret in secrets_in(url):
        message = message.replace(secret, "***")
    return message


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
