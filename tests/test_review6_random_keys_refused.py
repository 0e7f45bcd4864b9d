"""Reviewer finding (webui.sessions): keys of 128+ random bits in the documented old format (32-64 letters, digits,
'-', '_'), as an MCP client or a script picks them, are refused: secrets.token_hex(16) / uuid4().hex (32 hex
characters) about 1.5% of the time for 'fewer than 12 different characters', and secrets.token_urlsafe(36) (48
characters, 288 bits) about 9% of the time as a 'damaged generated key' (a '-' or '_' falls at index 42-44 by
chance). The 'below 1e-9' bound holds only for 43-character base64 keys."""

from __future__ import annotations

import random
import uuid

import pytest

from webui.sessions import is_session_key

EXAMPLES = [
    "bfcca6e656cf949795e064544066effe",  # secrets.token_hex(16)
    "e9aef0d8dce94cc8a9ddb9aa400d80f3",  # uuid4().hex
    "e2cdb6dd-d455-44f6-bf22-d2e3532d5b66",  # str(uuid4())
    "q4KO2faCjjwR0T_s0IQgA5a4-1ePRH7DwpnDOap03Gk_5H_N",  # secrets.token_urlsafe(36)
]


@pytest.mark.parametrize("key", EXAMPLES)
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
