"""DSSE v1 envelopes (secure-systems-lab/dsse, protocol.md and envelope.md): pure sign, parse, verify.

What is signed is never the JSON but the pre-authentication encoding::

    PAE(type, body) = b"DSSEv1 " + len(type) + b" " + type + b" " + len(body) + b" " + body

with ``type`` UTF-8 encoded and both lengths the ASCII decimal of byte counts.

Parsing (:func:`parse_envelope`) and verification (:func:`verify_envelope`) are
separate steps with separate outcomes: structurally wrong input raises
:class:`MalformedEnvelope` and nothing else; a well-formed envelope that does
not check out yields :class:`SignatureCheck` rows that fail, never an
exception. Choices within the spec, all fail-closed:

* ``payload`` and ``sig`` may be standard or URL-safe base64 (the spec allows
  both) but must be padded and canonical (re-encoding gives the same text);
  one encoding per value. :func:`sign_envelope` emits standard base64.
* ``keyid`` is optional (unset means empty), as the spec says. It only picks
  which trusted keys to try: a keyid naming no trusted key is reported as an
  unknown key, an empty keyid tries every trusted key. Trust always comes from
  the signature verifying under a trusted key, whose id is recomputed from its
  bytes (receipts.keys.key_id), never from what the envelope claims.
* Unrecognised fields are ignored (the spec says consumers MUST).
* The decoded payload size and the number of signatures are capped.
* Every key here is Ed25519: a ``sig`` that does not decode to exactly 64
  bytes is malformed (an empty or cut signature is refused while parsing, with
  the field named, rather than reported as a signature that does not verify).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from receipts.keys import PublicKey, SigningKey

DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024
DEFAULT_MAX_SIGNATURES = 16
MAX_SIG_BYTES = 1024  # far above any real signature; bounds work done on hostile input
ED25519_SIG_BYTES = 64  # every signature here is Ed25519 (RFC 8032): a `sig` of any other length is malformed

# Outcomes a SignatureCheck can name.
VERIFIED = "verified"
WRONG_PAYLOAD_TYPE = "wrong_payload_type"
UNKNOWN_KEY = "unknown_key"
BAD_SIGNATURE = "bad_signature"


class MalformedEnvelope(ValueError):
    """The input is not a structurally valid DSSE envelope. Names where, expected and found."""

    def __init__(self, *, path: str, expected: str, found: str) -> None:
        self.path = path
        self.expected = expected
        self.found = found
        super().__init__(f"envelope {path}: expected {expected}, found {found}")

    def __reduce__(self) -> tuple[Any, tuple[str, str, str]]:
        return (_rebuild_malformed, (self.path, self.expected, self.found))


def _rebuild_malformed(path: str, expected: str, found: str) -> MalformedEnvelope:
    return MalformedEnvelope(path=path, expected=expected, found=found)


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvelopeSignature:
    keyid: str  # "" when the envelope left it unset
    sig: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Envelope:
    payload_type: str
    payload: bytes
    signatures: tuple[EnvelopeSignature, ...]

    def to_dict(self) -> dict[str, Any]:
        """The JSON envelope, standard base64 throughout."""
        return {
            "payloadType": self.payload_type,
            "payload": _b64(self.payload),
            "signatures": [{"keyid": s.keyid, "sig": _b64(s.sig)} for s in self.signatures],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class SignatureCheck:
    """The verdict on one signature of an envelope. Has no truth value: read ``.passed``."""

    index: int  # position in the envelope's signatures list
    keyid: str  # as stated by the envelope ("" if unset); a hint, not an identity
    key_trusted: bool  # at least one trusted key was a candidate for this signature
    signature_valid: bool  # verified under a trusted key over PAE(envelope payloadType, payload)
    payload_type_ok: bool  # the envelope's payloadType is the one the caller expects
    verified_by: str | None  # key id (recomputed from the key) of the trusted key that verified
    outcome: str  # VERIFIED, WRONG_PAYLOAD_TYPE, UNKNOWN_KEY or BAD_SIGNATURE
    expected: str | None
    found: str | None
    message: str

    @property
    def passed(self) -> bool:
        return self.payload_type_ok and self.signature_valid

    def __bool__(self) -> bool:
        raise TypeError("SignatureCheck has no truth value; read .passed")

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "keyid": self.keyid,
            "key_trusted": self.key_trusted,
            "signature_valid": self.signature_valid,
            "payload_type_ok": self.payload_type_ok,
            "verified_by": self.verified_by,
            "outcome": self.outcome,
            "passed": self.passed,
            "expected": self.expected,
            "found": self.found,
            "message": self.message,
        }


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding of (payloadType, payload)."""
    type_bytes = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(type_bytes), type_bytes, len(payload), payload)


