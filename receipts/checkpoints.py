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

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger import Ledger
from ledger.canonical import canonical_json, loads_strict
from ledger.event import HEX64_RE, SESSION_ID_RE, TS_RE, now_ts, validate_session_id
from ledger.fsmode import replace_durable
from ledger.jsonnames import json_shown, json_type
from ledger.verify import TORN_TAIL, erased_words
from receipts.audit import Auditor
from receipts.body import CHECKPOINT_TYPE, KEY_ID_RE, RECEIPT_VERSION, checkpoint_bytes, decode_sig, sign_checkpoint
from receipts.files import synced_tree
from receipts.keys import ENV_VAR, KeyConfigError, PublicKey, SigningKey, load_existing, parse_private_key
from receipts.ledger_copy import LineSource, ledger_dir
from receipts.merkle import ProofError, verify_consistency
from receipts.merkle_store import MerkleStore
from receipts.stores import MerkleTree
from receipts.verify import FAIL, NOT_VERIFIABLE, PASS, Check, LedgerFacts, describe_audit

CHECKPOINT_FILE = "checkpoint.json"
MAX_CHECKPOINT_BYTES = 64 * 1024
BODY_FIELDS = ("type", "v", "session", "tree_size", "root", "chain_head", "issued_at")
SELF_CONSISTENT = "self-consistent: key taken from the data directory, not independently trusted"
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


# -- the stored latest checkpoint (I/O) ------------------------------------------
def checkpoint_path(data_dir: str | os.PathLike[str], session: str) -> Path:
    return Path(data_dir) / "sessions" / validate_session_id(session) / CHECKPOINT_FILE


def latest(data_dir: str | os.PathLike[str], session: str) -> dict[str, Any] | None:
    """The session's latest signed checkpoint, or None if none was issued yet.

    Raises MalformedCheckpoint (naming the file) when the stored one is not a
    well-formed checkpoint of this session, OSError when it cannot be read.
    """
    path = checkpoint_path(data_dir, session)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError:
        if not path.is_symlink():
            raise
        raise MalformedCheckpoint("$", "is a symbolic link, not a file", source=str(path)) from None
    try:
        raw = os.read(fd, MAX_CHECKPOINT_BYTES + 1)
    finally:
        os.close(fd)
    cp = parse_checkpoint(raw, source=str(path))
    if cp["body"]["session"] != session:
        raise MalformedCheckpoint("body.session", f"names session {cp['body']['session']!r}, not {session!r}", source=str(path))
    return cp


def keep(data_dir: str | os.PathLike[str], session: str, checkpoint: Mapping[str, Any]) -> Path:
    """Write the latest checkpoint durably (temp file, fsync, rename, fsync of the folder), 0600."""
    path = checkpoint_path(data_dir, session)
    replace_durable(path, checkpoint_file_bytes(checkpoint))
    return path


def sign_tree(session: str, store: MerkleTree, chain_head: str, key: SigningKey) -> dict[str, Any]:
    """A signed checkpoint over the whole of `store` (pure apart from reading the tree)."""
    return sign_checkpoint(session=session, tree_size=store.size, root=store.root(store.size), chain_head=chain_head, issued_at=now_ts(), key=key)


def issue(data_dir: str | os.PathLike[str], ledger: Ledger, session: str, key: SigningKey, *, store: MerkleStore | None = None) -> dict[str, Any]:
    """Sign a checkpoint over the session as it is now and keep it as the latest.

    The caller holds the session's turn lock (receipts.files.session_turn_lock)
    and has just appended. `store`, when given, is the producer's tree already
    brought level with the ledger (files.synced_tree); otherwise it is opened here.
    """
    count, head = ledger.head(session)
    if count == 0:
        raise ValueError(f"session {session}: no events to sign a checkpoint over")
    own = store is None
    tree = synced_tree(Path(data_dir), ledger, session) if store is None else store
    try:
        if tree.size != count:
            raise ValueError(f"session {session}: Merkle tree holds {tree.size} leaves, the ledger {count} events")
        cp = sign_tree(session, tree, head, key)
    finally:
        if own:
            tree.close()
    keep(data_dir, session, cp)
    return cp


# -- proving a kept checkpoint ------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SinceReport:
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

    def __bool__(self) -> bool:
        raise TypeError("SinceReport has no truth value; read .ok or .verdict")

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == FAIL]

    @property
    def not_verifiable(self) -> list[Check]:
        return [c for c in self.checks if c.status == NOT_VERIFIABLE]

    def _status(self, name: str) -> str | None:
        return next((c.status for c in self.checks if c.name == name), None)

    @property
    def ok(self) -> bool:
        return not self.failed and all(self._status(n) == PASS for n in HISTORY_ROWS)

    @property
    def verdict(self) -> str:
        if self.failed:
            return "failed"
        if all(self._status(n) == PASS for n in REQUIRED):
            return "verified"
        return "unverified"

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


