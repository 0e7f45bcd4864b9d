"""Session keys and the app's input rules (no server)."""

from __future__ import annotations

import base64
import hashlib
import math
import re

import pytest

from ledger.event import SESSION_ID_RE
from receipts.body import MAX_RECEIPT_BYTES
from webui import sessions
from webui.inputs import MAX_MESSAGE_CHARS, BadInput, check_query, message_or_error, parse_k, read_upload
from webui.sessions import (
    SessionKeyError,
    _check_chars,
    check_session_key,
    is_old_format,
    is_session_key,
    new_session_key,
    session_id,
)


class TestSessionKeys:
    def test_new_keys_carry_at_least_128_random_bits_and_differ(self) -> None:
        keys = {new_session_key() for _ in range(200)}
        assert len(keys) == 200
        for k in keys:
            assert re.fullmatch(r"[A-Za-z0-9_-]{32,64}", k)
            assert len(k) * 6 >= 128  # URL-safe base64: 6 bits per character

    def test_the_session_id_is_derived_and_never_the_key(self) -> None:
        key = new_session_key()
        sid = session_id(key)
        assert sid != key and key not in sid
        assert SESSION_ID_RE.fullmatch(sid)
        assert session_id(key) == sid  # deterministic: a reload resumes the same ledger

    def test_the_derivation_is_pinned(self) -> None:
        # Changing it would orphan every stored session: a format change, not an edit.
        # hex(sha256(b"mre:v1:session-key\x00" + b"a" * 32))[:32]
        assert session_id("a" * 32) == "cf35e58ec3736e96ea69cb44cbe81e1d"

    @pytest.mark.parametrize(
        "bad", [None, "", "short", "x" * 31, "x" * 65, "a" * 31 + "!", "é" * 40, 12345, ["a" * 40]]
    )
    def test_unusable_keys_are_refused(self, bad: object) -> None:
        assert not is_session_key(bad)
        with pytest.raises(SessionKeyError):
            check_session_key(bad)

    def test_a_refusal_never_echoes_the_key(self) -> None:
        secret = "s3cr3t-" * 5 + "!"
        with pytest.raises(SessionKeyError) as info:
            check_session_key(secret)
        assert secret not in str(info.value)


class TestK:
    @pytest.mark.parametrize(("value", "expected"), [(1, 1), (8, 8), (20, 20), (8.0, 8), (1.0, 1)])
    def test_whole_numbers_in_range_are_accepted(self, value: object, expected: int) -> None:
        assert parse_k(value) == expected

    @pytest.mark.parametrize("bad", [0, -1, 21, 50, 8.5, math.nan, math.inf, True, "8", None, [8]])
    def test_anything_else_is_refused(self, bad: object) -> None:
        with pytest.raises(BadInput, match="K"):
            parse_k(bad)


class TestMessagesAndQueries:
    @pytest.mark.parametrize("bad", ["", "   \n\t", None, 42])
    def test_empty_or_non_text_messages_are_refused(self, bad: object) -> None:
        with pytest.raises(BadInput, match="message"):
            message_or_error(bad)

    def test_a_message_over_the_limit_is_refused_naming_the_limit(self) -> None:
        assert message_or_error("x" * MAX_MESSAGE_CHARS) == "x" * MAX_MESSAGE_CHARS
        with pytest.raises(BadInput, match=str(MAX_MESSAGE_CHARS)):
            message_or_error("x" * (MAX_MESSAGE_CHARS + 1))

    @pytest.mark.parametrize("bad", ["", "  ", None, "q" * 1001])
    def test_unusable_queries_are_refused(self, bad: object) -> None:
        with pytest.raises(BadInput, match="search"):
            check_query(bad)


class TestUploads:
    def test_no_file_is_a_clear_refusal(self) -> None:
        with pytest.raises(BadInput, match="choose a receipt"):
            read_upload(None)

    def test_an_empty_file_is_refused(self, tmp_path) -> None:
        p = tmp_path / "empty.json"
        p.write_bytes(b"")
        with pytest.raises(BadInput, match="empty"):
            read_upload(str(p))

    def test_an_oversized_file_is_refused_unread(self, tmp_path) -> None:
        p = tmp_path / "big.json"
        with open(p, "wb") as f:
            f.truncate(MAX_RECEIPT_BYTES + 1)  # sparse: nothing to read
        with pytest.raises(BadInput, match="over the"):
            read_upload(str(p))

    def test_a_vanished_file_is_refused(self, tmp_path) -> None:
        with pytest.raises(BadInput, match="no longer available"):
            read_upload(str(tmp_path / "gone.json"))


