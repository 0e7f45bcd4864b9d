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
`is_old_format` says so, and the app shows a warning. A key that looks like a *damaged* generated key (44-52
characters with a '-' or '_' at index 42-44: cut off, a character lost or doubled, its '-' typed as '_') and fails the
check is refused too: an old generated key was exactly 43 characters (`secrets.token_urlsafe(32)`), so none is in
that shape. Any key that is easy to guess is refused, whatever its format, and for a generated key's shape the 43
characters before the check are what is judged (anyone can compute check characters): fewer than 12 different
characters, a repeated block or a repeated piece of 7 characters, mostly runs like `abcd…`, two thirds of its steps
or a stretch of 16 steps predictable (the next or second-next letter in either case, its other case, the next key on
a keyboard row: `qwerty…`, `acegik…`, `aAbBcC…`), or 90% of it letters of one case and '-'/'_' (words: a pangram, a
passphrase). A random 43-character key trips any of these with a probability below 1e-9
(tests/test_webui_sessions_inputs.py samples 20,000 and computes the bounds).
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
DAMAGED_LENGTHS = range(BODY_CHARS + 1, BODY_CHARS + 1 + CHECK_CHARS + 3)  # 44-52: a generated key cut off or edited
DAMAGED_DASH_AT = range(BODY_CHARS - 1, BODY_CHARS + 2)  # its '-' moved by a lost or doubled character: 42-44
REPEAT_MIN = 7  # a piece this long seen twice (a random 43-character key: ~1e-10)
PREDICTABLE_SHARE = 2 / 3  # of a key's steps (a random key: ~22% each, two thirds ~1e-10)
PREDICTABLE_RUN = 16  # steps in a row (a random key: ~1e-9)
ONE_CASE_SHARE = 0.9  # letters of one case and '-'/'_' (a random key: 28 of 64 each, 90% ~1e-10)
_KEYBOARD_ROWS = ("1234567890", "qwertyuiop", "asdfghjkl", "zxcvbnm")
_KEYBOARD_NEXT = frozenset((row[i], row[i + 1]) for row in _KEYBOARD_ROWS for i in range(len(row) - 1))


class SessionKeyError(ValueError):
    """A session key was missing or not of the required shape (nothing was read or written)."""


def _check_chars(body: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(CHECK_TAG + body.encode("ascii")).digest()).decode("ascii")[:CHECK_CHARS]


def new_session_key() -> str:
    """A fresh, unguessable session key: 256 random bits (43 URL-safe base64 characters), '-', 6 check characters."""
    while True:
        body = secrets.token_urlsafe(KEY_BYTES)
        key = f"{body}-{_check_chars(body)}"
        if _guessable(body) is None:  # always, in practice: a generated key is never one the check refuses
            return key


def _shape(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise SessionKeyError("session key: missing (reload the page, or call new_session_key)")
    if not KEY_RE.fullmatch(value):
        raise SessionKeyError(
            f"session key: must be 32-64 characters of letters, digits, '-' or '_' (got {len(value)} characters)"
        )
    return value


def _predictable(a: str, b: str) -> bool:
    """Whether `b` is what a person typing by hand puts after `a`: the same or next or second-next letter or digit in
    either case (`aA`, `ab`, `aC`, `13`), or the key next to it on a keyboard row (`qw`, `po`)."""
    x, y = a.lower(), b.lower()
    return abs(ord(x) - ord(y)) <= 2 or (x, y) in _KEYBOARD_NEXT or (y, x) in _KEYBOARD_NEXT


def _guessable(key: str) -> str | None:
    """Why `key` is easy to guess, or None (the module docstring's rules)."""
    distinct = len(set(key))
    if distinct < MIN_DISTINCT:
        return f"it uses only {distinct} different characters"
    n = len(key)
    for period in range(1, n // 2 + 1):
        if n % period == 0 and key == key[:period] * (n // period):
            return "it repeats one block of characters"
    pieces = [key[i : i + REPEAT_MIN] for i in range(n - REPEAT_MIN + 1)]
    if len(set(pieces)) < len(pieces):
        return "it repeats a piece of it"
    steps = sum(1 for a, b in zip(key, key[1:], strict=False) if abs(ord(a) - ord(b)) <= 1)
    if steps * 2 > n - 1:
        return "it is mostly runs of neighbouring characters"
    flags = [_predictable(a, b) for a, b in zip(key, key[1:], strict=False)]
    run = longest = 0
    for f in flags:
        run = run + 1 if f else 0
        longest = max(longest, run)
    if sum(flags) >= PREDICTABLE_SHARE * len(flags) or longest >= PREDICTABLE_RUN:
        return "it follows the alphabet or the keyboard"
    if max(sum(c.islower() or c in "-_" for c in key), sum(c.isupper() or c in "-_" for c in key)) >= ONE_CASE_SHARE * n:
        return "it is words, not random characters"
    return None


def _damaged(key: str) -> bool:
    """Whether `key` looks like a generated key cut off or edited (the module docstring): no old key had this shape."""
    return len(key) in DAMAGED_LENGTHS and any(key[i] in "-_" for i in DAMAGED_DASH_AT)


def check_session_key(value: object) -> str:
    """`value` if it is a usable key; never echoes the value (it is a secret). SessionKeyError (one line) for a key of
    the wrong shape, a generated key's shape whose check characters do not match, or a key that is easy to guess."""
    key = _shape(value)
    checked = CHECKED_RE.fullmatch(key) is not None
    if checked and key[BODY_CHARS + 1 :] != _check_chars(key[:BODY_CHARS]):
        raise SessionKeyError(
            "session key: its last 6 characters (the check) do not match the rest: a typo or a cut-off paste; "
            "copy the whole key again"
        )
    if not checked and _damaged(key):
        raise SessionKeyError(
            "session key: it looks like a generated key with a character lost, doubled or changed (a generated key is "
            "43 characters, '-' and 6 check characters); copy the whole key again"
        )
    why = _guessable(key[:BODY_CHARS] if checked else key)
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
