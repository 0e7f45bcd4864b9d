"""C2SP signed notes and tlog checkpoints (c2sp.org/signed-note, c2sp.org/tlog-checkpoint), pure.

A signed note is a text ending in a newline, a blank line, and one or more signature lines
`— <key name> base64(key hash ‖ signature)`. For Ed25519 (signature type 0x01)::

    key hash  = SHA-256(key name ‖ "\\n" ‖ 0x01 ‖ 32-byte public key)[:4]   (big-endian uint32)
    signature = Ed25519(note text)          (the text up to and including its last newline)
    vkey      = <key name>+<hex key hash>+base64(0x01 ‖ public key)

This is what Go's golang.org/x/mod/sumdb/note reads and writes. Our checkpoint as a note
(docs/FORMAT.md §22) is the note text::

    <origin>\\n<tree size>\\n<base64 root>\\nmre-chain-head <64 hex>\\n

with key name `<16 hex of the key id>/mre` and origin `<key name>/<session>`: one key signs every
session's log, each session is its own log (origin). A note is only ever signed over a JSON
checkpoint (§11, §13) that the same key already signed (`sign_checkpoint_note` checks that first),
so the note claims nothing the JSON checkpoint did not.

Parsing (`parse_note`, `parse_vkey`, `parse_checkpoint_text`) raises MalformedNote; checking
(`note_signature_rows`) adds report rows. No I/O here.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from receipts.body import checkpoint_bytes, decode_sig
from receipts.keys import KEY_ID_PREFIX, PublicKey, SigningKey
from receipts.report import Rows

SIG_ED25519 = 0x01
SIG_PREFIX = "\u2014 "  # em dash, space
MAX_NOTE_BYTES = 64 * 1024
MAX_SIGNATURES = 100  # Go's note.Open refuses more; the spec asks every verifier to accept at least 16
NAME_SUFFIX = "/mre"
CHAIN_HEAD_EXTENSION = "mre-chain-head "
_B64_RE = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_SIZE_RE = re.compile(r"0|[1-9][0-9]{0,19}")
_HEX8_RE = re.compile(r"[0-9a-f]{8}")
_HEX64_RE = re.compile(r"[0-9a-f]{64}")


class MalformedNote(ValueError):
    """Not a well-formed signed note, verifier key or checkpoint text (a parse error, not a failed check)."""

    def __init__(self, what: str, message: str) -> None:
        super().__init__(f"malformed {what}: {message}")
        self.what = what


@dataclass(frozen=True, slots=True)
class NoteSignature:
    """One signature line: the key name, the 4-byte key hash and the signature bytes after it."""

    name: str
    key_hash: int
    sig: bytes

    def line(self) -> str:
        return f"{SIG_PREFIX}{self.name} {b64(self.key_hash.to_bytes(4, 'big') + self.sig)}\n"


@dataclass(frozen=True, slots=True)
class Note:
    """A parsed signed note: its text (ending in a newline) and its signature lines, in order."""

    text: str
    signatures: tuple[NoteSignature, ...]

    def encode(self) -> str:
        return self.text + "\n" + "".join(s.line() for s in self.signatures)


@dataclass(frozen=True, slots=True)
class NoteVerifier:
    """A verifier key: the key name, its 4-byte hash, and the Ed25519 public key."""

    name: str
    key_hash: int
    key: PublicKey

    def vkey(self) -> str:
        return f"{self.name}+{self.key_hash:08x}+{b64(bytes([SIG_ED25519]) + self.key.raw)}"


@dataclass(frozen=True, slots=True)
class CheckpointText:
    """The body of a tlog checkpoint: origin, tree size, root hash, extension lines."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def encode(self) -> str:
        return "".join(f"{line}\n" for line in (self.origin, str(self.size), b64(self.root), *self.extensions))

    @property
    def chain_head(self) -> str | None:
        """Our extension line's chain hash (hex), when the note carries one."""
        heads = [e.removeprefix(CHAIN_HEAD_EXTENSION) for e in self.extensions if e.startswith(CHAIN_HEAD_EXTENSION)]
        return heads[0] if len(heads) == 1 and _HEX64_RE.fullmatch(heads[0]) else None


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def b64decode(text: str) -> bytes | None:
    """Canonical standard base64 (padded, no whitespace), else None."""
    if not _B64_RE.fullmatch(text) or len(text) % 4:
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if b64(raw) == text else None


# -- keys -------------------------------------------------------------------------------
def valid_name(name: str) -> bool:
    """A key name: non-empty, no Unicode space, no '+' (what Go's note package accepts)."""
    return bool(name) and "+" not in name and not any(ch.isspace() for ch in name)


def key_hash(name: str, public_raw: bytes, sig_type: int = SIG_ED25519) -> int:
    """SHA-256(name ‖ "\\n" ‖ type ‖ public key)[:4] as a big-endian integer (type 0x01: a note signer; 0x04: a
    cosignature/v1 witness, receipts.cosignature)."""
    digest = hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([sig_type]) + public_raw).digest()
    return int.from_bytes(digest[:4], "big")


