"""Ed25519 signing keys for receipts: identity, loading, and the trust format.

Key id (part of the format; changing it changes every receipt's ``keyid``)::

    key_id(raw) = "ed25519:" + hex(sha256(b"mre:v1:keyid\\x00" + raw))[:16]

where ``raw`` is the 32-byte raw Ed25519 public key. The tag domain-separates
the key id from every other digest in the project. A key id is a name, not a
credential: verifiers always recompute it from the key bytes they trust.

Where the signing key comes from (:func:`load_or_create`):

1. ``RECEIPT_SIGNING_KEY`` in the environment, if set: the 32-byte raw private
   seed as hex (64 digits) or base64 (standard or URL-safe, padding optional),
   or an unencrypted PKCS8 PEM (literal ``\\n`` escapes are accepted). Nothing
   is written to disk. Set-but-unusable (including empty) is an error, never a
   silent fall-back to a generated key.
2. Otherwise ``signing.key`` (unencrypted PKCS8 PEM, mode 0600) in the keys
   folder (:func:`keys_dir`): ``$RECEIPT_KEYS_DIR`` if set, else the data
   directory's sibling ``<DATA_DIR>.keys`` (``./data`` -> ``./data.keys/``),
   created on first use (0700) together with ``signing.pub`` (the trust format
   below, derived from the key and rewritten whenever it disagrees).

The key is kept *apart* from the data directory so that handing an auditor the
data does not hand over the key. A key left by an older version in
``DATA_DIR/keys/signing.key`` is moved to the keys folder (published
atomically, then the old copy removed) with a logged warning.

Creation is race-safe: the PEM is written and fsynced in a private temp file
(``O_CREAT|O_EXCL``, 0600) and published with ``os.link``, which fails if the
name exists. So ``signing.key`` is never visible empty or half-written, and of
two processes starting at once the loser reads the winner's key.

A keys folder or ``signing.key`` that group or others can use, or that another
user owns, is *refused*, not chmod-ed: a key others could read may already be
copied, and quietly tightening it would hide that. The error names the
``chmod`` that fixes it.

Trust format (what ``python -m receipts pubkey`` prints, what ``--trust``
reads) is one small JSON object::

    {"type": "ed25519", "key_id": "ed25519:…", "public_key": "<base64 raw 32 bytes>"}

:func:`parse_public_key` also accepts a PEM SubjectPublicKeyInfo. A stated
``key_id`` must match the key; unknown fields are refused, because a trust
anchor field we ignored (say, an expiry) would be a constraint the operator
believes is enforced and is not.

All errors are :class:`KeyConfigError`; their messages never contain key
material.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ledger.canonical import CanonicalError, loads_strict
from ledger.jsonnames import json_type

ENV_VAR = "RECEIPT_SIGNING_KEY"
KEY_ID_TAG = b"mre:v1:keyid\x00"
KEY_ID_PREFIX = "ed25519:"
KEY_TYPE = "ed25519"
RAW_KEY_BYTES = 32
KEYS_DIR_ENV = "RECEIPT_KEYS_DIR"
KEYS_DIR_SUFFIX = ".keys"
LEGACY_KEYS_DIRNAME = "keys"  # DATA_DIR/keys/: where keys lived before issue 17
KEYS_DIRNAME = LEGACY_KEYS_DIRNAME  # the old name, kept for callers
PRIVATE_FILENAME = "signing.key"
PUBLIC_FILENAME = "signing.pub"
MAX_KEY_FILE_BYTES = 64 * 1024

_HEX64_RE = re.compile(r"[0-9a-fA-F]{64}")
_HEX_RE = re.compile(r"[0-9a-fA-F]+")
_TRUST_FIELDS = frozenset({"type", "key_id", "public_key"})
log = logging.getLogger("receipts.keys")


class KeyConfigError(ValueError):
    """A key or trust anchor could not be used. Carries where, and expected vs found.

    ``found`` describes the shape of what was seen (a length, a type), never its content.
    """

    def __init__(self, *, source: str, expected: str, found: str, hint: str = "") -> None:
        self.source = source
        self.expected = expected
        self.found = found
        self.hint = hint
        message = f"{source}: expected {expected}, found {found}"
        super().__init__(f"{message}; {hint}" if hint else message)

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        # Keyword-only __init__ breaks default exception pickling (multiprocessing).
        rebuild = functools.partial(
            type(self), source=self.source, expected=self.expected, found=self.found, hint=self.hint
        )
        return (rebuild, ())


def key_id(public_key_raw: bytes) -> str:
    """The key id of a raw 32-byte Ed25519 public key (definition in the module docstring)."""
    if type(public_key_raw) is not bytes or len(public_key_raw) != RAW_KEY_BYTES:
        raise KeyConfigError(
            source="key_id",
            expected=f"{RAW_KEY_BYTES} raw public-key bytes",
            found=_shape(public_key_raw),
        )
    return KEY_ID_PREFIX + hashlib.sha256(KEY_ID_TAG + public_key_raw).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class PublicKey:
    """An Ed25519 public key: ``raw`` bytes, its derived ``key_id``, and ``verify``."""

    raw: bytes
    key_id: str = field(init=False)
    _key: Ed25519PublicKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key_id", key_id(self.raw))
        object.__setattr__(self, "_key", Ed25519PublicKey.from_public_bytes(self.raw))

    def verify(self, signature: bytes, data: bytes) -> bool:
        """True only if ``signature`` is a valid Ed25519 signature of ``data`` by this key."""
        try:
            self._key.verify(signature, data)
        except InvalidSignature:
            return False
        return True


class SigningKey:
    """An Ed25519 private key. Immutable; its repr names only the key id."""

    __slots__ = ("_private", "_public")

    def __init__(self, private: Ed25519PrivateKey) -> None:
        self._private = private
        raw = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self._public = PublicKey(raw)

    @classmethod
    def generate(cls) -> SigningKey:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_seed(cls, seed: bytes) -> SigningKey:
        """From the 32-byte raw private seed (RFC 8032 private key)."""
        if type(seed) is not bytes or len(seed) != RAW_KEY_BYTES:
            raise KeyConfigError(source="private seed", expected=f"{RAW_KEY_BYTES} bytes", found=_shape(seed))
        return cls(Ed25519PrivateKey.from_private_bytes(seed))

    @property
    def public_key(self) -> PublicKey:
        return self._public

    @property
    def public_raw(self) -> bytes:
        return self._public.raw

    @property
    def key_id(self) -> str:
        return self._public.key_id

    def sign(self, data: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``data``."""
        return self._private.sign(data)

    def to_pem(self) -> bytes:
        """Unencrypted PKCS8 PEM of the private key (what ``signing.key`` holds)."""
        return self._private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    def __repr__(self) -> str:
        return f"SigningKey(key_id={self.key_id!r})"


