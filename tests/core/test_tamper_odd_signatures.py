"""A receipt whose signature is not an Ed25519 signature (issue 28 §7): parse_envelope refuses a `sig` that is not
64 bytes of base64 with one line naming the field, and "Tamper with it" never raises anything but its own clear
refusals (TamperError, MalformedReceipt) — the visitor reads why, never "the request failed on the server".

The odd signatures are generated: every decoded length from 0 to 130 except 64 (each one a refusal), non-base64,
unpadded and mixed-alphabet text, and non-strings, each tried with every tamper target; 64 bytes is the control that
must still be accepted (and tampered with)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from chat.engine import Engine
from chat.llm import LLM
from receipts.body import MalformedReceipt, parse_receipt
from receipts.dsse import ED25519_SIG_BYTES, MalformedEnvelope, parse_envelope
from webui.handlers import REQUEST_FAILED, UI
from webui.service import Service
from webui.sessions import new_session_key
from webui.tamper import TARGETS, TamperError, tamper

LENGTHS = [n for n in range(0, 131) if n != ED25519_SIG_BYTES]
TEXTS: dict[str, Any] = {
    "non-base64": "!!!!",
    "unpadded": "QQ",
    "mixed-alphabets": "+-8=",
    "whitespace": " " * 88,
    "null": None,
    "number": 7,
    "object": {},
}


@pytest.fixture(scope="module")
def receipt(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    eng = Engine(tmp_path_factory.mktemp("odd-sig") / "data", llm=LLM(api_key=""))
    eng.remember("s1", "my dev server port is 47113")
    eng.turn("s1", "what is my dev server port?")
    (path,) = sorted((eng.data_dir / "sessions" / "s1" / "receipts").glob("rcpt_*.json"))
    return path.read_bytes()


def with_sig(raw: bytes, sig: object) -> bytes:
    envelope = json.loads(raw)
    envelope["signatures"][0]["sig"] = sig
    return (json.dumps(envelope, indent=2, sort_keys=True) + "\n").encode("utf-8")


def odd_receipts(raw: bytes) -> dict[str, bytes]:
    out = {f"{n}-bytes": with_sig(raw, base64.b64encode(b"\x5a" * n).decode()) for n in LENGTHS}
    out.update({name: with_sig(raw, sig) for name, sig in TEXTS.items()})
    envelope = json.loads(raw)
    del envelope["signatures"][0]["sig"]
    out["no-sig"] = json.dumps(envelope).encode()
    for name, sigs in (("no-signatures", []), ("signatures-text", "x"), ("signature-text", ["x"])):
        envelope = json.loads(raw)
        envelope["signatures"] = sigs
        out[name] = json.dumps(envelope).encode()
    return out


@pytest.mark.parametrize("n", LENGTHS)
def test_parse_envelope_refuses_a_signature_that_is_not_64_bytes(receipt: bytes, n: int) -> None:
    envelope = json.loads(with_sig(receipt, base64.b64encode(b"\x01" * n).decode()))
    with pytest.raises(MalformedEnvelope) as info:
        parse_envelope(envelope)
    assert info.value.path == "$.signatures[0].sig"
    assert "64-byte Ed25519 signature" in info.value.expected and f"{n} bytes" in info.value.found
    assert "\n" not in str(info.value)


def test_parse_envelope_accepts_a_64_byte_signature_in_either_alphabet(receipt: bytes) -> None:
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        sig = encode(b"\xfb" * ED25519_SIG_BYTES).decode()
        env = parse_envelope(json.loads(with_sig(receipt, sig)))
        assert env.signatures[0].sig == b"\xfb" * ED25519_SIG_BYTES


def test_tamper_over_receipts_with_odd_signatures_never_raises_anything_but_a_clear_refusal(receipt: bytes) -> None:
    """Every odd signature × every target: a Tampered copy, or TamperError / MalformedReceipt with a one-line
    message; anything else (IndexError, KeyError, TypeError, binascii.Error…) is listed."""
    slipped = []
    for name, raw in odd_receipts(receipt).items():
        for target in TARGETS:
            try:
                tamper(raw, target)
            except (TamperError, MalformedReceipt) as exc:
                if not str(exc) or "\n" in str(exc):
                    slipped.append(f"{name}/{target}: unclear message {str(exc)!r}")
            except Exception as exc:  # noqa: BLE001 - what the property forbids
                slipped.append(f"{name}/{target}: {type(exc).__name__}: {exc}")
    assert slipped == []


def test_a_receipt_with_an_empty_signature_is_refused_as_malformed(receipt: bytes) -> None:
    with pytest.raises(MalformedReceipt, match=r"signatures\[0\]\.sig.*64-byte Ed25519 signature.*0 bytes"):
        parse_receipt(with_sig(receipt, ""))
    with pytest.raises(MalformedReceipt):
        tamper(with_sig(receipt, ""), "signature")


def test_a_64_byte_signature_is_still_tampered_with(receipt: bytes) -> None:
    t = tamper(receipt, "signature")
    assert t.target == "signature" and t.before != t.after


def test_the_tamper_tab_says_why_for_an_empty_signature_not_that_the_server_failed(
    receipt: bytes, tmp_path: Path
) -> None:
    ui = UI(Service(Engine(tmp_path / "data", llm=LLM(api_key=""))))
    key = new_session_key()
    for name, raw in {"empty": with_sig(receipt, ""), "1-byte": with_sig(receipt, "AA==")}.items():
        path = tmp_path / f"{name}.json"
        path.write_bytes(raw)
        for target in TARGETS:
            verdict, _table, copy = ui.tamper(str(path), target, key, progress=lambda *a, **k: None)
            assert REQUEST_FAILED not in verdict
            assert "64-byte Ed25519 signature" in verdict.replace("\\", ""), verdict  # Markdown escapes the "-"
            assert copy.value is None