def key_name(key_id: str) -> str:
    """Our note key name for a receipt key id: `<16 hex>/mre`."""
    return key_id.removeprefix(KEY_ID_PREFIX) + NAME_SUFFIX


def origin(key_id: str, session: str) -> str:
    """The checkpoint origin of one session's log under one key: `<16 hex>/mre/<session>`."""
    return f"{key_name(key_id)}/{session}"


def verifier(public: PublicKey, name: str | None = None) -> NoteVerifier:
    """The note verifier of a public key (under our key name unless `name` is given)."""
    name = key_name(public.key_id) if name is None else name
    if not valid_name(name):
        raise MalformedNote("key name", f"{name!r} is empty or holds a space or '+'")
    return NoteVerifier(name, key_hash(name, public.raw), public)


def parse_vkey(text: str) -> NoteVerifier:
    """Read `name+hash+base64(0x01 ‖ key)`; MalformedNote when it is not an Ed25519 verifier key whose hash matches."""
    name, hash_, public = read_vkey(text, SIG_ED25519, "verifier key")
    return NoteVerifier(name, hash_, public)


def read_vkey(text: str, sig_type: int, what: str) -> tuple[str, int, PublicKey]:
    """(name, key hash, public key) of a vkey `name+hash+base64(type ‖ 32-byte Ed25519 key)` of `sig_type`;
    MalformedNote (naming `what`) for anything else, a key of another type or a hash that does not match."""
    if type(text) is not str:
        raise MalformedNote(what, f"expected text, found {type(text).__name__}")
    text = text.strip()
    parts = text.split("+", 2)  # the base64 key may hold '+' itself (Go's NewVerifier chops twice too)
    if len(parts) != 3:
        raise MalformedNote(what, "expected <name>+<8 hex key hash>+<base64 key>")
    name, hash_hex, key_b64 = parts
    if not valid_name(name):
        raise MalformedNote(what, "the key name is empty or holds a space")
    if not _HEX8_RE.fullmatch(hash_hex):
        raise MalformedNote(what, "the key hash is not 8 lowercase hex digits")
    raw = b64decode(key_b64)
    if raw is None or len(raw) != 33 or raw[0] != sig_type:
        raise MalformedNote(what, f"the key is not base64 of 0x{sig_type:02x} and a 32-byte Ed25519 public key")
    try:
        public = PublicKey(raw[1:])
    except ValueError as exc:
        raise MalformedNote(what, f"not an Ed25519 public key ({exc})") from None
    expected = key_hash(name, public.raw, sig_type)
    if int(hash_hex, 16) != expected:
        raise MalformedNote(what, f"key hash {hash_hex} does not match the name and key (expected {expected:08x})")
    return name, expected, public


# -- notes ------------------------------------------------------------------------------
def sign_note(text: str, key: SigningKey, name: str | None = None) -> str:
    """The signed note of `text` (which must end in a newline) under `key`, named `name` (ours by default)."""
    _check_text(text)
    v = verifier(key.public_key, name)
    return Note(text, (NoteSignature(v.name, v.key_hash, key.sign(text.encode("utf-8"))),)).encode()


def _check_text(text: str) -> None:
    if not text.endswith("\n"):
        raise MalformedNote("note", "the text must end in a newline")
    if any(ord(ch) < 0x20 and ch != "\n" for ch in text):
        raise MalformedNote("note", "the text holds a control character")


