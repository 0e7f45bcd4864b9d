"""A tlog-proof per memory (c2sp.org/tlog-proof@v1), and its check, pure.

    c2sp.org/tlog-proof@v1
    index <seq>
    <base64 hash>            one per line: the RFC 9162 inclusion path of the event's leaf
    ...
                             (an empty line)
    <the checkpoint as a signed note, verbatim>

The leaf data is the event's raw 32-byte digest (docs/FORMAT.md §11), so the index is the event's
seq and the tree is the one the receipt's checkpoint signs. `tlog_proof_for` makes one from a
receipt (the path it carries, checked first) and the key that signed the receipt's checkpoint;
`check_tlog_proof` checks one with the event's ledger line as evidence and returns a
TlogProofReport (one row per check). No `extra` line is written; one that is read is kept and
never trusted (the spec says so).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ledger.canonical import loads_strict
from ledger.event import (
    ERASED_KEYS,
    FORMAT_VERSION,
    GENESIS,
    HEX64_RE,
    LINE_KEYS,
    SESSION_ID_RE,
    EventError,
    chain_link,
    recompute_digest,
)
from receipts.body import Receipt, cited_events
from receipts.cosignature import Policy, policy_rows
from receipts.keys import SigningKey
from receipts.merkle import ProofError, leaf_hash, verify_inclusion
from receipts.note import (
    CheckpointText,
    MalformedNote,
    Note,
    NoteSignature,
    NoteVerifier,
    b64,
    b64decode,
    note_signature_rows,
    parse_checkpoint_text,
    parse_note,
    sign_checkpoint_note,
)
from receipts.report import Check, Report, Rows

HEADER = "c2sp.org/tlog-proof@v1"
SUFFIX = ".tlog-proof"
MAX_PROOF_BYTES = 128 * 1024
MAX_HASHES = 64
MAX_EVENT_LINE_BYTES = 1024 * 1024
_INDEX_RE = re.compile(r"index (0|[1-9][0-9]{0,19})")
REQUIRED = ("note.signature", "checkpoint.origin", "event.digest", "event.chain", "event.index", "proof.inclusion")


class MalformedTlogProof(ValueError):
    """Not a well-formed tlog-proof (or event line): a parse error, not a failed check."""

    def __init__(self, message: str, *, what: str = "tlog-proof") -> None:
        super().__init__(f"malformed {what}: {message}")


class NoProof(ValueError):
    """No tlog-proof can be made for this seq from this receipt (not cited, or its path does not lead to the root)."""


@dataclass(frozen=True, slots=True)
class TlogProof:
    index: int
    hashes: tuple[bytes, ...]
    checkpoint: str  # the signed note, verbatim
    extra: bytes | None = None

    def encode(self) -> str:
        extra = [] if self.extra is None else [f"extra {b64(self.extra)}"]
        lines = [HEADER, *extra, f"index {self.index}", *(b64(h) for h in self.hashes)]
        return "\n".join(lines) + "\n\n" + self.checkpoint


def parse_tlog_proof(raw: bytes | str) -> TlogProof:
    """Read a .tlog-proof: header, optional extra, index, hashes, an empty line, a signed note (split, not verified)."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if type(data) is not bytes:
        raise MalformedTlogProof(f"expected bytes, found {type(raw).__name__}")
    if len(data) > MAX_PROOF_BYTES:
        raise MalformedTlogProof(f"{len(data)} bytes is over the {MAX_PROOF_BYTES}-byte limit")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedTlogProof(f"not UTF-8 (byte {exc.start})") from None
    head, sep, checkpoint = text.partition("\n\n")
    if not sep or not checkpoint:
        raise MalformedTlogProof("no empty line before the checkpoint, or no checkpoint")
    lines = head.split("\n")
    if lines[0] != HEADER:
        raise MalformedTlogProof(f"the first line is not {HEADER}")
    rest = lines[1:]
    extra = None
    if rest and rest[0].startswith("extra "):
        extra = b64decode(rest[0].removeprefix("extra "))
        if extra is None:
            raise MalformedTlogProof("the extra line is not base64")
        rest = rest[1:]
    if not rest or not _INDEX_RE.fullmatch(rest[0]):
        raise MalformedTlogProof("no `index N` line (a decimal with no leading zeroes)")
    index = int(rest[0].removeprefix("index "))
    if index > 2**64 - 2:
        raise MalformedTlogProof("the index is out of range")
    if len(rest) - 1 > MAX_HASHES:
        raise MalformedTlogProof(f"{len(rest) - 1} hashes is over the limit of {MAX_HASHES}")
    hashes = []
    for i, line in enumerate(rest[1:], 1):
        h = b64decode(line)
        if h is None or len(h) != 32:
            raise MalformedTlogProof(f"hash line {i} is not base64 of 32 bytes")
        hashes.append(h)
    return TlogProof(index, tuple(hashes), checkpoint, extra)


