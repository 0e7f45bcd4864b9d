"""Session keys (the visitor's secret) and session ids (public: they appear in every receipt).

A receipt names its session, and receipts are made to be handed to others. So
the session id must not be a credential. The visitor holds a *session key*
(at least 128 random bits, kept in the browser or by an MCP client) and the
ledger session is a one-way function of it:

    session_id(key) = hex(sha256(b"mre:v1:session-key\\x00" + UTF-8(key)))[:32]

Holding a receipt reveals the id, which opens nothing: every entry point of the
app (the UI, gradio_client, MCP) takes the key and derives the id. Changing the
derivation changes which ledger every key opens: treat it as part of the format.
"""

from __future__ import annotations

import hashlib
import re
import secrets

KEY_RE = re.compile(r"[A-Za-z0-9_-]{32,64}")
KEY_TAG = b"mre:v1:session-key\x00"
KEY_BYTES = 32  # secrets.token_urlsafe(32): 43 characters, 256 bits


class SessionKeyError(ValueError):
    """A session key was missing or not of the required shape (nothing was read or written)."""


def new_session_key() -> str:
    """A fresh, unguessable session key (256 random bits, URL-safe base64)."""
    return secrets.token_urlsafe(KEY_BYTES)


def check_session_key(value: object) -> str:
    """`value` if it is a usable key; never echoes the value (it is a secret)."""
    if not isinstance(value, str) or not value:
        raise SessionKeyError("session key: missing (reload the page, or call new_session_key)")
    if not KEY_RE.fullmatch(value):
        raise SessionKeyError(
            f"session key: must be 32-64 characters of letters, digits, '-' or '_' (got {len(value)} characters)"
        )
    return value


def session_id(key: str) -> str:
    """The public ledger session id of a (checked) session key."""
    return hashlib.sha256(KEY_TAG + check_session_key(key).encode("ascii")).hexdigest()[:32]


def is_session_key(value: object) -> bool:
    return isinstance(value, str) and KEY_RE.fullmatch(value) is not None
