"""Session keys and the app's input rules (no server)."""

from __future__ import annotations

import math
import re

import pytest

from ledger.event import SESSION_ID_RE
from receipts.body import MAX_RECEIPT_BYTES
from webui.inputs import MAX_MESSAGE_CHARS, BadInput, check_query, message_or_error, parse_k, read_upload
from webui.sessions import SessionKeyError, check_session_key, is_session_key, new_session_key, session_id


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
