"""Session keys (webui/sessions.py), issue 28 review 6: no input raises anything but SessionKeyError; random keys of
the usual generators (new_session_key, secrets.token_urlsafe(24..48), secrets.token_hex(16..32), uuid4) are refused
with a computed probability below 1e-9 by the guessability rules, whose thresholds depend on the key's alphabet (a hex
key has 16 symbols, not 64); the damaged-generated-key rule refuses a random key only when it is recognisably one of
ours, with the probabilities computed below."""

from __future__ import annotations

import math
import random
import secrets
import string
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from chat.engine import Engine
from chat.llm import LLM
from webui import sessions
from webui.service import Service
from webui.sessions import SessionKeyError, _check_chars, check_session_key, is_session_key, new_session_key

ALPHABETS = {
    "urlsafe": sessions.B64,
    "hex": sessions.HEX_LOWER,
    "HEX": sessions.HEX_UPPER,
    "alnum": string.ascii_letters + string.digits,
    "printable": string.printable,
    "unicode": "aé€𝔸\u200b\x00 -_\n日本",
}


@pytest.mark.parametrize("name", sorted(ALPHABETS))
def test_any_string_of_length_0_to_80_is_accepted_or_refused_with_session_key_error(name: str) -> None:
    """Finding #4 (a 44-character key raised IndexError): every length 0-80, random strings of several alphabets, and
    strings in the damaged shapes ('-'/'_' at each of index 41-45): only SessionKeyError ever leaves the module."""
    rng = random.Random(f"review6-{name}")
    alphabet = ALPHABETS[name]
    for n in range(81):
        keys = ["".join(rng.choice(alphabet) for _ in range(n)) for _ in range(30)]
        for i in range(41, min(n, 46)):
            keys += [k[:i] + sep + k[i + 1 :] for k in keys[:5] for sep in "-_"]
        for key in keys:
            try:
                check_session_key(key)
            except SessionKeyError:
                pass
            assert isinstance(is_session_key(key), bool)
    for value in (None, 0, b"x" * 44, ["a"], "a" * 44, "-" * 44, "_" * 52):
        assert isinstance(is_session_key(value), bool)


def test_the_distinct_character_floor_of_a_hex_key_refuses_a_random_one_below_one_in_a_billion() -> None:
    """Finding #6a: the 'fewer than N different characters' floor is computed per alphabet and length. P(a key of n
    random symbols of m holds fewer than d different ones) is computed by dynamic programming over the characters (the
    module's) and here independently by inclusion-exclusion: P(D = j) = C(m, j) * sum_i (-1)^i C(j, i) ((j - i)/m)^n."""

    def exact(n: int, m: int, d: int) -> float:
        return sum(
            math.comb(m, j) * sum((-1) ** i * math.comb(j, i) * ((j - i) / m) ** n for i in range(j + 1))
            for j in range(1, d)
        )

    for alphabet in (sessions.HEX_LOWER, sessions.B64):
        for n in range(16, 65):
            floor = sessions.limits(alphabet, n).min_distinct
            assert exact(n, len(alphabet), floor) < 1e-9, (len(alphabet), n, floor)
            assert math.isclose(sessions.distinct_below(n, len(alphabet), floor), exact(n, len(alphabet), floor), rel_tol=1e-6, abs_tol=1e-15)
    assert sessions.limits(sessions.HEX_LOWER, 32).min_distinct >= 6  # 32 hex characters hold ~14 different ones
    assert sessions.limits(sessions.B64, 43).min_distinct == sessions.MIN_DISTINCT
    # uuid4().hex fixes 2 of its 32 characters: its 30 random ones alone already clear the floor.
    assert exact(30, 16, sessions.limits(sessions.HEX_LOWER, 32).min_distinct) < 1e-9


def _tail(n: int, k: int, q: float) -> float:
    return sum(math.comb(n, i) * q**i * (1 - q) ** (n - i) for i in range(max(k, 0), n + 1))