class TestCheckedKeys:
    """Issue 28 item 7: generated keys carry check characters; a pasted key failing them, or a guessable one, is refused;
    an old-format key (32-64 characters, no check) still opens its session, with a warning."""

    def test_new_keys_are_43_random_characters_and_a_checksum_that_the_check_accepts(self) -> None:
        for _ in range(200):
            key = new_session_key()
            assert re.fullmatch(r"[A-Za-z0-9_-]{43}-[A-Za-z0-9_-]{6}", key), key
            assert check_session_key(key) == key and is_session_key(key)
            assert not is_old_format(key)
            assert SESSION_ID_RE.fullmatch(session_id(key))  # the id a path is made of: as before

    def test_a_new_format_key_that_fails_its_check_is_refused_in_one_line(self) -> None:
        key = new_session_key()
        swaps = {"A": "B", "B": "A"}
        for i in (0, 20, 42, 44, 49):  # the random part and the check characters
            c = key[i]
            typo = key[:i] + swaps.get(c, "A") + key[i + 1 :]
            assert typo != key
            assert not is_session_key(typo)
            with pytest.raises(SessionKeyError) as info:
                check_session_key(typo)
            msg = str(info.value)
            assert "\n" not in msg and "check" in msg and typo not in msg

    def test_an_old_format_key_is_still_usable_but_marked_old(self) -> None:
        import secrets

        for key in (secrets.token_urlsafe(32), secrets.token_urlsafe(24), "my-own-Session-key-from-2025-q3Xz7"):
            assert check_session_key(key) == key and is_session_key(key)
            assert is_old_format(key)

    @pytest.mark.parametrize(
        "weak",
        [
            "A" * 43,
            "A" * 64,
            "ab" * 20,
            "0123456789" * 4,
            "abcdefghijklmnopqrstuvwxyz012345",
            "abcdefghijklmnop" * 2,
            "a" * 43 + "-" + base64.urlsafe_b64encode(hashlib.sha256(b"mre:v1:session-key-check\x00" + b"a" * 43).digest()).decode()[:6],
        ],
    )
    def test_a_guessable_key_is_refused(self, weak: str) -> None:
        assert re.fullmatch(r"[A-Za-z0-9_-]{32,64}", weak)  # the old shape rule alone let it open a session
        assert not is_session_key(weak)
        with pytest.raises(SessionKeyError) as info:
            check_session_key(weak)
        assert "guess" in str(info.value) and weak not in str(info.value)

    def test_random_keys_pass_every_guessability_rule(self) -> None:
        """Samples 20,000 fresh `secrets.token_urlsafe(32)` strings (what the old generator made, and a new key's
        random part): each opens as an old-format key and, with its check characters, as a new-format one. The
        sample shows no rule refuses random keys at a measurable rate; the next test bounds the rate itself."""
        import secrets

        for _ in range(20_000):
            body = secrets.token_urlsafe(32)
            assert len(body) == 43
            assert check_session_key(body) == body and is_old_format(body)
            key = f"{body}-{_check_chars(body)}"
            assert check_session_key(key) == key and not is_old_format(key)

    def test_the_chance_a_random_key_is_refused_as_guessable_is_below_one_in_a_billion(self) -> None:
        """The docstring's bounds, computed from the rules' own constants over the 64 URL-safe characters: the share of
        predictable steps (binomial tail over a 43-character key's 42 steps), a stretch of predictable steps (union
        bound), letters of one case (binomial tail, both cases), a repeated 7-character piece (union bound)."""
        import string

        alphabet = string.ascii_letters + string.digits + "-_"
        p = sum(sessions._predictable(a, b) for a in alphabet for b in alphabet) / len(alphabet) ** 2

        def tail(n: int, k: int, q: float) -> float:
            return sum(math.comb(n, i) * q**i * (1 - q) ** (n - i) for i in range(k, n + 1))

        steps = sessions.BODY_CHARS - 1
        bounds = {
            "share": tail(steps, math.ceil(sessions.PREDICTABLE_SHARE * steps), p),
            "run": steps * p**sessions.PREDICTABLE_RUN,
            "one case": 2 * tail(sessions.BODY_CHARS, math.ceil(sessions.ONE_CASE_SHARE * sessions.BODY_CHARS), 28 / 64),
            "repeat": math.comb(sessions.BODY_CHARS - sessions.REPEAT_MIN + 1, 2) / 64**sessions.REPEAT_MIN,
        }
        assert all(b < 1e-9 for b in bounds.values()), bounds

    def test_an_old_generated_key_is_never_in_the_damaged_shape(self) -> None:
        """The damaged-key rule refuses only 44-52 characters: an old generated key was 43 (token_urlsafe(32)), so
        one with '-' or '_' at index 42 (or anywhere) still opens."""
        import secrets

        body = secrets.token_urlsafe(32)
        for old in (body[:42] + "-", body[:42] + "_", body[:43]):
            if sessions._guessable(old) is None:
                assert check_session_key(old) == old and is_old_format(old)
        key = new_session_key()
        for damaged in (key[:-1], key[:44], key[:43] + "_" + key[44:], key[:10] + key[11:], key + "A", key + "AB"):
            with pytest.raises(SessionKeyError, match="lost, doubled or changed"):
                check_session_key(damaged)
