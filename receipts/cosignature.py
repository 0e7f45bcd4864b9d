"""Witness cosignatures and trust policies for checkpoints as notes (c2sp.org/tlog-cosignature, c2sp.org/tlog-policy),
pure.

A witness that checked a checkpoint is consistent with every earlier one it saw of the same log (origin) adds a note
signature line of its own, an Ed25519 cosignature/v1::

    key hash  = SHA-256(witness name ‖ "\\n" ‖ 0x04 ‖ 32-byte public key)[:4]
    signature = base64(key hash ‖ u64 big-endian timestamp ‖ Ed25519(message))
    message   = "cosignature/v1\\n" ‖ "time <timestamp>\\n" ‖ the checkpoint's note text
    vkey      = <witness name>+<hex key hash>+base64(0x04 ‖ public key)

A policy (c2sp.org/tlog-policy) names the logs whose signature a checkpoint needs (one of them), the witnesses, groups
of them with a threshold (a number, `any`, `all`) and the quorum (a witness, a group, or `none`). `policy_rows` adds
one report row per witness of the policy (a pass: cosigned at <time>; not verifiable: no cosignature from it, which
only the quorum row judges; a fail: a line of its key that does not verify) and one for the quorum. Parsing raises MalformedNote; no I/O here (storage.common.witness talks to witnesses).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from receipts.keys import PublicKey, SigningKey
from receipts.note import (
    MalformedNote,
    Note,
    NoteSignature,
    NoteVerifier,
    b64,
    checkpoint_text,
    note_signature_rows,
    parse_checkpoint_text,
    parse_note,
    parse_vkey,
    read_vkey,
    signed_by,
    valid_name,
)
from receipts.note import key_hash as note_key_hash
from receipts.report import Check, Report, Rows

SIG_COSIGNATURE_V1 = 0x04
HEADER = "cosignature/v1\n"
MAX_TIMESTAMP = 2**63 - 1
MAX_POLICY_BYTES = 64 * 1024
NONE = "none"


@dataclass(frozen=True, slots=True)
class WitnessKey:
    """A witness's cosigner key: its name, 4-byte key hash, Ed25519 public key (and, in a policy, its short name and
    submission URL)."""

    name: str
    key_hash: int
    key: PublicKey
    label: str = ""  # the policy's name for it (`witness <label> <vkey> [<url>]`)
    url: str | None = None

    def vkey(self) -> str:
        return f"{self.name}+{self.key_hash:08x}+{b64(bytes([SIG_COSIGNATURE_V1]) + self.key.raw)}"


@dataclass(frozen=True, slots=True)
class Cosigned:
    """A valid cosignature by `witness`, made at `timestamp` (POSIX seconds)."""

    witness: WitnessKey
    timestamp: int

    @property
    def when(self) -> str:
        return datetime.fromtimestamp(self.timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def key_hash(name: str, public_raw: bytes) -> int:
    """The cosigner key hash: SHA-256(name ‖ "\\n" ‖ 0x04 ‖ public key)[:4], big-endian."""
    return note_key_hash(name, public_raw, SIG_COSIGNATURE_V1)


def witness_key(public: PublicKey, name: str, *, label: str = "", url: str | None = None) -> WitnessKey:
    if not valid_name(name):
        raise MalformedNote("witness key", f"name {name[:60]!r} is empty or holds a space or '+'")
    return WitnessKey(name, key_hash(name, public.raw), public, label, url)


def parse_witness_vkey(text: str, *, label: str = "", url: str | None = None) -> WitnessKey:
    """A cosigner verifier key `name+hash+base64(0x04 ‖ key)`; MalformedNote for anything else (a log's 0x01 key too)."""
    name, hash_, public = read_vkey(text, SIG_COSIGNATURE_V1, "witness key")
    return WitnessKey(name, hash_, public, label, url)


def message(text: str, timestamp: int) -> bytes:
    """What a cosigner signs: the header line, the time line, then the checkpoint's note text."""
    return (HEADER + f"time {timestamp}\n" + text).encode("utf-8")


def cosign(text: str, key: SigningKey, name: str, timestamp: int) -> NoteSignature:
    """A cosignature/v1 line over the note text `text` (what a witness returns; tests and vectors use it)."""
    if not 0 < timestamp <= MAX_TIMESTAMP:
        raise ValueError(f"timestamp {timestamp}: outside 1..2^63-1")
    w = witness_key(key.public_key, name)
    return NoteSignature(w.name, w.key_hash, timestamp.to_bytes(8, "big") + key.sign(message(text, timestamp)))


def cosigned_by(note: Note, w: WitnessKey) -> Cosigned | Literal[False] | None:
    """Cosigned: a line of `w` (same name and key hash) verifies; False: one is there and does not (or is not 8 + 64
    bytes); None: no line names `w`."""
    mine = [s for s in note.signatures if s.name == w.name and s.key_hash == w.key_hash]
    if not mine:
        return None
    best: Cosigned | None = None
    for s in mine:
        if len(s.sig) != 8 + 64:
            return False
        ts = int.from_bytes(s.sig[:8], "big")
        if not 0 < ts <= MAX_TIMESTAMP or not w.key.verify(s.sig[8:], message(note.text, ts)):
            return False
        if best is None or ts > best.timestamp:
            best = Cosigned(w, ts)
    return best


def with_cosignatures(note: Note, lines: Sequence[NoteSignature]) -> Note:
    """`note` with the signature lines in `lines` added after its own, each once, in the order given."""
    have = set(note.signatures)
    return Note(note.text, note.signatures + tuple(s for s in dict.fromkeys(lines) if s not in have))


# -- policies ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Group:
    name: str
    threshold: int  # how many members must be satisfied
    members: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Policy:
    """A parsed tlog-policy: the logs (any one must sign), the witnesses and groups by name, the quorum (or NONE)."""

    logs: tuple[NoteVerifier, ...]
    witnesses: Mapping[str, WitnessKey]
    groups: Mapping[str, Group] = field(default_factory=dict)
    quorum: str = NONE

    def satisfied(self, name: str, cosigned: set[str]) -> bool:
        """Whether witness or group `name` has witnessed, given the witnesses (by policy name) that cosigned."""
        if name == NONE:
            return True
        if name in self.witnesses:
            return name in cosigned
        g = self.groups[name]
        return sum(self.satisfied(m, cosigned) for m in g.members) >= g.threshold


def parse_policy(raw: bytes | str) -> Policy:
    """A tlog-policy file (c2sp.org/tlog-policy): `log <vkey> [<url>]`, `witness <name> <vkey> [<url>]`,
    `group <name> <N|any|all> <member>...`, `quorum <name|none>`; `#` comments and blank lines ignored.
    MalformedNote naming the line for anything else: an unknown keyword, a duplicate key or name, a group or quorum
    naming what no earlier line defined, a threshold out of range, no quorum line."""
    what = "policy"
    data = raw.encode("utf-8") if isinstance(raw, str) else raw
    if len(data) > MAX_POLICY_BYTES:
        raise MalformedNote(what, f"{len(data)} bytes is over the {MAX_POLICY_BYTES}-byte limit")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedNote(what, f"not UTF-8 (byte {exc.start})") from None
    logs: list[NoteVerifier] = []
    witnesses: dict[str, WitnessKey] = {}
    groups: dict[str, Group] = {}
    quorum: str | None = None
    keys_seen: set[bytes] = set()
    for n, line in enumerate(text.split("\n"), 1):
        words = line.replace("\t", " ").split(" ")
        words = [w for w in words if w]
        if not words or words[0].startswith("#"):
            continue
        kind, args = words[0], words[1:]

        def bad(msg: str, n: int = n) -> MalformedNote:
            return MalformedNote(what, f"line {n}: {msg}")

        if kind == "log":
            if len(args) not in (1, 2):
                raise bad("expected `log <vkey> [<url>]`")
            try:
                v = parse_vkey(args[0])
            except MalformedNote as exc:
                raise bad(str(exc)) from None
            if v.key.raw in keys_seen:
                raise bad("a key listed twice")
            keys_seen.add(v.key.raw)
            logs.append(v)
        elif kind == "witness":
            if len(args) not in (2, 3):
                raise bad("expected `witness <name> <vkey> [<url>]`")
            label = args[0]
            if label == NONE or label in witnesses or label in groups:
                raise bad(f"the name {label!r} is {'reserved' if label == NONE else 'defined twice'}")
            try:
                w = parse_witness_vkey(args[1], label=label, url=args[2] if len(args) == 3 else None)
            except MalformedNote as exc:
                raise bad(str(exc)) from None
            if w.key.raw in keys_seen:
                raise bad("a key listed twice")
            keys_seen.add(w.key.raw)
            witnesses[label] = w
        elif kind == "group":
            if len(args) < 3:
                raise bad("expected `group <name> <N|any|all> <member>...`")
            name, th, members = args[0], args[1], tuple(args[2:])
            if name == NONE or name in witnesses or name in groups:
                raise bad(f"the name {name!r} is {'reserved' if name == NONE else 'defined twice'}")
            unknown = [m for m in members if m not in witnesses and m not in groups]
            if unknown:
                raise bad(f"member {unknown[0][:60]!r} is not a witness or group defined above")
            if len(set(members)) != len(members):
                raise bad("a member listed twice")
            if th == "any":
                threshold = 1
            elif th == "all":
                threshold = len(members)
            elif th.isascii() and th.isdigit() and not (len(th) > 1 and th[0] == "0"):
                threshold = int(th)
                if not 1 <= threshold <= len(members):
                    raise bad(f"threshold {threshold} is not between 1 and the {len(members)} members")
            else:
                raise bad(f"threshold {th[:20]!r} is not a number, `any` or `all`")
            groups[name] = Group(name, threshold, members)
        elif kind == "quorum":
            if len(args) != 1:
                raise bad("expected `quorum <name>`")
            if quorum is not None:
                raise bad("a second quorum line")
            if args[0] != NONE and args[0] not in witnesses and args[0] not in groups:
                raise bad(f"quorum {args[0][:60]!r} is not a witness or group defined above")
            quorum = args[0]
        else:
            raise bad(f"unknown keyword {kind[:30]!r} (log, witness, group, quorum)")
    if quorum is None:
        raise MalformedNote(what, "no quorum line (`quorum none` for a policy without witnesses)")
    return Policy(tuple(logs), witnesses, groups, quorum)


def policy_rows(r: Rows, note: Note, policy: Policy) -> bool:
    """Rows for `note` under `policy`: one per witness (`witness.<name>`), then `witness.quorum`. Returns whether the
    quorum holds. (The log's own signature is checked by receipts.note.note_signature_rows over policy.logs.)"""
    cosigned: set[str] = set()
    for label, w in policy.witnesses.items():
        got = cosigned_by(note, w)
        row = f"witness.{label}"
        if got is None:
            r.na(row, f"{w.name} did not cosign this checkpoint (the quorum row says whether it was needed)", "witness")
        elif got is False:
            r.add(row, False, f"the cosignature by {w.name} does not verify", "a valid cosignature/v1", "invalid signature", "witness")
        else:
            cosigned.add(label)
            r.add(row, True, f"cosigned by {w.name} at {got.when}: it saw this tree head consistent with every earlier one of {note.text.split(chr(10), 1)[0][:120]}")
    ok = policy.satisfied(policy.quorum, cosigned)
    need = policy.quorum if policy.quorum == NONE or policy.quorum in policy.witnesses else _describe(policy, policy.quorum)
    if ok:
        r.add("witness.quorum", True, f"the policy's quorum holds ({need}; cosigned by {', '.join(sorted(cosigned)) or 'none needed'})")
    else:
        r.add("witness.quorum", False, f"the policy's quorum does not hold: it needs {need}", need, ", ".join(sorted(cosigned)) or "no witness", "witness")
    return ok


NOTE_REQUIRED = ("note.signature", "witness.quorum")


@dataclass(frozen=True, slots=True)
class CosignedReport(Report):
    """A checkpoint note checked under a policy: the log's signature, one row per witness, the quorum. No truth value:
    read `.verdict` ("verified" only when a policy log signed it and the quorum holds)."""

    origin: str
    tree_size: int
    checks: tuple[Check, ...]

    @property
    def required(self) -> tuple[str, ...]:
        return NOTE_REQUIRED

    def to_dict(self) -> dict[str, object]:
        return {"verdict": self.verdict, "origin": self.origin, "tree_size": self.tree_size, "checks": [c.to_dict() for c in self.checks]}


def check_cosigned(raw: bytes | str, policy: Policy, *, checkpoint: Mapping[str, Any] | None = None) -> CosignedReport:
    """A checkpoint as a signed note (with any cosignatures) under `policy`. MalformedNote when it is not one.

    `checkpoint`: a receipt's signed JSON checkpoint (§11 `{"body", "key_id", "sig"}`, from `receipts verify`'s receipt):
    a first row says whether the note is exactly that checkpoint (origin, size, root, chain head), so the witnesses'
    rows are about the tree head that receipt's proofs lead to."""
    note = parse_note(raw)
    cp = parse_checkpoint_text(note.text)
    r = Rows()
    if checkpoint is not None:
        want = checkpoint_text(checkpoint)
        same = want.encode() == note.text
        b = checkpoint["body"]
        r.add(
            "checkpoint.receipt",
            same,
            f"the note is the receipt's checkpoint: {b['tree_size']} events, root {str(b['root'])[:16]}…" if same else "the note is not the receipt's checkpoint",
            f"{want.origin} size {want.size}",
            f"{cp.origin[:120]} size {cp.size}",
            "checkpoint",
        )
    if policy.logs:
        signer = note_signature_rows(r, note, policy.logs)
        if signer is not None:  # a log's key name names the log: the origin is it, or one of its sessions under it
            ok = cp.origin == signer.name or cp.origin.startswith(signer.name + "/")
            r.add("checkpoint.origin", ok, f"the origin {cp.origin[:120]} is a log of {signer.name}" if ok else "the origin is not a log of the key that signed it", signer.name + "/…", cp.origin[:120], "origin")
    else:
        r.na("note.signature", "the policy names no log key (a `log <vkey>` line)")
    policy_rows(r, note, policy)
    return CosignedReport(cp.origin, cp.size, tuple(r.rows))


def _describe(policy: Policy, name: str) -> str:
    g = policy.groups[name]
    return f"{g.threshold} of {g.name} ({', '.join(g.members)})"


__all__ = [
    "Cosigned",
    "CosignedReport",
    "check_cosigned",
    "Group",
    "Policy",
    "WitnessKey",
    "cosign",
    "cosigned_by",
    "key_hash",
    "message",
    "parse_policy",
    "parse_witness_vkey",
    "policy_rows",
    "signed_by",
    "witness_key",
    "with_cosignatures",
]
