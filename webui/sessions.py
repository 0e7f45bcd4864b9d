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
characters (URL-safe base64 of sha256(b"mre:v1:session-key-check\x00" + the 43)). A key of the old format (any 32-64
characters of letters, digits, '-' and '_', as generated before or picked by a client: token_urlsafe, token_hex, a
uuid) still opens its session; `is_old_format` says so, and the app shows a warning. A key that is recognisably a
generated key with one thing wrong is refused, as it would open another, empty session: the characters after its '-'
(index 43) are a prefix of its body's check (cut off), the check with something pasted after it or one character
changed, lost or added, or the full check of its body with one character changed or two swapped; or its '-' typed as
'_'; or a '-' at index 42 (44) and the check of its body with a character put back (taken out). Only a body ending in
one of the 16 characters a 256-bit body can end with counts. A random old key of 48-52 characters is in one of these
shapes with a chance below 1e-9; one of 44-47 characters can only be told from a generated key cut off 0-3 characters
into its check by chance: 1/256 at 44 (a '-' at index 43), 6e-5 at 45, 1e-6 at 46, 2e-8 at 47.

Any key that is easy to guess is refused, whatever its format, and for a generated key the 43 characters before the
check are what is judged (anyone can compute check characters): too few different characters, a repeated block or a
repeated piece of 7 characters, mostly runs like `abcd…`, two thirds of its steps (or of its steps to the 2nd, 3rd or
4th next character: `ab12cd34…`) or a stretch of 16 steps predictable (the next or second-next letter in either case,
its other case, the next key on a keyboard row: `qwerty…`, `acegik…`, `aAbBcC…`), 90% of it letters of one case and
'-'/'_', 16 of its letters common words in any case (a pangram, a passphrase, `CorrectHorseBattery…`), or base64 of
printable text that is easy to guess. A hex key (a uuid's '-' set aside) is judged as 16 symbols, any other as 64, and
each threshold is loosened where a random key of that alphabet and length would trip it with a chance of 5e-11 or more
(32 hex characters hold ~14 different ones: the floor is 6, not 12). A random key of new_session_key,
token_urlsafe(24..48), token_hex(16..32) or uuid4 trips any of them with a probability below 1e-9
(tests/faces/test_webui_session_keys_bounds.py computes the bounds; tests/faces/test_webui_sessions_inputs.py samples 20,000).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import math
import re
import secrets
import string
from typing import NamedTuple

KEY_RE = re.compile(r"[A-Za-z0-9_-]{32,64}")
KEY_TAG = b"mre:v1:session-key\x00"
KEY_BYTES = 32  # secrets.token_urlsafe(32): 43 characters, 256 bits
CHECK_TAG = b"mre:v1:session-key-check\x00"
CHECK_CHARS = 6
BODY_CHARS = 43
CHECKED_RE = re.compile(r"[A-Za-z0-9_-]{43}-[A-Za-z0-9_-]{6}")  # a generated key: 43 + '-' + 6 = 50 characters
B64 = string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_"  # in base64 order
HEX_LOWER = "0123456789abcdef"
HEX_UPPER = "0123456789ABCDEF"
# A generated body is 32 bytes = 256 bits in 43 characters: its last character carries 4 bits, so it is one of these 16.
BODY_END = frozenset(B64[i] for i in range(0, 64, 4))
DAMAGED_LENGTHS = range(BODY_CHARS + 1, BODY_CHARS + 1 + CHECK_CHARS + 3)  # 44-52: a generated key cut off or edited
MIN_DISTINCT = 12  # 32 random characters of 64 hold ~25 different ones; fewer than 12 is a hand-made key
REPEAT_MIN = 7  # a piece this long seen twice (a random 43-character key: ~1e-10)
PREDICTABLE_SHARE = 2 / 3  # of a steps (a random key: ~22% each, two thirds ~1e-10)
PREDICTABLE_RUN = 16  # steps in a row (a random key: ~1e-9)
PREDICTABLE_STRIDES = (1, 2, 3, 4)  # a typed pattern: `ab12cd34…` steps predictably every 4th character
ONE_CASE_SHARE = 0.9  # letters of one case and '-'/'_' (a random key: 28 of 64 each, 90% ~1e-10)
WORD_LETTERS = 16  # letters of a key covered by common words (4+ letters) that make it a passphrase
RULE_BUDGET = 5e-11  # each rule's chance of refusing a random key of its alphabet and length (about 15 rules: < 1e-9)
_KEYBOARD_ROWS = ("1234567890", "qwertyuiop", "asdfghjkl", "zxcvbnm")
_KEYBOARD_NEXT = frozenset((row[i], row[i + 1]) for row in _KEYBOARD_ROWS for i in range(len(row) - 1))
# Common words of 4+ letters a person builds a passphrase or a sentence of (the test bounds their chance in random keys).
WORDS = frozenset(
    """
    about above after again alice also apple away back battery bear bird black blue body book brown cake
    call came carol chair charlie city cloud code coffee cold come correct could dark dave days door down
    dragon each earth east enough even ever face fast find fire fish five flower food forest four free from
    frog full gold good great green hand happy have hello help here high home horse house hunter into jump jumps
    just keep kind king know lake land last lazy letmein life light like line lion little live long look love
    made make many master mind monkey moon more most mother much must name never night nine north ocean only open
    other over pass passphrase password people place please purple queen quick rain river rock room said same
    secret secure session seven shadow some song south stable staple star stone summer sunshine take tell than
    that their them then there these they thing think this three tiger time tree trustno1 turtle under very
    wall want water well west what when where which white will wind winter with word words work world would
    year yellow your zero
    """.split()
)
_WORDS4 = frozenset(w for w in WORDS if len(w) >= 4)
_LONGEST_WORD = max(len(w) for w in _WORDS4)


class _Limits(NamedTuple):
    """A rule's threshold for keys of one alphabet and length: the documented one, or looser where a random key of that
    alphabet and length would trip it with a probability above RULE_BUDGET (a hex key has 16 symbols, not 64)."""

    min_distinct: int
    repeat_min: int
    runs: int
    predictable: dict[int, int]
    predictable_run: int
    one_case: int
    words: int


def _tail(n: int, k: int, q: float) -> float:
    """P(Binomial(n, q) >= k)."""
    return sum(math.comb(n, i) * q**i * (1 - q) ** (n - i) for i in range(max(k, 0), n + 1))


def _smallest_k(n: int, q: float, at_least: int) -> int:
    k = at_least
    while k <= n and _tail(n, k, q) >= RULE_BUDGET:
        k += 1
    return k


def distinct_below(n: int, m: int, d: int) -> float:
    """P(a random key of n symbols of m holds fewer than d different ones)."""
    dist = [1.0] + [0.0] * n
    for _ in range(n):
        nxt = [0.0] * (n + 1)
        for j, pr in enumerate(dist):
            if pr:
                nxt[j] += pr * j / m
                if j < n:
                    nxt[j + 1] += pr * (m - j) / m
        dist = nxt
    return sum(dist[:d])


def pair_share(alphabet: str, near: int | None = None) -> float:
    """The share of ordered pairs of the alphabet that are `_predictable` (or, given `near`, that close in code point)."""
    if near is None:
        hits = sum(_predictable(a, b) for a in alphabet for b in alphabet)
    else:
        hits = sum(abs(ord(a) - ord(b)) <= near for a in alphabet for b in alphabet)
    return hits / len(alphabet) ** 2


@functools.lru_cache(maxsize=512)
def limits(alphabet: str, n: int) -> _Limits:
    """The thresholds for a key of `n` characters drawn from `alphabet` (see _Limits)."""
    m = len(alphabet)
    min_distinct = MIN_DISTINCT
    while min_distinct > 1 and distinct_below(n, m, min_distinct) >= RULE_BUDGET:
        min_distinct -= 1
    repeat_min = REPEAT_MIN
    while math.comb(max(n - repeat_min + 1, 0), 2) / m**repeat_min >= RULE_BUDGET:
        repeat_min += 1
    runs = _smallest_k(n - 1, pair_share(alphabet, near=1), (n - 1) // 2 + 1)
    p = pair_share(alphabet)
    predictable = {s: _smallest_k(n - s, p, math.ceil(PREDICTABLE_SHARE * (n - s))) for s in PREDICTABLE_STRIDES}
    predictable_run = PREDICTABLE_RUN
    while (n - 1) * p**predictable_run >= RULE_BUDGET:
        predictable_run += 1
    q = max(sum(c.islower() or c in "-_" for c in alphabet), sum(c.isupper() or c in "-_" for c in alphabet)) / m
    one_case = math.ceil(ONE_CASE_SHARE * n)
    while one_case <= n and 2 * _tail(n, one_case, q) >= RULE_BUDGET:
        one_case += 1
    words = WORD_LETTERS
    while words_chance(alphabet, n, words) >= RULE_BUDGET:
        words += 1
    return _Limits(min_distinct, repeat_min, runs, predictable, predictable_run, one_case, words)


def words_chance(alphabet: str, n: int, letters: int) -> float:
    """A bound on P(common words cover `letters` letters of a random key of `n` characters of `alphabet`): a union bound
    over the collections of non-overlapping word occurrences covering letters..letters+longest word-1 (any covering
    holds such a collection), each occurrence of a word w at a position having chance prod(P(character matches))."""
    m = len(alphabet)
    top = letters + _LONGEST_WORD - 1
    g = [0.0] * (top + 1)  # g[L]: the expected number of occurrences of words of L letters
    for w in _WORDS4:
        g[len(w)] += max(n - len(w) + 1, 0) * math.prod(sum(a.lower() == c for a in alphabet) / m for c in w)
    total, power = 0.0, [1.0] + [0.0] * top
    for k in range(1, top // 4 + 1):
        nxt = [0.0] * (top + 1)
        for i, a in enumerate(power):
            for j, b in enumerate(g):
                if a and b and i + j <= top:
                    nxt[i + j] += a * b
        power = nxt
        total += sum(power[letters:]) / math.factorial(k)
    return total


def alphabet_of(key: str) -> tuple[str, str]:
    """(the alphabet `key` was drawn from, the characters to judge): hex (a uuid's '-' set aside), else URL-safe base64."""
    bare = key.replace("-", "")
    for hexes in (HEX_LOWER, HEX_UPPER):
        if bare and set(bare) <= set(hexes):
            return hexes, bare
    return B64, key


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


def word_letters(key: str) -> int:
    """The most letters of `key` that non-overlapping common words (WORDS, 4+ letters, any case) cover."""
    low = key.lower()
    n = len(low)
    best = [0] * (n + 1)  # best[i]: the most covered in low[i:]
    for i in range(n - 1, -1, -1):
        best[i] = best[i + 1]
        for j in range(i + 4, min(n, i + _LONGEST_WORD) + 1):
            if low[i:j] in _WORDS4:
                best[i] = max(best[i], j - i + best[j])
    return best[0]


def _judge(key: str) -> str | None:
    alphabet, key = alphabet_of(key)
    n = len(key)
    lim = limits(alphabet, n)
    distinct = len(set(key))
    if distinct < lim.min_distinct:
        return f"it uses only {distinct} different characters"
    for period in range(1, n // 2 + 1):
        if n % period == 0 and key == key[:period] * (n // period):
            return "it repeats one block of characters"
    pieces = [key[i : i + lim.repeat_min] for i in range(n - lim.repeat_min + 1)]
    if len(set(pieces)) < len(pieces):
        return "it repeats a piece of it"
    steps = sum(1 for a, b in zip(key, key[1:], strict=False) if abs(ord(a) - ord(b)) <= 1)
    if steps >= lim.runs:
        return "it is mostly runs of neighbouring characters"
    for stride, need in lim.predictable.items():
        if sum(_predictable(a, b) for a, b in zip(key, key[stride:], strict=False)) >= need:
            return "it follows the alphabet or the keyboard"
    run = longest = 0
    for a, b in zip(key, key[1:], strict=False):
        run = run + 1 if _predictable(a, b) else 0
        longest = max(longest, run)
    if longest >= lim.predictable_run:
        return "it follows the alphabet or the keyboard"
    if max(sum(c.islower() or c in "-_" for c in key), sum(c.isupper() or c in "-_" for c in key)) >= lim.one_case:
        return "it is words, not random characters"
    if word_letters(key) >= lim.words:
        return "it is words, not random characters"
    return None


def decoded_text(key: str) -> str | None:
    """`key` read as base64 (either alphabet), when that gives printable ASCII text: a key made by encoding a sentence
    or a sequence. A random key decodes to printable text with a chance of (95/256)^(bytes), below 5e-11 from 24 bytes."""
    raw = key.replace("-", "+").replace("_", "/")
    raw += "=" * (-len(raw) % 4)
    try:
        data = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(data) < 16 or not all(32 <= b < 127 for b in data):
        return None
    return data.decode("ascii")


def _guessable(key: str) -> str | None:
    """Why `key` is easy to guess, or None (the module docstring's rules)."""
    why = _judge(key)
    if why is None:
        text = decoded_text(key)
        if text is not None and _judge(text) is not None:
            return "it is base64 of easily guessed text"
    return why


def _one_edit(a: str, b: str) -> bool:
    """Whether `a` is `b` with exactly one character changed, deleted or inserted."""
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b, strict=True)) == 1
    if abs(len(a) - len(b)) != 1:
        return False
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return any(long_[:i] + long_[i + 1 :] == short for i in range(len(long_)))


def _damage(key: str) -> str | None:
    """'check' or 'damaged' when `key` is recognisably a generated key with one thing wrong, else None. Recognisably:
    the characters after its '-' are (a prefix of, or one edit from) the check of its body, or the full check of its
    body with one character repaired (changed, swapped with the next, deleted or doubled), or its '-' typed as '_'.
    A random key of 44-52 characters is taken for one with the probabilities tests/faces/test_webui_sessions_inputs.py
    computes (below 1e-9 from 48 characters; a generated key cut right after its '-' keeps no check at all)."""
    n = len(key)
    if n not in DAMAGED_LENGTHS:
        return None
    if key[BODY_CHARS] == "-":
        body, tail = key[:BODY_CHARS], key[BODY_CHARS + 1 :]
        if body[-1] in BODY_END:
            check = _check_chars(body)
            if len(tail) < CHECK_CHARS and check.startswith(tail):
                return "damaged"  # cut off
            if len(tail) > CHECK_CHARS and tail.startswith(check):
                return "damaged"  # something pasted after it
            if _one_edit(tail, check):
                return "check" if len(tail) == CHECK_CHARS else "damaged"
        if len(tail) == CHECK_CHARS:  # a character of the body changed, or two swapped
            for i in range(BODY_CHARS):
                for c in B64:
                    if c != body[i] and _repaired(body[:i] + c + body[i + 1 :], tail):
                        return "check"
                if i + 1 < BODY_CHARS and body[i] != body[i + 1]:
                    if _repaired(body[:i] + body[i + 1] + body[i] + body[i + 2 :], tail):
                        return "check"
    if key[BODY_CHARS] == "_" and _repaired(key[:BODY_CHARS], key[BODY_CHARS + 1 :]):
        return "damaged"  # its '-' typed as '_'
    if n == BODY_CHARS + CHECK_CHARS and key[BODY_CHARS - 1] == "-":  # a character of the body lost
        short, tail = key[: BODY_CHARS - 1], key[BODY_CHARS:]
        for i in range(BODY_CHARS):
            if any(_repaired(short[:i] + c + short[i:], tail) for c in B64):
                return "damaged"
    if n == BODY_CHARS + CHECK_CHARS + 2 and key[BODY_CHARS + 1] == "-":  # a character doubled or slipped in
        long_, tail = key[: BODY_CHARS + 1], key[BODY_CHARS + 2 :]
        if any(_repaired(long_[:i] + long_[i + 1 :], tail) for i in range(BODY_CHARS + 1)):
            return "damaged"
    return None


def _repaired(body: str, tail: str) -> bool:
    return body[-1] in BODY_END and _check_chars(body) == tail


def check_session_key(value: object) -> str:
    """`value` if it is a usable key; never echoes the value (it is a secret). SessionKeyError (one line) for a key of
    the wrong shape, a generated key's shape whose check characters do not match, or a key that is easy to guess."""
    return _usable(_shape(value))


@functools.lru_cache(maxsize=4096)
def _usable(key: str) -> str:
    """check_session_key's judgement of a well-shaped key, kept for the keys it accepted (a refusal raises, and is
    not kept): a chat request asks it three times (the consent setting, the turn's check, the turn), ~0.3 ms each."""
    checked = _is_checked(key)
    damage = None if checked else _damage(key)
    if damage == "check":
        raise SessionKeyError(
            "session key: its last 6 characters (the check) do not match the rest: a typo or a cut-off paste; "
            "copy the whole key again"
        )
    if damage is not None:
        raise SessionKeyError(
            "session key: it looks like a generated key with a character lost, doubled or changed (a generated key is "
            "43 characters, '-' and 6 check characters); copy the whole key again"
        )
    why = _guessable(key[:BODY_CHARS] if checked else key)
    if why is not None:
        raise SessionKeyError(f"session key: too easy to guess ({why}); start a new session for a generated key")
    return key


def _is_checked(key: str) -> bool:
    return CHECKED_RE.fullmatch(key) is not None and key[BODY_CHARS + 1 :] == _check_chars(key[:BODY_CHARS])


def is_old_format(key: str) -> bool:
    """A usable key without check characters (generated before they were added, or made by hand): it still opens
    its session, but a typo in it opens another one silently, so the app warns."""
    return not _is_checked(key)


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
