"""The erasure certificate, format 1 (pure: build, sign, parse).

A certificate is a DSSE envelope (payloadType ERASURE_PAYLOAD_TYPE) signed by
the data directory's receipt key, saying what was erased from a session and
proving it against a signed checkpoint taken right after the erasure
(docs/FORMAT.md §16). It holds hashes, ids and seqs, never an erased word.

Two scopes:

- "events": some events of a session were rewritten into their erased form
  (ledger.event.erased_form). The body lists each one's hashed fields (seq, id,
  role, ts, commit, digest) with its inclusion proof, the receipts redacted or
  withdrawn because they cited one, the erasure records the ledger appended
  (one per 64 erased events, consecutive; each the whole stored line: its meta
  lists its erased entries, and its text says only how many) each with its
  inclusion proof, and the checkpoint whose last leaf is the last record.
- "session": the whole session was deleted. The body holds only the session's
  final signed checkpoint and counts.

Verification is receipts.certificate_check (pure, one row per check, as
receipts.verify does); `receipts.certificate_io.verify_certificate_bytes` parses,
verifies and adds the ledger checks with a data directory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.canonical import CanonicalError, canonical_json, loads_strict
from ledger.event import EVENT_ID_RE, HEX64_RE, LINE_KEYS, ROLES, SESSION_ID_RE, TS_RE
from ledger.jsonnames import field_shown, json_shown, json_type
from receipts.body import MAX_PROOF, MAX_RECEIPT_BYTES, RECEIPT_ID_RE
from receipts.checkpoints import MalformedCheckpoint, check_checkpoint_shape
from receipts.dsse import Envelope, MalformedEnvelope, parse_envelope, sign_envelope
from receipts.keys import SigningKey

ERASURE_PAYLOAD_TYPE = "application/vnd.mre.erasure+json"
CERTIFICATE_TYPE = "mre/erasure-certificate"
CERTIFICATE_VERSION = 1
SCOPES = ("events", "session")
MAX_ERASED = 100_000
MAX_RECORDS = 1_000  # erasure records one certificate covers (64 entries each at most in the ledger)
ERASED_FIELDS = ("seq", "id", "role", "ts", "commit", "digest", "proof")
RECORD_ENTRY_FIELDS = ("seq", "id", "digest", "commit")
EVENTS_KEYS = ("type", "v", "scope", "session", "erased", "receipts", "records", "checkpoint", "issued_at")
SESSION_KEYS = ("type", "v", "scope", "session", "counts", "checkpoint", "issued_at")


class MalformedCertificate(ValueError):
    """Not a well-formed v1 erasure certificate (a parse error, not a failed check)."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"malformed erasure certificate: {where}: {message}"[:400])
        self.where = where


@dataclass(frozen=True, slots=True)
class Certificate:
    envelope: Envelope
    body: dict[str, Any]

    @property
    def session(self) -> str:
        return str(self.body["session"])

    @property
    def scope(self) -> str:
        return str(self.body["scope"])


# -- building --------------------------------------------------------------------
def erased_entry(ev: Mapping[str, Any], proof: Sequence[bytes]) -> dict[str, Any]:
    """One erased event as the certificate lists it: its hashed fields and its inclusion proof."""
    return {
        "seq": ev["seq"],
        "id": ev["id"],
        "role": ev["role"],
        "ts": ev["ts"],
        "commit": ev["commit"],
        "digest": ev["digest"],
        "proof": [h.hex() for h in proof],
    }


def events_body(
    *,
    session: str,
    erased: Sequence[dict[str, Any]],
    redacted: Sequence[str],
    withdrawn: Sequence[str],
    records: Sequence[tuple[Mapping[str, Any], Sequence[bytes]]],
    checkpoint: Mapping[str, Any],
    issued_at: str,
) -> dict[str, Any]:
    """The body of an "events" certificate. `erased`: erased_entry() rows; `records`: (the erasure record's
    12 fields, its inclusion proof) for each record of the erasure, in seq order."""
    return {
        "type": CERTIFICATE_TYPE,
        "v": CERTIFICATE_VERSION,
        "scope": "events",
        "session": session,
        "erased": sorted(erased, key=lambda e: e["seq"]),
        "receipts": {"redacted": sorted(redacted), "withdrawn": sorted(withdrawn)},
        "records": [{"event": dict(rec), "proof": [h.hex() for h in proof]} for rec, proof in sorted(records, key=lambda r: r[0]["seq"])],
        "checkpoint": dict(checkpoint),
        "issued_at": issued_at,
    }