# --- parsing (pure) ---------------------------------------------------------


def parse_private_key(text: str, *, source: str = ENV_VAR) -> SigningKey:
    """A signing key from hex or base64 of the 32-byte seed, or a PKCS8 PEM. Never echoes ``text``."""
    if type(text) is not str:
        raise KeyConfigError(source=source, expected="text", found=type(text).__name__)
    value = text.strip()
    if not value:
        raise KeyConfigError(
            source=source, expected="a hex or base64 32-byte seed, or a PKCS8 PEM", found="an empty value"
        )
    if value.startswith("-----BEGIN"):
        if "\n" not in value:
            value = value.replace("\\n", "\n")
        return _private_from_pem(value.encode("utf-8", "replace"), source)
    if _HEX64_RE.fullmatch(value):
        return SigningKey.from_seed(bytes.fromhex(value))
    if _HEX_RE.fullmatch(value) and len(value) % 2 == 0:  # odd lengths may be unpadded base64
        raise KeyConfigError(
            source=source, expected=f"{2 * RAW_KEY_BYTES} hex digits", found=f"{len(value)} hex digits"
        )
    seed = _b64decode_lenient(value)
    if seed is None:
        raise KeyConfigError(
            source=source,
            expected="a hex or base64 32-byte seed, or a PKCS8 PEM",
            found=f"unrecognised text of {len(value)} characters",
        )
    if len(seed) != RAW_KEY_BYTES:
        raise KeyConfigError(source=source, expected=f"a {RAW_KEY_BYTES}-byte seed", found=f"{len(seed)} bytes")
    return SigningKey.from_seed(seed)


def format_public_key(pub: PublicKey) -> str:
    """The trust-format JSON text for ``pub`` (one line, newline-terminated)."""
    doc = {"type": KEY_TYPE, "key_id": pub.key_id, "public_key": base64.b64encode(pub.raw).decode("ascii")}
    return json.dumps(doc) + "\n"