def test_the_chance_a_random_key_of_any_usual_generator_is_refused_as_guessable_is_below_one_in_a_billion() -> None:
    """Every rule's chance for a random key of its alphabet and length, summed (a union bound), for the lengths of
    token_urlsafe(24..48) (32-64 characters), token_hex(16..32) and uuid4 (32 hex; 30 random), and a new key's body:
    the distinct floor (above), a periodic key (sum over periods m^-(n-p)), a repeated piece (pairs of positions),
    neighbouring runs and predictable steps at strides 1-4 (binomial tails), a predictable stretch, one case (both
    cases), common words (webui.sessions.words_chance, a union bound over word occurrences), and decoding to printable
    text (each of the floor(6n/8) bytes printable with chance 95/256)."""
    for alphabet in (sessions.B64, sessions.HEX_LOWER, sessions.HEX_UPPER):
        m = len(alphabet)
        lengths = range(32, 65) if alphabet == sessions.B64 else range(30, 65)
        for n in lengths:
            lim = sessions.limits(alphabet, n)
            near = sessions.pair_share(alphabet, near=1)
            p = sessions.pair_share(alphabet)
            q = max(sum(c.islower() or c in "-_" for c in alphabet), sum(c.isupper() or c in "-_" for c in alphabet)) / m
            bounds = {
                "distinct": sessions.distinct_below(n, m, lim.min_distinct),
                "block": sum(float(m) ** -(n - period) for period in range(1, n // 2 + 1)),
                "repeat": math.comb(n - lim.repeat_min + 1, 2) / m**lim.repeat_min,
                "runs": _tail(n - 1, lim.runs, near),
                **{f"stride {s}": _tail(n - s, k, p) for s, k in lim.predictable.items()},
                "stretch": (n - 1) * p**lim.predictable_run,
                "one case": 2 * _tail(n, lim.one_case, q),
                "words": sessions.words_chance(alphabet, n, lim.words),
                "base64 text": (95 / 256) ** (6 * n // 8),
            }
            assert sum(bounds.values()) < 1e-9, (m, n, bounds)
    # The documented thresholds stand for a new key's body; they are only loosened where a bound needs it.
    body = sessions.limits(sessions.B64, sessions.BODY_CHARS)
    assert body.predictable_run == sessions.PREDICTABLE_RUN and body.words == sessions.WORD_LETTERS


def _generators() -> dict[str, Callable[[], str]]:
    gens: dict[str, Callable[[], str]] = {"new_session_key": new_session_key, "uuid4().hex": lambda: uuid.uuid4().hex}
    gens["str(uuid4())"] = lambda: str(uuid.uuid4())
    for nbytes in range(24, 49):
        gens[f"token_urlsafe({nbytes})"] = lambda nbytes=nbytes: secrets.token_urlsafe(nbytes)
    for nbytes in range(16, 33):
        gens[f"token_hex({nbytes})"] = lambda nbytes=nbytes: secrets.token_hex(nbytes)
    return gens


def _cut_off_generated_key(key: str) -> bool:
    """The damaged-key rule's one shape a random key falls into at a measurable rate: 44-47 characters that read as a
    generated key cut off 2-5 characters into its check (see the next test)."""
    body, tail = key[: sessions.BODY_CHARS], key[sessions.BODY_CHARS + 1 :]
    return (
        44 <= len(key) <= 47
        and key[sessions.BODY_CHARS] == "-"
        and body[-1] in sessions.BODY_END
        and sessions._check_chars(body).startswith(tail)
    )


def test_random_keys_of_the_usual_generators_are_accepted() -> None:
    """Samples 21,000 keys of new_session_key, token_urlsafe(24..48), token_hex(16..32) and uuid4 (500 each): none is
    guessable, and each is accepted unless it is, by chance, in the cut-off shape the next test bounds."""
    for name, gen in _generators().items():
        for _ in range(500):
            key = gen()
            assert sessions._guessable(key) is None, name
            if not _cut_off_generated_key(key):
                assert is_session_key(key), name


def test_the_chance_a_random_old_key_is_taken_for_a_damaged_generated_key() -> None:
    """Finding #6b. A key of 44-52 characters is refused as damaged only when recognisably a generated key: '-' at
    index 43 (1/64) after a body ending in one of the 16 characters a 256-bit body can end with (1/4), followed by a
    prefix of its check (64^-t for t characters), or the check with one character changed, lost or added (at most 6*63,
    6, 7*64 variants of 64^-6, 64^-5, 64^-7), or the full check of the body with one character changed or two swapped
    (43*63 + 42 bodies, each 64^-6); '_' at 43 and the body's check (64^-6); '-' at 42 and the check of the body with
    a character put back (43*64 bodies) or '-' at 44 and of the body with one taken out (44 bodies). Union bounds:
    below 1e-9 from 48 characters. Below that a generated key cut off 0-3 characters into its check carries 0-3 check
    characters, and a random key in that shape cannot be told from it: 1/256 at 44 characters (token_urlsafe(33) ends
    in '-' at 43), 6.1e-5 at 45 (no token_urlsafe length), 9.5e-7 at 46, 1.5e-8 at 47. The reviewer's damaged-key
    tests (test_a_damaged_generated_key_is_refused_not_opened_as_an_old_format_key, below) require refusing the key
    cut off right after its '-'."""
    sep, end, c = 1 / 64, 1 / 4, 64.0**-6

    def bound(n: int) -> float:
        t = n - 44
        b = 0.0
        if 0 <= t < 6:
            b += sep * end * 64.0**-t
        b += {5: sep * end * 6 * 64.0**-5, 6: sep * end * 6 * 63 * c, 7: sep * end * 7 * 64 * 64.0**-7}.get(t, 0.0)
        if t > 6:
            b += sep * end * c
        if n == 50:
            b += sep * (43 * 63 + 42) * c + sep * c
        if n == 49:
            b += sep * 43 * 64 * c
        if n == 51:
            b += sep * 44 * c
        return b

    assert all(bound(n) < 1e-9 for n in range(48, 53)), {n: bound(n) for n in range(44, 53)}
    assert [round(bound(n), 12) for n in (44, 45)] == [round(1 / 256, 12), round(1 / 256 / 64, 12)]
    assert bound(46) < 1e-6 and bound(47) < 2e-8
    rng = random.Random(286)
    for n in range(44, 53):
        for _ in range(2000):
            key = "".join(rng.choice(sessions.B64) for _ in range(n))
            if sessions._damage(key) is not None:
                assert _cut_off_generated_key(key), key


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review5_damaged_checked_key.py):
# Reviewer finding (issue 28 item 7, checked session keys): the check only applies to a key of exactly the generated
# shape (43 + '-' + 6). A generated key pasted cut off (its last character lost), with the check characters dropped
# after the '-', with a character of its body deleted or doubled, or with its '-' turned into '_', is no longer of that
# shape, so it is taken as an *old-format* key: it opens another, empty session with only a warning — the very
# "typo or truncated paste" the check was added to refuse (webui/sessions.py's docstring). Every mutation below is of
# a key generated now; none is 43 characters long (an old generated key's length).
# --------------------------------------------------------------------------------------------------------------------


KEY_DAMAGES = {
    "last-character-lost": lambda k: k[:-1],
    "check-characters-dropped": lambda k: k[:44],
    "body-character-deleted": lambda k: k[:10] + k[11:],
    "body-character-doubled": lambda k: k[:10] + k[10] + k[10:],
    "dash-as-underscore": lambda k: k[:43] + "_" + k[44:],
}


@pytest.mark.parametrize("mutation", sorted(KEY_DAMAGES))
def test_a_damaged_generated_key_is_refused_not_opened_as_an_old_format_key(mutation: str, tmp_path: Path) -> None:
    eng = Engine(tmp_path / "data", llm=LLM(api_key=""))
    svc = Service(eng)
    try:
        key = new_session_key()
        eng.remember(svc.session(key), "I adopted a grey cat named Miso")  # the person's real session
        damaged = KEY_DAMAGES[mutation](key)
        assert damaged != key and len(damaged) != 43
        with pytest.raises(SessionKeyError):
            svc.session(damaged)
    finally:
        eng.close()
        svc.downloads.close()


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review5_guessable_keys.py):
# Reviewer finding (issue 28 item 7, session keys): keys a person types by hand and an attacker would try early —
# a keyboard row, an alphabet in steps of two, an alternating-case alphabet, a pangram or passphrase — pass the
# guessability rule (12 different characters, no repeated block, not mostly ±1 runs), also in the checked format,
# whose check characters anyone can compute (the tag is public).
# --------------------------------------------------------------------------------------------------------------------


HAND_MADE_KEYS = [
    "qwertyuiopasdfghjklzxcvbnm1234567890",  # the keyboard, row by row
    "acegikmoqsuwyACEGIKMOQSUWY02468_",  # the alphabet in steps of two
    "aAbBcCdDeEfFgGhHiIjJkKlLmMnNoOpP",  # the alphabet, alternating case
    "thequickbrownfoxjumpsoverthelazydog",  # a pangram
    "correct-horse-battery-staple-correct-horse",  # a passphrase, repeated in part
]


@pytest.mark.parametrize("key", HAND_MADE_KEYS)
def test_a_hand_made_guessable_key_is_refused(key: str) -> None:
    with pytest.raises(SessionKeyError):
        check_session_key(key)


def test_a_keyboard_walk_with_computed_check_characters_is_refused() -> None:
    body = "qwertyuiopasdfghjklzxcvbnmQWERTYUIOPASDFGHJ"
    assert len(body) == 43
    with pytest.raises(SessionKeyError):
        check_session_key(f"{body}-{_check_chars(body)}")


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review6_guessable_keys_accepted.py):
# Reviewer finding (webui.sessions guessability rule): keys made of words are refused only when 90% of them is one
# case and '-'/'_'; written in CamelCase (a pangram, a passphrase, a sentence) or with an alternating pattern they are
# accepted, though the module says a pangram or passphrase is refused.
# --------------------------------------------------------------------------------------------------------------------