def session_body(*, session: str, events: int, receipts: int, checkpoint: Mapping[str, Any], issued_at: str) -> dict[str, Any]:
    """The body of a "session" certificate: only the final checkpoint and counts."""
    return {
        "type": CERTIFICATE_TYPE,
        "v": CERTIFICATE_VERSION,
        "scope": "session",
        "session": session,
        "counts": {"events": events, "receipts": receipts},
        "checkpoint": dict(checkpoint),
        "issued_at": issued_at,
    }


def sign_certificate(body: Mapping[str, Any], key: SigningKey) -> dict[str, Any]:
    return sign_envelope(canonical_json(dict(body)), ERASURE_PAYLOAD_TYPE, key)


def certificate_file_bytes(envelope: Mapping[str, Any]) -> bytes:
    return canonical_json(dict(envelope)) + b"\n"


# -- parsing ---------------------------------------------------------------------
def is_certificate(raw: bytes) -> bool:
    """Whether `raw` is a JSON object whose payloadType is the erasure certificate's (cheap dispatch test)."""
    try:
        obj = loads_strict(raw, "$", allow_floats=True)
    except (CanonicalError, ValueError):
        return False
    return isinstance(obj, dict) and obj.get("payloadType") == ERASURE_PAYLOAD_TYPE


def _bad(where: str, message: str) -> MalformedCertificate:
    return MalformedCertificate(where, message)


def _obj(value: Any, where: str, keys: Sequence[str]) -> dict[str, Any]:
    if type(value) is not dict:
        raise _bad(where, f"expected an object, found JSON {json_type(value)}")
    missing = [k for k in keys if k not in value]
    extra = [k for k in value if k not in keys]
    if missing or extra:
        raise _bad(where, f"fields differ from format v1 (missing {missing}, unexpected {extra})")
    return value


def _str(value: Any, where: str, pattern: Any = None, max_len: int = 1 << 20) -> None:
    if type(value) is not str or len(value) > max_len:
        raise _bad(where, f"expected a string of at most {max_len} characters")
    if pattern is not None and not pattern.fullmatch(value):
        raise _bad(where, f"{json_shown(value)} is not valid here")


def _int(value: Any, where: str, lo: int = 0, hi: int = 2**53 - 1) -> None:
    if type(value) is not int or not lo <= value <= hi:
        raise _bad(where, f"expected an integer in {lo}..{hi}, found {json_shown(value)}")


def _proof(value: Any, where: str) -> None:
    if type(value) is not list or len(value) > MAX_PROOF:
        raise _bad(where, f"expected an array of at most {MAX_PROOF} hashes")
    for i, h in enumerate(value):
        _str(h, f"{where}[{i}]", HEX64_RE)


def _record_event(value: Any, where: str) -> None:
    ev = _obj(value, where, LINE_KEYS)
    _int(ev["v"], f"{where}.v", 1, 1)
    _str(ev["session"], f"{where}.session", SESSION_ID_RE)
    _int(ev["seq"], f"{where}.seq")
    _str(ev["id"], f"{where}.id", EVENT_ID_RE)
    if ev["role"] not in ROLES:
        raise _bad(f"{where}.role", f"{json_shown(ev['role'])} is not one of {', '.join(ROLES)}")
    _str(ev["ts"], f"{where}.ts", TS_RE)
    if type(ev["meta"]) is not dict:
        raise _bad(f"{where}.meta", "expected an object")
    _str(ev["text"], f"{where}.text")
    for k in ("salt", "digest", "prev", "chain"):
        _str(ev[k], f"{where}.{k}", HEX64_RE)


