"""Where the memory is kept: the embedded default (JSONL files + SQLite FTS5) or PostgreSQL.

`DATABASE_URL=postgresql://…` selects PostgreSQL (storage/pg/); without it everything stays in
DATA_DIR as before. Each backend keeps the same formats: a PostgreSQL event row stores its exact
JSONL line, so receipts, bundles and the verifier cannot tell the two apart.
"""

from __future__ import annotations

import os
import re

ENV_VAR = "DATABASE_URL"
SCHEMES = ("postgresql://", "postgres://")
SECRET_KEYS = frozenset({"password", "sslpassword"})  # libpq's parameters that hold a secret
_SECRET_KV = re.compile(r"(\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)", re.IGNORECASE)


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


def _query_parts(query: str) -> list[tuple[str, str, str | None]]:
    """A URI query's `key=value` parts as (raw key, decoded lower-case key, raw value or None without '=')."""
    from urllib.parse import unquote

    parts: list[tuple[str, str, str | None]] = []
    for part in query.split("&"):
        key, eq, value = part.partition("=")
        parts.append((key, unquote(key).strip().lower(), value if eq else None))
    return parts


def _conservative(url: str) -> tuple[str, str | None, str, str | None] | None:
    """_split_uri, but with the userinfo taken up to the LAST '@' when a ':' comes before it: a password with an
    unencoded '/' or '@' (base64 has '/') is not one to libpq, yet it is still a secret. May hide more than the
    password (a query value holding ':' and '@'), never less."""
    parts = _split_uri(url)
    if parts is None:
        return None
    scheme, creds, base, query = parts
    rest = url.partition("://")[2]
    at = rest.rfind("@")
    if at < 0 or ":" not in rest[:at] or (creds is not None and len(creds) >= at):
        return parts
    base, q, query2 = rest[at + 1 :].partition("?")
    return scheme, rest[:at], base, query2 if q else None


def _split_uri(url: str) -> tuple[str, str | None, str, str | None] | None:
    """(scheme, userinfo or None, host/dbname, query or None) as libpq reads a URI, None for a key=value string.

    libpq looks for the userinfo's '@' before anything else, up to the first '@' or '/': so `u:pa?ss@host` is user u
    with password `pa?ss`; the query is what follows the first '?' after that."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return None
    end = 0
    while end < len(rest) and rest[end] not in "@/":
        end += 1
    creds = None
    if end < len(rest) and rest[end] == "@":
        creds, rest = rest[:end], rest[end + 1 :]
    base, q, query = rest.partition("?")
    return scheme, creds, base, query if q else None


def redact(url: str) -> str:
    """The URL with every secret replaced by ***, for messages and logs.

    Every place libpq takes one from: the userinfo (`user:PASSWORD@host`, read as libpq reads it), the query
    parameters `password` and `sslpassword` (their names percent-encoded or not), and in a `key=value` conninfo
    string the same two keywords (a value ends at whitespace, or is quoted).
    """
    parts = _conservative(url)
    if parts is None:
        return _SECRET_KV.sub(r"\g<1>***", url)
    scheme, creds, base, query = parts
    shown = f"{scheme}://"
    if creds is not None:
        user, colon, _ = creds.partition(":")
        shown += f"{user}{':***' if colon else ''}@"
    shown += base
    if query is not None:
        shown += "?" + "&".join(
            raw if value is None else f"{raw}={'***' if name in SECRET_KEYS else value}"
            for raw, name, value in _query_parts(query)
        )
    return shown


def secrets_in(url: str) -> list[str]:
    """Every form in which `url`'s secrets could appear in a message: as written and percent-decoded, longest first."""
    from urllib.parse import unquote

    found: list[str] = []
    parts = _split_uri(url)
    if parts is None:
        for m in _SECRET_KV.finditer(url):
            value = m.group(2)
            if value.startswith("'") and value.endswith("'") and len(value) >= 2:
                found += [value, value[1:-1], re.sub(r"\\(.)", r"\1", value[1:-1])]
            else:
                found.append(value)
    else:
        for _scheme, creds, _base, query in (parts, _conservative(url) or parts):  # libpq's reading, and the wider one
            if creds is not None and ":" in creds:
                found.append(creds.partition(":")[2])
            if query is not None:
                found += [value for _raw, name, value in _query_parts(query) if name in SECRET_KEYS and value is not None]
    forms = {g for pw in found if pw for f in (pw, unquote(pw), unquote(pw, errors="replace")) for g in (f, f.strip())}
    return sorted((f for f in forms if f), key=len, reverse=True)  # a form inside another is not left half replaced


def scrub(message: str, url: str) -> str:
    """`message` (a libpq or pool error) with every form of `url`'s password and the URL itself replaced."""
    message = message.replace(url, redact(url))
    for secret in secrets_in(url):
        message = message.replace(secret, "***")
    return message