def parse_note(raw: bytes | str) -> Note:
    """Split a signed note into its text and signature lines (as Go's note.Open does); verifies nothing."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if type(data) is not bytes:
        raise MalformedNote("note", f"expected bytes, found {type(raw).__name__}")
    if len(data) > MAX_NOTE_BYTES:
        raise MalformedNote("note", f"{len(data)} bytes is over the {MAX_NOTE_BYTES}-byte limit")
    try:
        msg = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedNote("note", f"not UTF-8 (byte {exc.start})") from None
    bad = next((i for i, ch in enumerate(msg) if ord(ch) < 0x20 and ch != "\n"), None)
    if bad is not None:
        raise MalformedNote("note", f"a control character at character {bad}")
    split = msg.rfind("\n\n")
    if split < 0:
        raise MalformedNote("note", "no blank line before the signatures")
    text, block = msg[: split + 1], msg[split + 2 :]
    if not block or not block.endswith("\n"):
        raise MalformedNote("note", "no signature line, or the last one does not end in a newline")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise MalformedNote("note", f"{len(lines)} signatures is over the limit of {MAX_SIGNATURES}")
    sigs = []
    for i, line in enumerate(lines, 1):
        if not line.startswith(SIG_PREFIX):
            raise MalformedNote("note", f"signature line {i} does not start with an em dash and a space")
        name, _, encoded = line[len(SIG_PREFIX) :].partition(" ")
        sig = b64decode(encoded)
        if not valid_name(name) or sig is None or len(sig) < 5:
            raise MalformedNote("note", f"signature line {i} is not `— <name> <base64 of a key hash and a signature>`")
        sigs.append(NoteSignature(name, int.from_bytes(sig[:4], "big"), sig[4:]))
    return Note(text, tuple(sigs))


def signed_by(note: Note, v: NoteVerifier) -> bool | None:
    """True: a signature line of `v` (same name and key hash) verifies; False: one is there and does not
    (Go's note.Open rejects the note then); None: no line names `v` (a signature of an unknown key is ignored)."""
    mine = [s for s in note.signatures if s.name == v.name and s.key_hash == v.key_hash]
    if not mine:
        return None
    return all(v.key.verify(s.sig, note.text.encode("utf-8")) for s in mine)


# -- checkpoints as notes ---------------------------------------------------------------
def parse_checkpoint_text(text: str) -> CheckpointText:
    """Read a checkpoint body: origin, decimal size (no leading zero), base64 32-byte root, extension lines."""
    what = "checkpoint note"
    if not text.endswith("\n"):
        raise MalformedNote(what, "the text does not end in a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3 or any(not line for line in lines):
        raise MalformedNote(what, "expected at least three non-empty lines: origin, tree size, root hash")
    origin_line, size_line, root_line, *ext = lines
    if not _SIZE_RE.fullmatch(size_line) or int(size_line) > 2**64 - 1:
        raise MalformedNote(what, f"tree size {size_line[:40]!r} is not a decimal without leading zeroes")
    root = b64decode(root_line)
    if root is None or len(root) != 32:
        raise MalformedNote(what, "the root hash is not base64 of 32 bytes")
    return CheckpointText(origin_line, int(size_line), root, tuple(ext))


def checkpoint_text(cp: Mapping[str, Any]) -> CheckpointText:
    """The note body of a JSON checkpoint (§11's `{"body", "key_id", "sig"}`): fixed by its body and key id."""
    b = cp["body"]
    return CheckpointText(
        origin(cp["key_id"], b["session"]), b["tree_size"], bytes.fromhex(b["root"]), (CHAIN_HEAD_EXTENSION + b["chain_head"],)
    )


class NotSigned(ValueError):
    """The key will not sign this checkpoint as a note: it is not the key that signed the JSON checkpoint."""


def sign_checkpoint_note(cp: Mapping[str, Any], key: SigningKey) -> str:
    """The JSON checkpoint `cp` as a signed note under `key`, which must be the key whose valid signature
    `cp` carries: a note is never a new claim, only the same tree head in the form the tlog world reads."""
    if cp["key_id"] != key.key_id:
        raise NotSigned(f"the checkpoint is signed by {cp['key_id']}, not by this data directory's key {key.key_id}")
    sig = decode_sig(cp["sig"])
    if sig is None or not key.public_key.verify(sig, checkpoint_bytes(cp["body"])):
        raise NotSigned(f"the checkpoint's signature is not valid under {key.key_id}: it is not signed as a note")
    return sign_note(checkpoint_text(cp).encode(), key)


def note_signature_rows(r: Rows, note: Note, trusted: Sequence[NoteVerifier], *, name: str = "note.signature") -> NoteVerifier | None:
    """One row: the note carries a valid signature by a trusted verifier key (none given: not verifiable).
    Returns the verifier that signed it, or None."""
    if not trusted:
        r.na(name, "no verifier key given (--vkey KEYLINE)")
        return None
    outcomes = [(v, signed_by(note, v)) for v in trusted]
    bad = [v for v, ok in outcomes if ok is False]
    good = [v for v, ok in outcomes if ok]
    names = ", ".join(f"{v.name}+{v.key_hash:08x}" for v in trusted)
    found = ", ".join(f"{s.name}+{s.key_hash:08x}" for s in note.signatures)
    if bad:
        r.add(name, False, f"the note's signature by {bad[0].name} does not verify", "a valid Ed25519 signature of the note text", "invalid signature", "signature")
        return None
    if not good:
        r.add(name, False, "the note is signed by no trusted key", names, found, "signature")
        return None
    r.add(name, True, f"the note is signed by trusted key {good[0].name}+{good[0].key_hash:08x}")
    return good[0]


__all__ = [
    "b64",
    "b64decode",
    "CHAIN_HEAD_EXTENSION",
    "CheckpointText",
    "MalformedNote",
    "Note",
    "NoteSignature",
    "NoteVerifier",
    "NotSigned",
    "checkpoint_text",
    "key_hash",
    "key_name",
    "note_signature_rows",
    "origin",
    "parse_checkpoint_text",
    "parse_note",
    "parse_vkey",
    "read_vkey",
    "sign_checkpoint_note",
    "sign_note",
    "signed_by",
    "valid_name",
    "verifier",
]