def check_certificate_shape(body: Any) -> None:
    """Raise MalformedCertificate unless `body` has exactly the v1 shape of one of the two scopes."""
    if type(body) is not dict:
        raise _bad("payload", "expected a JSON object")
    if body.get("type") != CERTIFICATE_TYPE:
        raise _bad("payload.type", f"expected {json_shown(CERTIFICATE_TYPE)}, found {field_shown(body, 'type')}")
    if type(body.get("v")) is not int or body.get("v") != CERTIFICATE_VERSION:
        raise _bad("payload.v", f"certificate format version {field_shown(body, 'v')} is unknown (this verifier knows {CERTIFICATE_VERSION})")
    scope = body.get("scope")
    if scope not in SCOPES:
        raise _bad("payload.scope", f"expected one of {', '.join(SCOPES)}, found {field_shown(body, 'scope')}")
    _obj(body, "payload", EVENTS_KEYS if scope == "events" else SESSION_KEYS)
    _str(body["session"], "session", SESSION_ID_RE)
    _str(body["issued_at"], "issued_at", TS_RE)
    try:
        check_checkpoint_shape(body["checkpoint"], source="certificate")
    except MalformedCheckpoint as exc:
        raise _bad("checkpoint", str(exc)) from None
    if scope == "session":
        counts = _obj(body["counts"], "counts", ("events", "receipts"))
        _int(counts["events"], "counts.events", 1)
        _int(counts["receipts"], "counts.receipts")
        return
    erased = body["erased"]
    if type(erased) is not list or not 1 <= len(erased) <= MAX_ERASED:
        raise _bad("erased", f"expected an array of 1..{MAX_ERASED} erased events")
    for i, e in enumerate(erased):
        e = _obj(e, f"erased[{i}]", ERASED_FIELDS)
        _int(e["seq"], f"erased[{i}].seq")
        _str(e["id"], f"erased[{i}].id", EVENT_ID_RE)
        if e["role"] not in ROLES:
            raise _bad(f"erased[{i}].role", f"{json_shown(e['role'])} is not one of {', '.join(ROLES)}")
        _str(e["ts"], f"erased[{i}].ts", TS_RE)
        _str(e["commit"], f"erased[{i}].commit", HEX64_RE)
        _str(e["digest"], f"erased[{i}].digest", HEX64_RE)
        _proof(e["proof"], f"erased[{i}].proof")
    receipts = _obj(body["receipts"], "receipts", ("redacted", "withdrawn"))
    for name in ("redacted", "withdrawn"):
        ids = receipts[name]
        if type(ids) is not list or len(ids) > MAX_ERASED:
            raise _bad(f"receipts.{name}", f"expected an array of at most {MAX_ERASED} receipt ids")
        for i, rid in enumerate(ids):
            _str(rid, f"receipts.{name}[{i}]", RECEIPT_ID_RE)
    records = body["records"]
    if type(records) is not list or not 1 <= len(records) <= MAX_RECORDS:
        raise _bad("records", f"expected an array of 1..{MAX_RECORDS} erasure records")
    for i, record in enumerate(records):
        record = _obj(record, f"records[{i}]", ("event", "proof"))
        _record_event(record["event"], f"records[{i}].event")
        _proof(record["proof"], f"records[{i}].proof")


def parse_certificate(data: bytes) -> Certificate:
    """Parse a certificate file's bytes. Raises MalformedCertificate (one line, naming where)."""
    if not isinstance(data, bytes):
        raise _bad("$", f"expected bytes, found {type(data).__name__}")
    if len(data) > MAX_RECEIPT_BYTES:
        raise _bad("$", f"{len(data)} bytes is over the {MAX_RECEIPT_BYTES}-byte limit")
    if not data.strip():
        raise _bad("$", "empty file")
    try:
        obj = loads_strict(data, "$", allow_floats=True)
        env = parse_envelope(obj, max_payload_bytes=MAX_RECEIPT_BYTES, allow_unsigned=True)
        body = loads_strict(env.payload, "$")
    except MalformedEnvelope as exc:
        raise _bad("envelope", str(exc)) from None
    except CanonicalError as exc:
        raise _bad("payload", str(exc)) from None
    check_certificate_shape(body)
    return Certificate(env, body)
