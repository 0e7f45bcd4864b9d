"""Reviewer finding (webui.sessions guessability rule): keys made of words are refused only when 90% of them is one
case and '-'/'_'; written in CamelCase (a pangram, a passphrase, a sentence) or with an alternating pattern they are
accepted, though the module says a pangram or passphrase is refused."""

from __future__ import annotations

import pytest

from webui.sessions import is_session_key

GUESSABLE = [
    "TheQuickBrownFoxJumpsOverTheLazyDog1234567",  # a pangram, 42 characters
    "CorrectHorseBatteryStaple2024BlueSkyOceanRiver",  # the best-known passphrase
    "MyPasswordIsVerySecretAndLongEnough2024Xyz",
    "session_key_for_alice_2024_Bob_Carol_Dave_Eve",
    "ab12cd34ef56gh78ij90kl12mn34op56qr78st90uv",  # a typed pattern
    "MDEyMzQ1Njc4OWFiY2RlZmdoaWprbG1ub3BxcnN0dXY",  # base64 of '0123456789abcdefghijklmnopqrstuv'
]


@pytest.mark.parametrize("key", GUESSABLE)
def test_a_guessable_key_is_refused(key: str) -> None:
    assert not is_session_key(key)