KEYS_OF_WORDS = [
    "TheQuickBrownFoxJumpsOverTheLazyDog1234567",  # a pangram, 42 characters
    "CorrectHorseBatteryStaple2024BlueSkyOceanRiver",  # the best-known passphrase
    "MyPasswordIsVerySecretAndLongEnough2024Xyz",
    "session_key_for_alice_2024_Bob_Carol_Dave_Eve",
    "ab12cd34ef56gh78ij90kl12mn34op56qr78st90uv",  # a typed pattern
    "MDEyMzQ1Njc4OWFiY2RlZmdoaWprbG1ub3BxcnN0dXY",  # base64 of '0123456789abcdefghijklmnopqrstuv'
]


@pytest.mark.parametrize("key", KEYS_OF_WORDS)
def test_a_guessable_key_is_refused(key: str) -> None:
    assert not is_session_key(key)


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review6_key_44_chars.py):
# Reviewer finding (webui.sessions._damaged): a 44-character key with no '-' or '_' at index 42 or 43 reads key[44]
# and raises IndexError ('string index out of range') out of check_session_key and is_session_key, instead of a
# SessionKeyError or acceptance: every entry point (UI, MCP, gradio_client) gets an unexpected exception for, e.g., any
# secrets.token_urlsafe(33) key or a 44-character passphrase.
# --------------------------------------------------------------------------------------------------------------------


