"""Signed checkpoints a visitor can keep, and the proof that today's history extends one.

The ledger alone is only self-consistent: an operator can rewrite an old event
and recompute every digest and chain hash after it, or drop the last events,
and `ledger verify` still passes. A checkpoint someone *kept* closes that: it
names a tree size and a Merkle root, and an RFC 9162 consistency proof,
computed over digests the verifier recomputed from the ledger, shows that
today's ledger extends it — or that it does not.

- The engine signs a checkpoint after every append (`issue`, under the
  session's turn lock) and keeps the latest one in
  DATA_DIR/sessions/<session>/checkpoint.json (docs/FORMAT.md §13), so every
  acknowledged event is under a signature. `latest` reads it.
- `parse_checkpoint` reads a kept one (a visitor's download, `--since FILE`).
- `prove_since` checks a kept checkpoint against the ledger today and returns
  a SinceReport (one row per check, like receipts.verify.Report).

The object is the one inside a receipt (`body["checkpoint"]`, built by
receipts.body.sign_checkpoint): {"body": {...}, "key_id": ..., "sig": ...}.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ledger.canonical import canonical_json, loads_strict
from ledger.event import HEX64_RE, SESSION_ID_RE, TS_RE, now_ts
from ledger.jsonnames import json_shown, json_type
from ledger.verify import erased_words
from receipts.body import CHECKPOINT_TYPE, KEY_ID_RE, RECEIPT_VERSION, checkpoint_bytes, decode_sig, sign_checkpoint
from receipts.keys import PublicKey, SigningKey
from receipts.merkle import ProofError, verify_consistency
from receipts.report import FAIL, NOT_VERIFIABLE, PASS, SELF_CONSISTENT, Check, Report, Rows
from receipts.stores import MerkleTree
from receipts.verify import LedgerFacts, describe_audit

CHECKPOINT_FILE = "checkpoint.json"
MAX_CHECKPOINT_BYTES = 64 * 1024
BODY_FIELDS = ("type", "v", "session", "tree_size", "root", "chain_head", "issued_at")
# rows that must pass for the kept checkpoint to be proved part of today's history
HISTORY_ROWS = ("kept.session", "ledger.chain", "kept.root", "kept.chain_head", "ledger.consistency")
ATTEMPTS = 5  # prove_since's tries when a writer moved between its two reads (see there)
REQUIRED = (*HISTORY_ROWS, "kept.signature", "current.signature", "current.ledger")


class MalformedCheckpoint(ValueError):
    """Not a well-formed v1 signed checkpoint (a parse error, not a failed check)."""

    def __init__(self, where: str, message: str, *, source: str = "checkpoint") -> None:
        super().__init__(f"malformed checkpoint ({source}): {where}: {message}")
        self.where = where
        self.source = source


# -- parsing (pure) --------------------------------------------------------------
def check_checkpoint_shape(obj: Any, *, source: str = "checkpoint") -> dict[str, Any]:
    """Return `obj` if it is exactly a v1 signed checkpoint object; else raise MalformedCheckpoint."""

    def bad(where: str, message: str) -> MalformedCheckpoint:
        return MalformedCheckpoint(where, message[:300], source=source)

    def fields(value: Any, where: str, keys: Sequence[str]) -> dict[str, Any]:
        if type(value) is not dict:
            raise bad(where, f"expected an object, found JSON {json_type(value)}")
        missing = [k for k in keys if k not in value]
        extra = [k for k in value if k not in keys]
        if missing or extra:
            raise bad(where, f"fields differ from format v1 (missing {missing}, unexpected {extra})")
        return value

    def text(value: Any, where: str, pattern: Any = None, max_len: int = 200) -> None:
        if type(value) is not str:
            raise bad(where, f"expected a string, found JSON {json_type(value)}")
        if len(value) > max_len or (pattern is not None and not pattern.fullmatch(value)):
            raise bad(where, f"{json_shown(value)} is not valid here")

    cp = fields(obj, "$", ("body", "key_id", "sig"))
    text(cp["key_id"], "key_id", KEY_ID_RE)
    text(cp["sig"], "sig")
    if decode_sig(cp["sig"]) is None:
        raise bad("sig", "not base64")
    b = fields(cp["body"], "body", BODY_FIELDS)
    if b["type"] != CHECKPOINT_TYPE:
        raise bad("body.type", f"expected {json_shown(CHECKPOINT_TYPE)}, found {json_shown(b['type'])}")
    if type(b["v"]) is not int or b["v"] != RECEIPT_VERSION:
        raise bad("body.v", f"checkpoint format version {json_shown(b['v'])} is unknown (this verifier knows {RECEIPT_VERSION})")
    text(b["session"], "body.session", SESSION_ID_RE)
    if type(b["tree_size"]) is not int or not 1 <= b["tree_size"] <= 2**53 - 1:
        raise bad("body.tree_size", f"expected an integer in 1..{2**53 - 1}, found {json_shown(b['tree_size'])}")
    text(b["root"], "body.root", HEX64_RE)
    text(b["chain_head"], "body.chain_head", HEX64_RE)
    text(b["issued_at"], "body.issued_at", TS_RE)
    return cp


def parse_checkpoint(raw: bytes, *, source: str = "checkpoint") -> dict[str, Any]:
    """Parse a kept checkpoint file (JSON, any whitespace). Raises MalformedCheckpoint, one line."""
    if not isinstance(raw, bytes):
        raise MalformedCheckpoint("$", f"expected bytes, found {type(raw).__name__}", source=source)
    if len(raw) > MAX_CHECKPOINT_BYTES:
        raise MalformedCheckpoint("$", f"{len(raw)} bytes is over the {MAX_CHECKPOINT_BYTES}-byte limit", source=source)
    if not raw.strip():
        raise MalformedCheckpoint("$", "empty file", source=source)
    try:
        obj = loads_strict(raw, "$")
    except ValueError as exc:  # CanonicalError, and anything else a hostile file provokes in a parser
        raise MalformedCheckpoint("$", str(exc).removeprefix("$: ")[:300], source=source) from None
    return check_checkpoint_shape(obj, source=source)


def checkpoint_file_bytes(checkpoint: Mapping[str, Any]) -> bytes:
    """What `checkpoint.json` holds (and `receipts checkpoint` prints): JCS(checkpoint) + newline."""
    return canonical_json(dict(checkpoint)) + b"\n"


def sign_tree(session: str, store: MerkleTree, chain_head: str, key: SigningKey) -> dict[str, Any]:
    """A signed checkpoint over the whole of `store` (pure apart from reading the tree)."""
    return sign_checkpoint(session=session, tree_size=store.size, root=store.root(store.size), chain_head=chain_head, issued_at=now_ts(), key=key)


# -- proving a kept checkpoint ------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SinceReport(Report):
    """Whether today's history extends a kept checkpoint. No truth value: read `.ok` or `.verdict`.

    `.ok`: nothing failed and every history row passed — the ledger today provably
    extends the kept checkpoint (its signature may still be unchecked).
    `.verdict`: "failed" (a check failed), "verified" (nothing failed and both
    the kept and the current checkpoint were signed by an independently trusted
    key), else "unverified".
    """

    session: str
    kept: dict[str, Any]
    current: dict[str, Any] | None
    events: int  # events the verifier recomputed in the ledger today
    proof: tuple[str, ...]  # consistency proof (hex) from the kept size to `events`
    checks: tuple[Check, ...]
    notes: tuple[str, ...] = ()  # what the auditor re-checked and what it took from its cache
    read_instead: ClassVar[str] = ".ok or .verdict"

    @property
    def required(self) -> tuple[str, ...]:
        return REQUIRED

    @property
    def ok(self) -> bool:
        return not self.failed and all(self.status_of(n) == PASS for n in HISTORY_ROWS)

    @property
    def kept_size(self) -> int:
        return int(self.kept["body"]["tree_size"])

    @property
    def message(self) -> str:
        """One plain sentence for a person."""
        m, n = self.kept_size, self.events
        row = {c.name: c for c in self.checks}
        if row["kept.session"].status == FAIL:
            return f"the checkpoint you kept is for session {self.kept['body']['session']}, not {self.session}"
        history = [row[name] for name in HISTORY_ROWS[1:] if row[name].status == FAIL]
        if history:
            chain = row["ledger.chain"]
            if n < m and chain.status == FAIL and chain.message.startswith(("chain broken", "the session's ledger was not read")):
                # an edited line stops the walk there: name it, rather than "the ledger holds fewer events"
                return f"this history changed since you last saw it: {chain.message}"
            if n < m:
                return f"this history changed since you last saw it: the ledger holds {n} events, fewer than the {m} in the checkpoint you kept"
            if row["ledger.chain"].status == FAIL and len(history) == 1:
                return f"the ledger no longer verifies after the checkpoint you kept: {row['ledger.chain'].message}"
            return f"this history changed since you last saw it: the ledger no longer extends the checkpoint of {m} events you kept"
        if row["kept.signature"].status == FAIL:
            return "the checkpoint you kept does not carry a valid signature by a trusted key"
        for name in ("current.signature", "current.ledger"):
            if row[name].status == FAIL:
                return f"history extends the checkpoint you kept ({m} → {n} events), but the current checkpoint is not sound: {row[name].message}"
        growth = f"history extends the checkpoint you kept ({m} → {n} events)"
        if self.verdict == "verified":
            return growth
        if row["current.signature"].status == NOT_VERIFIABLE and self.current is None:
            return growth + ", but the data directory holds no signed checkpoint of today's history"
        return growth + ", but no signature was checked against a key you trust"

    def to_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "verdict": self.verdict,
            "ok": self.ok,
            "message": self.message,
            "kept": self.kept,
            "current": self.current,
            "events": self.events,
            "consistency_proof": list(self.proof),
            "failed": len(self.failed),
            "not_verifiable": len(self.not_verifiable),
            "checks": [c.to_dict() for c in self.checks],
            "notes": list(self.notes),
        }


def _signature(r: Rows, name: str, what: str, cp: Mapping[str, Any], trusted: Sequence[PublicKey], own: PublicKey | None) -> None:
    sig = decode_sig(cp["sig"])
    data = checkpoint_bytes(cp["body"])
    if not trusted:
        if own is None:
            r.na(name, f"{what}: no trusted public key given (--trust PUBKEY)")
        elif own.key_id != cp["key_id"]:
            r.na(name, f"{what}: signed by {cp['key_id']}, not by the data directory's key {own.key_id}; no trusted key given")
        elif sig is not None and own.verify(sig, data):
            r.na(name, f"{what}: signature by {own.key_id} is valid — {SELF_CONSISTENT}")
        else:
            r.add(name, False, f"{what}: the signature is not valid under the key it names ({own.key_id}, from the data directory)", "a valid Ed25519 signature", "invalid signature", "sig")
        return
    key = next((k for k in trusted if k.key_id == cp["key_id"]), None)
    if key is None:
        r.add(name, False, f"{what}: signed by a key that is not trusted", ", ".join(k.key_id for k in trusted), cp["key_id"], "key_id")
        return
    ok = sig is not None and key.verify(sig, data)
    r.add(name, ok, f"{what}: signature by trusted key {key.key_id}", "a valid Ed25519 signature", "invalid signature", "sig")


def check_since(
    session: str,
    kept: Mapping[str, Any],
    facts: LedgerFacts,
    current: Mapping[str, Any] | MalformedCheckpoint | None,
    trusted: Sequence[PublicKey],
    own: PublicKey | None = None,
) -> SinceReport:
    """The checks (pure over `facts`, the auditor's recomputed view of the ledger).

    `own` is the data directory's public key: with no `trusted` key, signatures
    are checked against it for self-consistency only (never a pass).
    """
    r = Rows()
    kb = kept["body"]
    m, n = kb["tree_size"], facts.verified
    kept_root = bytes.fromhex(kb["root"])
    proof: list[bytes] = []
    _signature(r, "kept.signature", "the kept checkpoint", kept, trusted, own)
    same = kb["session"] == session
    r.add("kept.session", same, "the kept checkpoint is for this session", session, kb["session"], "body.session")
    brk = facts.first_break
    if not same:
        for name in HISTORY_ROWS[1:]:
            r.na(name, f"the kept checkpoint is for session {kb['session']}, not {session}")
    elif not facts.exists:
        for name in HISTORY_ROWS[1:]:
            r.add(name, False, f"the data directory has no session {session}", "the session's ledger", "no such session")
    elif facts.problem is not None:
        for name in HISTORY_ROWS[1:]:
            r.add(name, False, f"the session's ledger was not read: {facts.problem}", "a regular file", "refused")
    else:
        if brk is not None and n < m:
            r.add("ledger.chain", False, f"chain broken at line {brk.line} (seq {brk.seq}, {brk.kind}) before the kept size {m}: {brk.message}", brk.expected, brk.found)
        elif n < m:
            r.add("ledger.chain", False, f"the ledger holds {n} events, fewer than the {m} of the kept checkpoint: truncated", m, n)
        elif brk is not None:
            r.add("ledger.chain", False, f"chain broken at line {brk.line} (seq {brk.seq}, {brk.kind}), after the kept size {m}: {brk.message}", brk.expected, brk.found)
        else:
            erased = f"; {erased_words(facts.erased)}, each verified from its commitment" if facts.erased else ""
            r.add("ledger.chain", True, f"the ledger re-walks from genesis: {n} events, every digest and chain hash recomputed{erased} ({describe_audit(facts)})")
        if n < m:
            for name in ("kept.root", "kept.chain_head", "ledger.consistency"):
                r.add(name, False, f"the ledger is shorter than the kept checkpoint ({n} < {m} events): nothing to compare", m, n)
        else:
            root_then = facts.root_at(m).hex()
            r.add("kept.root", root_then == kb["root"], f"the ledger's Merkle root at size {m}, over recomputed digests, equals the kept root", kb["root"], root_then, "body.root")
            head_then = facts.event_at(m - 1).get("chain")
            r.add("kept.chain_head", head_then == kb["chain_head"], f"the chain hash of event {m - 1} equals the kept chain head", kb["chain_head"], head_then, "body.chain_head")
            try:
                proof = facts.consistency(m, n)
                verify_consistency(m, n, proof, kept_root, facts.root_at(n))
                r.add("ledger.consistency", True, f"RFC 9162 consistency proof ({len(proof)} hash{'' if len(proof) == 1 else 'es'}): the ledger today ({n} events) extends the kept checkpoint ({m})")
            except ProofError as exc:
                r.add("ledger.consistency", False, f"the ledger today ({n} events) does not extend the kept checkpoint ({m}): {exc}", kb["root"], getattr(exc, "found", None))
    _check_current(r, session, facts, current, trusted, own)
    cur = current if isinstance(current, Mapping) else None
    return SinceReport(session, dict(kept), None if cur is None else dict(cur), n, tuple(h.hex() for h in proof), tuple(r.rows), facts.notes)


def _check_current(
    r: Rows, session: str, facts: LedgerFacts, current: Mapping[str, Any] | MalformedCheckpoint | None, trusted: Sequence[PublicKey], own: PublicKey | None
) -> None:
    if isinstance(current, MalformedCheckpoint):
        r.add("current.signature", False, str(current), "a well-formed signed checkpoint", "malformed")
        r.na("current.ledger", "the current checkpoint could not be read")
        return
    if current is None:
        r.na("current.signature", "the data directory holds no signed checkpoint for this session yet")
        r.na("current.ledger", "no current checkpoint to compare with the ledger")
        return
    _signature(r, "current.signature", "the current checkpoint", current, trusted, own)
    cb = current["body"]
    size, n = cb["tree_size"], facts.verified
    problems = []
    if cb["session"] != session:
        problems.append(f"it names session {cb['session']}")
    elif not facts.exists:
        problems.append(f"the data directory has no session {session}")
    elif facts.problem is not None:
        problems.append(f"the session's ledger was not read: {facts.problem}")
    elif size > n:
        problems.append(f"it covers {size} events, the ledger verifies {n}: events were removed after it was signed")
    else:
        if size < n:
            problems.append(f"it covers {size} events, the ledger holds {n}: {n - size} events are under no signature")
        root = facts.root_at(size).hex()
        if root != cb["root"]:
            problems.append(f"its root {cb['root'][:16]}… is not the ledger's root {root[:16]}… at size {size}")
        head = facts.event_at(size - 1).get("chain")
        if head != cb["chain_head"]:
            problems.append(f"its chain head {cb['chain_head'][:16]}… is not event {size - 1}'s chain hash")
    r.add("current.ledger", not problems, f"the current signed checkpoint covers exactly the ledger today ({n} events)", "the ledger's size, root and chain head", "; ".join(problems))


LatestCheckpoint = Callable[[str], "dict[str, Any] | None"]  # a session's latest kept checkpoint (PgReceipts.latest_checkpoint)


__all__ = [
    "CHECKPOINT_FILE",
    "MAX_CHECKPOINT_BYTES",
    "MalformedCheckpoint",
    "SinceReport",
    "check_checkpoint_shape",
    "check_since",
    "checkpoint_file_bytes",
    "parse_checkpoint",
]
