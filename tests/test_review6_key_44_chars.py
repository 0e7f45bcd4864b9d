"""Reviewer finding (webui.sessions._damaged): a 44-character key with no '-' or '_' at index 42 or 43 reads key[44]
and raises IndexError ('string index out of range') out of check_session_key and is_session_key, instead of a
SessionKeyError or acceptance: every entry point (UI, MCP, gradio_client) gets an unexpected exception for, e.g., any
secrets.token_urlsafe(33) key or a 44-character passphrase."""

from __future__ import annotations

import pytest

from webui.sessions import SessionKeyError, check_session_key, is_session_key

KEYS = [
    "MyNameIsAliceAndThisIsMySessionKeyPleaseKeep",  # 44 characters
    "Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6",
    "q4KO2faCjjwR0T0s0IQgA5a4x1ePRH7DwpnDOap03GkZ",  # shaped like secrets.token_urlsafe(33)
]


@pytest.mark.parametrize("key", KEYS)
def test_a_44_character_key_is_accepted_or_refused_never_an_index_error(key: str) -> None:
    assert len(key) == 44
    try:
        check_session_key(key)
    except SessionKeyError:
        pass
    is_session_key(key)  # must return a bool, not raise