# -- making one from a receipt ------------------------------------------------------------
def tlog_proof_for(receipt: Receipt, seq: int, key: SigningKey) -> str:
    """The tlog-proof of the event at `seq` that `receipt` cites: the inclusion path the receipt carries
    (checked against its signed root first) and its checkpoint as a note signed by `key`, which must be
    the key that signed that checkpoint (receipts.note.NotSigned otherwise). NoProof when the receipt
    does not cite `seq`, or its record or path for it does not check."""
    body = receipt.signed_body
    cited = [(name, ev) for name, ev in cited_events(body) if ev.get("seq") == seq]
    if not cited:
        seqs = ", ".join(str(ev.get("seq")) for _n, ev in cited_events(body))
        raise NoProof(f"the receipt cites no event at seq {seq} (it cites {seqs})")
    name, ev = cited[0]
    part = body["query"] if name == "query" else body["response"] if name == "response" else body["memories"][int(name.split("#")[1]) - 1]
    cp = body["checkpoint"]
    try:
        digest = recompute_digest(ev)
    except EventError as exc:
        raise NoProof(f"{name} (seq {seq}): {exc}") from None
    if digest.hex() != ev["digest"]:
        raise NoProof(f"{name} (seq {seq}): its digest does not recompute from its fields")
    proof = tuple(bytes.fromhex(h) for h in part["proof"])
    try:
        verify_inclusion(seq, cp["body"]["tree_size"], leaf_hash(digest), proof, bytes.fromhex(cp["body"]["root"]))
    except ProofError as exc:
        raise NoProof(f"{name} (seq {seq}): its inclusion path does not lead to the signed root: {exc}") from None
    return TlogProof(seq, proof, _with_cosignatures(sign_checkpoint_note(cp, key), body)).encode()


def _with_cosignatures(note: str, body: dict[str, Any]) -> str:
    """The note with the cosignature lines the receipt carries (§22.1), after the log's own: the checkpoint "as a
    signed note with any cosignatures" (c2sp.org/tlog-proof). A receipt without `witnesses` gives the note as it was."""
    carried = body.get("witnesses", {}).get("cosignatures", [])
    if not carried:
        return note
    lines = []
    for c in carried:
        raw = b64decode(c["sig"])
        if raw is not None and len(raw) == 4 + 8 + 64:  # the body's shape check already holds them to this
            lines.append(NoteSignature(c["name"], int.from_bytes(raw[:4], "big"), raw[4:]))
    signed = parse_note(note)
    return Note(signed.text, signed.signatures + tuple(s for s in dict.fromkeys(lines) if s not in signed.signatures)).encode()


def _shown(value: bytes | int | None) -> str | None:
    return b64(value) if isinstance(value, bytes) else None if value is None else str(value)


def _chain_row(r: Rows, event: dict[str, Any], digest: bytes | None, cp: CheckpointText | None) -> None:
    """`event.chain`: the line's chain hash links its prev and its recomputed digest (§4.3); at seq 0 its prev is
    genesis; for the last event of the checkpoint's tree it is the note's chain head. The leaf does not hold them, but
    a line given as evidence is the ledger's line, all of it."""
    if digest is None:
        r.na("event.chain", "no digest to link the chain hash with")
        return
    linked = chain_link(bytes.fromhex(event["prev"]), digest).hex()
    if linked != event["chain"]:
        r.add("event.chain", False, "the line's chain hash does not link its prev and its digest (docs/FORMAT.md §4.3)", linked, event["chain"], "chain")
    elif event["seq"] == 0 and event["prev"] != GENESIS.hex():
        r.add("event.chain", False, "the first event's prev is not genesis", GENESIS.hex(), event["prev"], "prev")
    elif cp is not None and cp.size == event["seq"] + 1 and cp.chain_head is not None and cp.chain_head != event["chain"]:
        r.add("event.chain", False, "the last event of the checkpoint's tree does not end at the note's chain head", cp.chain_head, event["chain"], "chain")
    else:
        r.add("event.chain", True, "the line's chain hash links its prev and its digest")


# -- checking one, with the event line as evidence -------------------------------------------
@dataclass(frozen=True, slots=True)
class TlogProofReport(Report):
    """A tlog-proof checked with an event line: one row per check. No truth value: read `.verdict`."""

    index: int
    origin: str | None
    tree_size: int | None
    checks: tuple[Check, ...]

    @property
    def required(self) -> tuple[str, ...]:
        return REQUIRED

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "index": self.index,
            "origin": self.origin,
            "tree_size": self.tree_size,
            "failed": len(self.failed),
            "not_verifiable": len(self.not_verifiable),
            "checks": [c.to_dict() for c in self.checks],
        }


