"""Session keys (the visitor's secret) and session ids (public: they appear in every receipt).

A receipt names its session, and receipts are made to be handed to others. So
the session id must not be a credential. The visitor holds a *session key*
(at least 128 random bits, kept in the browser or by an MCP client) and the
ledger session is a one-way function of it:

    session_id(key) = hex(sha256(b"mre:v1:session-key\\x00" + UTF-8(key)))[:32]

Holding a receipt reveals the id, which opens nothing: every entry point of the
app (the UI, gradio_client, MCP) takes the key and derives the id. Changing the
derivation changes which ledger every key opens: treat it as part of the format.

A generated key is checked (issue 28): 43 URL-safe base64 characters of 32 random bytes, '-', and 6 check
characters (URL-safe base64 of sha256(b"mre:v1:session-key-check\x00" + the 43)). A key of that shape whose check
characters do not match (a typo, a truncated paste) is refused: it would open another, empty session. A key of the
old format (any 32-64 characters of letters, digits, '-' and '_', as generated before) still opens its session;
`is_old_format` says so, and the app shows a warning. Any key that is easy to guess (few different characters, a
repeated block, mostly runs like `abcd…`) is refused, whatever its format.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets

KEY_RE = re.compile(r"[A-Za-z0-9_-]{32,64}")
KEY_TAG = b"mre:v1:session-key\x00"
KEY_BYTES = 32  # secrets.token_urlsafe(32): 43 characters, 256 bits
CHECK_TAG = b"mre:v1:session-key-check\x00"
CHECK_CHARS = 6
BODY_CHARS = 43
CHECKED_RE = re.compile(r"[A-Za-z0-9_-]{43}-[A-Za-z0-9_-]{6}")  # a generated key: 43 + '-' + 6 = 50 characters
MIN_DISTINCT = 12  # 32 random characters of 64 hold ~25 different ones; fewer than 12 is a hand-made key


class SessionKeyError(ValueError):
    """A session key was missing or not of the required shape (nothing was read or written)."""


def _check_chars(body: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(CHECK_TAG + body.encode("ascii")).digest()).decode("ascii")[:CHECK_CHARS]


def new_session_key() -> str:
    """A fresh, unguessable session key: 256 random bits (43 URL-safe base64 characters), '-', 6 check characters."""
    while True:
        body = secrets.token_urlsafe(KEY_BYTES)
        key = f"{body}-{_check_chars(body)}"
        if _guessable(key) is None:  # always, in practice: a generated key is never one the check refuses
            return key


def _shape(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise SessionKeyError("session key: missing (reload the page, or call new_session_key)")
    if not KEY_RE.fullmatch(value):
        raise SessionKeyError(
            f"session key: must be 32-64 characters of letters, digits, '-' or '_' (got {len(value)} characters)"
        )
    return value


def _guessable(key: str) -> str | None:
    """Why `key` is easy to guess, or None: few different characters, a repeated block, or mostly runs (each
    character the one before, or next to it: `aaaa`, `abcd`, `9876`)."""
    distinct = len(set(key))
    if distinct < MIN_DISTINCT:
        return f"it uses only {distinct} different characters"
    n = len(key)
    for period in range(1, n // 2 + 1):
        if n % period == 0 and key == key[:period] * (n // period):
            return "it repeats one block of characters"
    steps = sum(1 for a, b in zip(key, key[1:], strict=False) if abs(ord(a) - ord(b)) <= 1)
    if steps * 2 > n - 1:
        return "it is mostly runs of neighbouring characters"
    return None


def check_session_key(value: object) -> str:
    """`value` if it is a usable key; never echoes the value (it is a secret). SessionKeyError (one line) for a key of
    the wrong shape, a generated key's shape whose check characters do not match, or a key that is easy to guess."""
    key = _shape(value)
    if CHECKED_RE.fullmatch(key) and key[BODY_CHARS + 1 :] != _check_chars(key[:BODY_CHARS]):
        raise SessionKeyError(
            "session key: its last 6 characters (the check) do not match the rest: a typo or a cut-off paste; "
            "copy the whole key again"
        )
    why = _guessable(key)
    if why is not None:
        raise SessionKeyError(f"session key: too easy to guess ({why}); start a new session for a generated key")
    return key


def is_old_format(key: str) -> bool:
    """A usable key without check characters (generated before they were added, or made by hand): it still opens
    its session, but a typo in it opens another one silently, so the app warns."""
    return not CHECKED_RE.fullmatch(key)


def session_id(key: str) -> str:
    """The public ledger session id of a session key (of the right shape; check_session_key is the entry points' rule)."""
    return hashlib.sha256(KEY_TAG + _shape(key).encode("ascii")).hexdigest()[:32]


def is_session_key(value: object) -> bool:
    """Whether check_session_key accepts `value`."""
    try:
        check_session_key(value)
    except SessionKeyError:
        return False
    return True