def sign_envelope(payload: bytes, payload_type: str, key: SigningKey) -> dict[str, Any]:
    """A JSON-ready DSSE envelope carrying one signature by ``key``."""
    if type(payload) is not bytes:
        raise TypeError(f"payload: expected bytes, found {type(payload).__name__}")
    sig = EnvelopeSignature(keyid=key.key_id, sig=key.sign(pae(payload_type, payload)))
    return Envelope(payload_type=payload_type, payload=payload, signatures=(sig,)).to_dict()


def parse_envelope(
    obj: object,
    *,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    max_signatures: int = DEFAULT_MAX_SIGNATURES,
    allow_unsigned: bool = False,
) -> Envelope:
    """Check the structure of a decoded JSON envelope. Raises only :class:`MalformedEnvelope`.

    `allow_unsigned=True` accepts an empty signature list, for callers (the
    receipt verifier) that report a missing signature as a failed check.
    """
    if max_payload_bytes < 0 or max_signatures < 1:
        raise ValueError(
            f"limits: expected max_payload_bytes >= 0 and max_signatures >= 1, "
            f"found {max_payload_bytes} and {max_signatures}"
        )
    if not isinstance(obj, dict):
        raise MalformedEnvelope(path="$", expected="a JSON object", found=_kind(obj))
    payload_type = _required_text(obj, "payloadType", "$")
    payload = _decode_b64(_required(obj, "payload", "$"), "$.payload", max_payload_bytes)
    raw_sigs = _required(obj, "signatures", "$")
    if not isinstance(raw_sigs, list):
        raise MalformedEnvelope(path="$.signatures", expected="an array", found=_kind(raw_sigs))
    if not raw_sigs and not allow_unsigned:
        raise MalformedEnvelope(path="$.signatures", expected="at least one signature", found="an empty array")
    if len(raw_sigs) > max_signatures:
        raise MalformedEnvelope(
            path="$.signatures", expected=f"at most {max_signatures} signatures", found=f"{len(raw_sigs)}"
        )
    return Envelope(
        payload_type=payload_type,
        payload=payload,
        signatures=tuple(_parse_signature(s, f"$.signatures[{i}]") for i, s in enumerate(raw_sigs)),
    )


def verify_envelope(env: Envelope, trusted: Sequence[PublicKey], expected_payload_type: str) -> list[SignatureCheck]:
    """One :class:`SignatureCheck` per signature, in envelope order. Never raises on a bad envelope."""
    message = pae(env.payload_type, env.payload)
    type_ok = env.payload_type == expected_payload_type
    trusted_ids = sorted({k.key_id for k in trusted})
    return [
        _check_one(i, s, message, trusted, trusted_ids, type_ok, env.payload_type, expected_payload_type)
        for i, s in enumerate(env.signatures)
    ]


def has_trusted_signature(checks: Sequence[SignatureCheck]) -> bool:
    """True iff at least one check passed: a trusted key verified it over the expected payloadType."""
    return any(c.passed for c in checks)


# --- internals ----------------------------------------------------------------