def parse_public_key(text: str, *, source: str = "public key") -> PublicKey:
    """A trusted public key from the trust-format JSON or a PEM SubjectPublicKeyInfo."""
    if type(text) is not str:
        raise KeyConfigError(source=source, expected="text", found=type(text).__name__)
    value = text.strip()
    if value.startswith("-----BEGIN"):
        return _public_from_pem(value, source)
    try:
        doc = loads_strict(value, "$")  # the one strict parser: a duplicate public_key is refused
    except CanonicalError as exc:
        raise KeyConfigError(
            source=source, expected="trust-format JSON or a PEM public key", found=f"neither ({exc})"
        ) from None
    if type(doc) is not dict:
        raise KeyConfigError(source=source, expected="a JSON object", found=f"JSON {json_type(doc)}")
    unknown = sorted(str(k) for k in doc.keys() - _TRUST_FIELDS)
    if unknown:
        raise KeyConfigError(
            source=source, expected=f"only the fields {sorted(_TRUST_FIELDS)}", found=f"unknown fields {unknown}"
        )
    if doc.get("type") != KEY_TYPE:
        raise KeyConfigError(source=f"{source}: type", expected=repr(KEY_TYPE), found=_json_repr(doc, "type"))
    encoded = doc.get("public_key")
    raw = _b64decode_strict(encoded) if type(encoded) is str else None
    if raw is None or len(raw) != RAW_KEY_BYTES:
        found = _json_repr(doc, "public_key") if raw is None else f"{len(raw)} bytes"
        raise KeyConfigError(
            source=f"{source}: public_key", expected=f"canonical base64 of {RAW_KEY_BYTES} bytes", found=found
        )
    pub = PublicKey(raw)
    if "key_id" in doc and doc["key_id"] != pub.key_id:
        raise KeyConfigError(
            source=f"{source}: key_id",
            expected=pub.key_id,
            found=_json_repr(doc, "key_id"),
            hint="the stated key id does not belong to this public key",
        )
    return pub


# --- loading (the only I/O in this package's key handling) -------------------


# --- helpers ----------------------------------------------------------------


def _private_from_pem(data: bytes, source: str) -> SigningKey:
    expected = "an unencrypted PKCS8 PEM Ed25519 private key"
    if not data.strip():
        raise KeyConfigError(source=source, expected=expected, found="an empty file")
    try:
        private = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise KeyConfigError(source=source, expected=expected, found="unreadable PEM") from None
    if not isinstance(private, Ed25519PrivateKey):
        raise KeyConfigError(source=source, expected=expected, found=_key_kind(private))
    return SigningKey(private)


def _public_from_pem(text: str, source: str) -> PublicKey:
    expected = "a PEM SubjectPublicKeyInfo Ed25519 public key"
    if "PRIVATE KEY" in text.split("\n", 1)[0]:
        raise KeyConfigError(
            source=source, expected=expected, found="a private key", hint="give the public key, never the private one"
        )
    try:
        public = serialization.load_pem_public_key(text.encode("utf-8", "replace"))
    except (ValueError, TypeError):
        raise KeyConfigError(source=source, expected=expected, found="unreadable PEM") from None
    if not isinstance(public, Ed25519PublicKey):
        raise KeyConfigError(source=source, expected=expected, found=_key_kind(public))
    return PublicKey(public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw))


def _b64decode_strict(s: str) -> bytes | None:
    """Standard, padded, canonical base64, or None."""
    try:
        raw = base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if base64.b64encode(raw).decode("ascii") == s else None


def _b64decode_lenient(s: str) -> bytes | None:
    """Standard or URL-safe base64, padding optional (operator-supplied config), or None."""
    if ("-" in s or "_" in s) and ("+" in s or "/" in s):
        return None
    std = s.replace("-", "+").replace("_", "/")
    std += "=" * (-len(std) % 4)
    try:
        return base64.b64decode(std, validate=True)
    except (binascii.Error, ValueError):
        return None


def _shape(value: object) -> str:
    return f"{len(value)} bytes" if isinstance(value, bytes) else type(value).__name__


def _json_repr(doc: dict[str, object], name: str) -> str:
    """A short description of ``doc[name]`` for an error message (public data only)."""
    if name not in doc:
        return "nothing"
    value = doc[name]
    if value is None:
        return "null"
    if isinstance(value, str):
        return repr(value[:80])
    return f"JSON {json_type(value)}"


def _key_kind(key: object) -> str:
    """The kind of key a PEM held, in words: never the crypto library's class name."""
    from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448, rsa, x448, x25519

    kinds: list[tuple[tuple[type, ...], str]] = [
        ((rsa.RSAPrivateKey, rsa.RSAPublicKey), "an RSA key"),
        ((ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey), "an elliptic-curve (ECDSA) key"),
        ((dsa.DSAPrivateKey, dsa.DSAPublicKey), "a DSA key"),
        ((ed448.Ed448PrivateKey, ed448.Ed448PublicKey), "an Ed448 key"),
        ((x25519.X25519PrivateKey, x25519.X25519PublicKey, x448.X448PrivateKey, x448.X448PublicKey), "a key-exchange (X25519/X448) key"),
    ]
    return next((words for types, words in kinds if isinstance(key, types)), "another kind of key")