def parse_event_line(raw: bytes | str) -> dict[str, Any]:
    """A ledger line (either form, §3 or §4.4) as evidence: strict JSON, exactly its fields. MalformedTlogProof otherwise."""
    what = "event line"
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if len(data) > MAX_EVENT_LINE_BYTES:
        raise MalformedTlogProof(f"{len(data)} bytes is over the {MAX_EVENT_LINE_BYTES}-byte limit", what=what)
    try:
        obj = loads_strict(data.strip(), "$")
    except ValueError as exc:
        raise MalformedTlogProof(str(exc)[:300], what=what) from None
    if type(obj) is not dict or set(obj) not in (set(LINE_KEYS), set(ERASED_KEYS)):
        raise MalformedTlogProof("expected one ledger line: a JSON object with exactly the fields of docs/FORMAT.md §3 or §4.4", what=what)
    if type(obj["session"]) is not str or not SESSION_ID_RE.fullmatch(obj["session"]):
        raise MalformedTlogProof("session is not a session id", what=what)
    if type(obj["seq"]) is not int or obj["seq"] < 0:
        raise MalformedTlogProof("seq is not a non-negative integer", what=what)
    if type(obj["v"]) is not int or obj["v"] != FORMAT_VERSION:
        raise MalformedTlogProof(f"event format version {str(obj['v'])[:20]} is unknown (this verifier knows {FORMAT_VERSION})", what=what)
    for name in ("digest", "prev", "chain"):  # prev and chain are not in the leaf, but a line is a line: no junk in it
        if type(obj[name]) is not str or not HEX64_RE.fullmatch(obj[name]):
            raise MalformedTlogProof(f"{name} is not 64 lowercase hex digits", what=what)
    return obj


def check_tlog_proof(proof: TlogProof, event: dict[str, Any], trusted: Sequence[NoteVerifier], *, policy: Policy | None = None) -> TlogProofReport:
    """Check `proof` (parsed) for the ledger line `event` (parsed by parse_event_line) under the trusted
    verifier keys: the note's signature, its origin (`<key name>/<event's session>`), the event's digest
    recomputed from its fields, its seq as the proof's index, and the inclusion path to the signed root.
    `policy` (a c2sp.org/tlog-policy): its logs are trusted too, and the note's cosignatures get a row per witness
    and the quorum (receipts.cosignature.policy_rows; §22.1)."""
    if policy is not None:
        trusted = [*trusted, *(v for v in policy.logs if v not in trusted)]
    r = Rows()
    cp: CheckpointText | None = None
    note: Note | None = None
    try:
        note = parse_note(proof.checkpoint)
        cp = parse_checkpoint_text(note.text)
    except MalformedNote as exc:
        note = None
        r.add("note.signature", False, f"the checkpoint is not a signed tlog checkpoint: {exc}", "a signed tlog checkpoint", "malformed")
    signer = None if note is None else note_signature_rows(r, note, trusted)
    if cp is None:
        r.na("checkpoint.origin", "no checkpoint was read")
    elif signer is None:
        r.na("checkpoint.origin", "no trusted key signed the checkpoint: its origin names no log you trust")
    else:
        expected = f"{signer.name}/{event['session']}"
        r.add("checkpoint.origin", cp.origin == expected, f"the checkpoint is the log of session {event['session']} under {signer.name}", expected, cp.origin, "origin")
    try:
        digest = recompute_digest(event)
        r.add("event.digest", digest.hex() == event["digest"], "the event's digest recomputes from its fields (docs/FORMAT.md §4)", event["digest"], digest.hex(), "digest")
    except EventError as exc:
        digest = None
        r.add("event.digest", False, f"the event's digest cannot be recomputed: {exc}", "a well-formed ledger line", "refused", "digest")
    _chain_row(r, event, digest, cp)
    r.add("event.index", event["seq"] == proof.index, "the proof's index is the event's seq", event["seq"], proof.index, "index")
    if cp is None or digest is None:
        r.na("proof.inclusion", "no checkpoint or no digest to check the path against")
    else:
        try:
            verify_inclusion(proof.index, cp.size, leaf_hash(digest), proof.hashes, cp.root)
            r.add("proof.inclusion", True, f"the RFC 9162 inclusion path ({len(proof.hashes)} hashes) leads from the event's leaf to the signed root of {cp.size} events")
        except ProofError as exc:
            r.add("proof.inclusion", False, f"the inclusion path does not lead to the signed root: {exc}", b64(cp.root), _shown(exc.found), "hashes")
    if policy is not None:
        if note is None:
            r.add("witness.quorum", False, "no checkpoint note was read: no cosignature can be checked", "a signed tlog checkpoint", "malformed")
        else:
            policy_rows(r, note, policy)
    return TlogProofReport(proof.index, None if cp is None else cp.origin, None if cp is None else cp.size, tuple(r.rows))


__all__ = [
    "HEADER",
    "MalformedTlogProof",
    "NoProof",
    "TlogProof",
    "TlogProofReport",
    "check_tlog_proof",
    "parse_event_line",
    "parse_tlog_proof",
    "tlog_proof_for",
]