def _check_one(
    index: int,
    sig: EnvelopeSignature,
    message: bytes,
    trusted: Sequence[PublicKey],
    trusted_ids: list[str],
    type_ok: bool,
    found_type: str,
    expected_type: str,
) -> SignatureCheck:
    candidates = [k for k in trusted if k.key_id == sig.keyid] if sig.keyid else list(trusted)
    verified_by = next((k.key_id for k in candidates if k.verify(sig.sig, message)), None)
    where = f"signature {index} (keyid {sig.keyid!r})"
    expected: str | None
    found: str | None
    if not type_ok:
        outcome, expected, found = WRONG_PAYLOAD_TYPE, expected_type, found_type
        text = f"{where}: payloadType expected {expected_type!r}, found {found_type!r}"
    elif not candidates:
        outcome, expected, found = UNKNOWN_KEY, f"one of {trusted_ids}", sig.keyid
        text = f"{where}: unknown key, not in the trust list {trusted_ids}"
    elif verified_by is None:
        outcome, expected, found = BAD_SIGNATURE, "a valid signature over PAE(payloadType, payload)", "none"
        tried = ", ".join(k.key_id for k in candidates)
        text = f"{where}: signature does not verify under trusted key(s) {tried}"
    else:
        outcome, expected, found = VERIFIED, None, None
        text = f"{where}: verified by trusted key {verified_by}"
    return SignatureCheck(
        index=index,
        keyid=sig.keyid,
        key_trusted=bool(candidates),
        signature_valid=verified_by is not None,
        payload_type_ok=type_ok,
        verified_by=verified_by,
        outcome=outcome,
        expected=expected,
        found=found,
        message=text,
    )


def _parse_signature(raw: object, path: str) -> EnvelopeSignature:
    if not isinstance(raw, dict):
        raise MalformedEnvelope(path=path, expected="a JSON object", found=_kind(raw))
    keyid = _optional_text(raw, "keyid", path)
    sig = _decode_b64(_required(raw, "sig", path), f"{path}.sig", MAX_SIG_BYTES)
    if len(sig) != ED25519_SIG_BYTES:  # an empty or cut signature is malformed input, not a bad signature
        raise MalformedEnvelope(
            path=f"{path}.sig", expected=f"a {ED25519_SIG_BYTES}-byte Ed25519 signature", found=f"{len(sig)} bytes"
        )
    return EnvelopeSignature(keyid=keyid, sig=sig)


def _required(obj: dict[Any, Any], name: str, path: str) -> object:
    if name not in obj:
        raise MalformedEnvelope(path=f"{path}.{name}", expected="a value", found="nothing")
    value: object = obj[name]
    return value


def _required_text(obj: dict[Any, Any], name: str, path: str) -> str:
    value = _required(obj, name, path)
    return _text(value, f"{path}.{name}")


def _optional_text(obj: dict[Any, Any], name: str, path: str) -> str:
    return _text(obj[name], f"{path}.{name}") if name in obj else ""


def _text(value: object, path: str) -> str:
    if not isinstance(value, str):
        raise MalformedEnvelope(path=path, expected="a string", found=_kind(value))
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise MalformedEnvelope(path=path, expected="valid Unicode", found="a lone surrogate") from None
    return value


def _decode_b64(value: object, path: str, max_bytes: int) -> bytes:
    if not isinstance(value, str):
        raise MalformedEnvelope(path=path, expected="a base64 string", found=_kind(value))
    if len(value) > 4 * ((max_bytes + 2) // 3):
        raise MalformedEnvelope(
            path=path, expected=f"at most {max_bytes} bytes", found=f"{len(value)} base64 characters"
        )
    urlsafe = "-" in value or "_" in value
    if urlsafe and ("+" in value or "/" in value):
        raise MalformedEnvelope(path=path, expected="one base64 alphabet", found="standard and URL-safe mixed")
    std = value.replace("-", "+").replace("_", "/") if urlsafe else value
    try:
        raw = base64.b64decode(std, validate=True)
    except (binascii.Error, ValueError):
        raise MalformedEnvelope(path=path, expected="padded base64", found="invalid base64") from None
    if _b64(raw) != std:
        raise MalformedEnvelope(path=path, expected="canonical base64", found="a non-canonical encoding")
    if len(raw) > max_bytes:
        raise MalformedEnvelope(path=path, expected=f"at most {max_bytes} bytes", found=f"{len(raw)} bytes")
    return raw


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {dict: "an object", list: "an array", str: "a string", int: "a number", float: "a number"}.get(
        type(value), "not a JSON value"
    )
