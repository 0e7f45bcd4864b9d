"""Reviewer finding (issue 28 item 7, session keys): keys a person types by hand and an attacker would try early —
a keyboard row, an alphabet in steps of two, an alternating-case alphabet, a pangram or passphrase — pass the
guessability rule (12 different characters, no repeated block, not mostly ±1 runs), also in the checked format,
whose check characters anyone can compute (the tag is public)."""

from __future__ import annotations

import pytest

from webui.sessions import SessionKeyError, _check_chars, check_session_key

GUESSABLE = [
    "qwertyuiopasdfghjklzxcvbnm1234567890",  # the keyboard, row by row
    "acegikmoqsuwyACEGIKMOQSUWY02468_",  # the alphabet in steps of two
    "aAbBcCdDeEfFgGhHiIjJkKlLmMnNoOpP",  # the alphabet, alternating case
    "thequickbrownfoxjumpsoverthelazydog",  # a pangram
    "correct-horse-battery-staple-correct-horse",  # a passphrase, repeated in part
]


@pytest.mark.parametrize("key", GUESSABLE)
def test_a_hand_made_guessable_key_is_refused(key: str) -> None:
    with pytest.raises(SessionKeyError):
        check_session_key(key)


def test_a_keyboard_walk_with_computed_check_characters_is_refused() -> None:
    body = "qwertyuiopasdfghjklzxcvbnmQWERTYUIOPASDFGHJ"
    assert len(body) == 43
    with pytest.raises(SessionKeyError):
        check_session_key(f"{body}-{_check_chars(body)}")
