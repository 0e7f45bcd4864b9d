"""The session bundle format, `mre-bundle/v1` (pure; docs/FORMAT.md §21).

A bundle is one zip file holding one session:

    manifest.dsse.json        a DSSE envelope (payloadType MANIFEST_PAYLOAD_TYPE) over the manifest (JCS)
    ledger/events.jsonl       the session's ledger exactly as stored (erased lines stay erased)
    checkpoint.json           the latest signed checkpoint (§13)
    receipts/<receipt_id>.json        every receipt of the session (§10, §15)
    certificates/<name>.json          every erasure certificate of the session (§16)
    keys/ed25519-<16 hex>.pub         the public key that signed them (the trust-format JSON line of §9)
    notes/<size>.note                 each witnessed checkpoint as a signed note with its cosignatures (§21.1, optional)

The manifest (the envelope's payload, canonical JSON):

    {"format": "mre-bundle/v1", "session": S, "exported_at": TS, "events": N, "chain_head": hex,
     "signer": key_id, "members": [{"name", "size", "sha256"}, …]}

`members` lists every other member of the zip exactly once, sorted by name; `events` and `chain_head` are
the ledger's line count and last chain hash. Every member name must match MEMBER_RE; anything else in the
file — another name, a directory, a symlink, a device, two entries sharing their bytes, a name twice, an
encrypted entry, more bytes than declared, a compression ratio or total size past the caps — is refused
before a byte is written anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ledger.canonical import CanonicalError, canonical_json, loads_strict
from ledger.event import EventError, validate_session_id

BUNDLE_FORMAT = "mre-bundle/v1"
MANIFEST_PAYLOAD_TYPE = "application/vnd.mre.bundle-manifest+json; version=1"
MANIFEST_NAME = "manifest.dsse.json"
LEDGER_NAME = "ledger/events.jsonl"
CHECKPOINT_NAME = "checkpoint.json"
SUFFIX = ".mre.zip"

# Caps (a bundle past any of them is refused, whatever its manifest says):
MAX_MEMBERS = 200_000  # receipts, certificates and keys included
MAX_TOTAL_BYTES = 8 * 1024**3  # all members, uncompressed
MAX_MEMBER_BYTES = 4 * 1024**3  # one member, uncompressed (the ledger)
MAX_SMALL_MEMBER_BYTES = 6 * 1024 * 1024  # a receipt (5 MiB), a certificate, a checkpoint, a key, the manifest
MAX_RATIO = 100  # uncompressed / compressed bytes of a member over RATIO_FLOOR bytes
RATIO_FLOOR = 1024 * 1024
MAX_MANIFEST_BYTES = 64 * 1024 * 1024  # 200,000 members at ~150 bytes each, base64, with room

MEMBER_RE = re.compile(
    r"(?:ledger/events\.jsonl|checkpoint\.json|receipts/rcpt_[0-9a-f]{32}\.json"
    r"|certificates/erasure-[A-Za-z0-9_-]{1,64}-[0-9A-Za-z_-]{1,80}\.json|keys/ed25519-[0-9a-f]{16}\.pub"
    r"|notes/(?:0|[1-9][0-9]{0,19})\.note)"  # §21.1: a witnessed checkpoint as a signed note (bundle.notes)
)
MANIFEST_FIELDS = ("format", "session", "exported_at", "events", "chain_head", "signer", "members")
MEMBER_FIELDS = ("name", "size", "sha256")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_KEY_ID = re.compile(r"ed25519:[0-9a-f]{16}")
TS_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?Z")  # the manifest's exported_at


class BundleError(ValueError):
    """A bundle refused: what and where, in one line."""


@dataclass(frozen=True, slots=True)
class Member:
    name: str
    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class Manifest:
    session: str
    exported_at: str
    events: int
    chain_head: str
    signer: str
    members: tuple[Member, ...]

    def member(self, name: str) -> Member | None:
        return next((m for m in self.members if m.name == name), None)


def key_member(key_id: str) -> str:
    """The member name of a public key: keys/ed25519-<16 hex>.pub."""
    return "keys/" + key_id.replace(":", "-") + ".pub"


def member_problem(name: str) -> str | None:
    """Why `name` may not be a member of a bundle, or None. The first check of every name read."""
    if not name:
        return "an empty member name"
    if "\x00" in name or "\\" in name:
        return f"member {name!r}: a NUL or backslash in its name"
    if name.startswith("/") or re.match(r"[A-Za-z]:", name):
        return f"member {name!r}: an absolute path"
    if ".." in name.split("/"):
        return f"member {name!r}: a path that leaves the bundle ('..')"
    if name.endswith("/"):
        return f"member {name!r}: a directory entry"
    if name != MANIFEST_NAME and not MEMBER_RE.fullmatch(name):
        return f"member {name!r}: not a name a bundle holds (see docs/FORMAT.md §21)"
    return None


def zip_date_time(ts: str) -> tuple[int, int, int, int, int, int]:
    """The date the exporter gives every zip entry of a bundle exported at `ts` (the manifest's exported_at, `…Z`,
    UTC): its seconds floored to even, as a zip stores them. BundleError for a time that is not one or that a zip
    cannot date."""
    if not isinstance(ts, str) or TS_RE.fullmatch(ts) is None:
        raise BundleError(f"exported_at: {ts!r} is not a UTC timestamp (YYYY-MM-DDTHH:MM:SS[.fff]Z)")
    try:
        t = datetime.fromisoformat(ts[:19])
    except ValueError:
        raise BundleError(f"exported_at: {ts!r} is not a date") from None
    if not 1980 <= t.year <= 2107:
        raise BundleError(f"exported_at: {ts!r} is outside 1980-2107, which a zip cannot date")
    return (t.year, t.month, t.day, t.hour, t.minute, t.second - t.second % 2)


def size_cap(name: str) -> int:
    return MAX_MEMBER_BYTES if name == LEDGER_NAME else MAX_MANIFEST_BYTES if name == MANIFEST_NAME else MAX_SMALL_MEMBER_BYTES


def build_manifest(
    *, session: str, exported_at: str, events: int, chain_head: str, signer: str, members: list[Member]
) -> bytes:
    """The manifest's canonical bytes (the DSSE payload)."""
    doc = {
        "format": BUNDLE_FORMAT,
        "session": session,
        "exported_at": exported_at,
        "events": events,
        "chain_head": chain_head,
        "signer": signer,
        "members": [{"name": m.name, "size": m.size, "sha256": m.sha256} for m in sorted(members, key=lambda m: m.name)],
    }
    return canonical_json(doc)