KEYS_OF_44 = [
    "MyNameIsAliceAndThisIsMySessionKeyPleaseKeep",  # 44 characters
    "Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6",
    "q4KO2faCjjwR0T0s0IQgA5a4x1ePRH7DwpnDOap03GkZ",  # shaped like secrets.token_urlsafe(33)
]


@pytest.mark.parametrize("key", KEYS_OF_44)
def test_a_44_character_key_is_accepted_or_refused_never_an_index_error(key: str) -> None:
    assert len(key) == 44
    try:
        check_session_key(key)
    except SessionKeyError:
        pass
    is_session_key(key)  # must return a bool, not raise


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review6_random_keys_refused.py):
# Reviewer finding (webui.sessions): keys of 128+ random bits in the documented old format (32-64 letters, digits,
# '-', '_'), as an MCP client or a script picks them, are refused: secrets.token_hex(16) / uuid4().hex (32 hex
# characters) about 1.5% of the time for 'fewer than 12 different characters', and secrets.token_urlsafe(36) (48
# characters, 288 bits) about 9% of the time as a 'damaged generated key' (a '-' or '_' falls at index 42-44 by
# chance). The 'below 1e-9' bound holds only for 43-character base64 keys.
# --------------------------------------------------------------------------------------------------------------------


RANDOM_KEYS_OF_THE_OLD_FORMAT = [
    "bfcca6e656cf949795e064544066effe",  # secrets.token_hex(16)
    "e9aef0d8dce94cc8a9ddb9aa400d80f3",  # uuid4().hex
    "e2cdb6dd-d455-44f6-bf22-d2e3532d5b66",  # str(uuid4())
    "q4KO2faCjjwR0T_s0IQgA5a4-1ePRH7DwpnDOap03Gk_5H_N",  # secrets.token_urlsafe(36)
]


@pytest.mark.parametrize("key", RANDOM_KEYS_OF_THE_OLD_FORMAT)
def test_a_random_key_in_the_documented_format_is_accepted(key: str) -> None:
    assert is_session_key(key)


def test_random_keys_of_other_generators_are_refused_rarely() -> None:
    rng = random.Random(28)
    hexes = [f"{rng.getrandbits(128):032x}" for _ in range(1500)]
    uuids = [uuid.UUID(int=rng.getrandbits(128), version=4).hex for _ in range(1500)]
    b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    urlsafe48 = ["".join(rng.choice(b64) for _ in range(48)) for _ in range(500)]
    refused = [k for k in hexes + uuids + urlsafe48 if not is_session_key(k)]
    assert refused == []