class _Rows:
    def __init__(self) -> None:
        self.rows: list[Check] = []

    def add(self, name: str, ok: bool, message: str, expected: object = None, found: object = None, where: str | None = None) -> None:
        exp = None if ok or expected is None else str(expected)
        fnd = None if ok or found is None else str(found)
        self.rows.append(Check(name, PASS if ok else FAIL, message, exp, fnd, where))

    def na(self, name: str, message: str) -> None:
        self.rows.append(Check(name, NOT_VERIFIABLE, message))


def _signature(r: _Rows, name: str, what: str, cp: Mapping[str, Any], trusted: Sequence[PublicKey], own: PublicKey | None) -> None:
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
    r = _Rows()
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
    r: _Rows, session: str, facts: LedgerFacts, current: Mapping[str, Any] | MalformedCheckpoint | None, trusted: Sequence[PublicKey], own: PublicKey | None
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


def existing_key(data_dir: str | os.PathLike[str]) -> SigningKey | None:
    """The data directory's signing key if one exists (receipts.keys.load_existing): never creates one."""
    return load_existing(data_dir)


def _data_dir_public_key(data_dir: Path) -> PublicKey | None:
    """The data directory's own public key, for a self-consistency check only (never trusted).

    Read-only, and never the private key file: `RECEIPT_SIGNING_KEY` when set
    (the app's key), else the keys folder's `signing.pub` (receipts.api.data_dir_key).
    """
    from receipts.api import data_dir_key

    try:
        env = os.environ.get(ENV_VAR)
        if env is not None:
            return parse_private_key(env).public_key
        return data_dir_key(data_dir)
    except (KeyConfigError, OSError, ValueError):
        return None


LatestCheckpoint = Callable[[str], "dict[str, Any] | None"]  # a session's latest kept checkpoint (PgReceipts.latest_checkpoint)


def _read_latest(data: Path, session: str, read: LatestCheckpoint | None = None) -> dict[str, Any] | MalformedCheckpoint | None:
    try:
        return latest(data, session) if read is None else read(session)
    except MalformedCheckpoint as exc:
        return exc


def prove_since(
    data_dir: str | os.PathLike[str],
    session: str,
    kept: Mapping[str, Any],
    trusted: Sequence[PublicKey],
    *,
    full: bool = False,
    source: LineSource | None = None,
    read_latest: LatestCheckpoint | None = None,
) -> SinceReport:
    """Prove (or disprove) that the session's ledger today extends the kept checkpoint.

    Re-walks the ledger through the auditor (receipts.audit: every digest
    recomputed; roots and proofs over those digests, never the producer's tree)
    and compares the latest signed checkpoint with it. `kept` must have passed
    parse_checkpoint/check_checkpoint_shape. With no `trusted` key the
    signatures are checked against the data directory's own key, for
    self-consistency only, and the verdict is never "verified".

    `source` and `read_latest`: the ledger and its checkpoints are kept there (PostgreSQL: the PgLedger, whose
    lines are audited from a private copy, and PgReceipts.latest_checkpoint); `data_dir` then only holds the key.
    """
    validate_session_id(session)
    check_checkpoint_shape(kept)
    data = Path(data_dir)
    own = None if trusted else _data_dir_public_key(data)
    report: SinceReport | None = None
    # A writer appends, then signs its checkpoint (under the turn lock, which a
    # verifier does not take: it must not block turns or write a lock file). So
    # the checkpoint read just before the ledger is walked and the one read just
    # after bracket it; use whichever covers exactly what was walked, and retry
    # briefly when neither does, so an honest concurrent append is not reported
    # as events under no signature (nor its half-written last line as a torn
    # tail). A tampered ledger fails the same way each try.
    for attempt in range(ATTEMPTS):
        before = _read_latest(data, session, read_latest)
        with ledger_dir(data, session, source) as where, Auditor.of(where, full=full).facts(session) as facts:
            after = _read_latest(data, session, read_latest)
            n = facts.verified
            current = next((c for c in (after, before) if isinstance(c, dict) and c["body"]["tree_size"] == n), after)
            report = check_since(session, kept, facts, current, trusted, own)
            # a last line caught half-written by a writer is a torn tail only if it stays so
            in_flight = facts.first_break is not None and facts.first_break.kind == TORN_TAIL
        if not in_flight and (not isinstance(current, dict) or current["body"]["tree_size"] == n):
            break
        time.sleep(0.02 * (attempt + 1))
    assert report is not None
    return report


__all__ = [
    "CHECKPOINT_FILE",
    "MAX_CHECKPOINT_BYTES",
    "MalformedCheckpoint",
    "SinceReport",
    "check_checkpoint_shape",
    "check_since",
    "checkpoint_file_bytes",
    "checkpoint_path",
    "existing_key",
    "issue",
    "keep",
    "latest",
    "parse_checkpoint",
    "prove_since",
]