def parse_manifest(payload: bytes) -> Manifest:
    """The manifest from its payload bytes; BundleError naming the field for anything else."""
    try:
        doc = loads_strict(payload)
    except (CanonicalError, ValueError) as exc:
        raise BundleError(f"manifest: not canonical JSON ({exc})") from None
    if not isinstance(doc, Mapping):
        raise BundleError("manifest: not a JSON object")
    if sorted(doc) != sorted(MANIFEST_FIELDS):
        raise BundleError(f"manifest: fields {sorted(doc)}, expected {sorted(MANIFEST_FIELDS)}")
    if doc["format"] != BUNDLE_FORMAT:
        raise BundleError(f"manifest.format: {doc['format']!r} is not {BUNDLE_FORMAT!r}")
    try:
        session = validate_session_id(doc["session"])
    except EventError as exc:
        raise BundleError(f"manifest.session: {exc}") from None
    _check(isinstance(doc["exported_at"], str) and TS_RE.fullmatch(doc["exported_at"]) is not None, "exported_at", "a UTC timestamp")
    _check(_count(doc["events"]) and doc["events"] >= 1, "events", "a positive integer")
    _check(isinstance(doc["chain_head"], str) and _HEX64.fullmatch(doc["chain_head"]) is not None, "chain_head", "64 hex digits")
    _check(isinstance(doc["signer"], str) and _KEY_ID.fullmatch(doc["signer"]) is not None, "signer", "a key id ed25519:<16 hex>")
    raw = doc["members"]
    _check(isinstance(raw, list) and len(raw) <= MAX_MEMBERS, "members", f"a list of at most {MAX_MEMBERS:,}")
    members: list[Member] = []
    for i, m in enumerate(raw):
        where = f"members[{i}]"
        if not isinstance(m, Mapping) or sorted(m) != sorted(MEMBER_FIELDS):
            raise BundleError(f"manifest.{where}: expected an object with {list(MEMBER_FIELDS)}")
        name = m["name"]
        problem = member_problem(name) if isinstance(name, str) else "not a string"
        if problem is not None or name == MANIFEST_NAME:
            raise BundleError(f"manifest.{where}.name: {problem or 'the manifest cannot list itself'}")
        _check(_count(m["size"]) and m["size"] <= size_cap(name), f"{where}.size", f"an integer of at most {size_cap(name):,}")
        _check(isinstance(m["sha256"], str) and _HEX64.fullmatch(m["sha256"]) is not None, f"{where}.sha256", "64 hex digits")
        members.append(Member(name, m["size"], m["sha256"]))
    names = [m.name for m in members]
    if names != sorted(set(names)):
        raise BundleError("manifest.members: not sorted by name, or a name listed twice")
    for required in (LEDGER_NAME, CHECKPOINT_NAME):
        if required not in names:
            raise BundleError(f"manifest.members: no {required}")
    if sum(m.size for m in members) > MAX_TOTAL_BYTES:
        raise BundleError(f"manifest.members: more than {MAX_TOTAL_BYTES:,} bytes in all")
    return Manifest(session, doc["exported_at"], doc["events"], doc["chain_head"], doc["signer"], tuple(members))


def _count(v: Any) -> bool:
    return type(v) is int and v >= 0


def _check(ok: bool, field: str, expected: str) -> None:
    if not ok:
        raise BundleError(f"manifest.{field}: expected {expected}")
