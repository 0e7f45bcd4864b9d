"""Witnessed checkpoints in a bundle (docs/FORMAT.md §21.1): `notes/<size>.note` members, pure.

A session whose turns witnesses cosigned (§22.1) has receipts carrying those cosignatures. Its bundle carries each
witnessed tree head once as a C2SP signed note: the checkpoint text (§22), the log's signature (the exporter's key,
which signed the JSON checkpoint) and every cosignature line the session's receipts carry for that text. A bundle
of a session no witness cosigned has no such member, so its bytes are what they were before this addition.

`bundle verify` (and `--policy FILE`) checks each one: `note <size>.tree_head` (the note's origin, size, root and
chain head are the bundle ledger's first <size> events, recomputed), `note <size>.signature` (a trusted key, or the
bundle's own for self-consistency, signed it), then under a policy one row per witness and the quorum
(`note <size>.witness.<name>`, `note <size>.witness.quorum`); without a policy the tree_head row says how many
cosignatures are there, unjudged (as `receipts verify` says a receipt's: the verdict is the same as without them).
Under a policy whose quorum is not `none`, a bundle with no witnessed note fails `witness.quorum`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from receipts.body import RECEIPT_VERSION_2, MalformedReceipt, parse_receipt
from receipts.cosignature import NONE, Policy, policy_rows
from receipts.keys import PublicKey, SigningKey
from receipts.note import (
    CheckpointText,
    MalformedNote,
    Note,
    NoteSignature,
    NotSigned,
    b64,
    b64decode,
    checkpoint_text,
    note_signature_rows,
    origin,
    parse_checkpoint_text,
    parse_note,
    sign_checkpoint_note,
    verifier,
)
from receipts.report import Rows

FOLDER = "notes"
NOTE_RE = re.compile(r"notes/(0|[1-9][0-9]{0,19})\.note")


def note_name(size: int) -> str:
    return f"{FOLDER}/{size}.note"


class NoteCollector:
    """The witnessed tree heads of a session's receipts, fed one receipt at a time (the exporter reads each once)."""

    def __init__(self, key: SigningKey) -> None:
        self.key = key
        self._by_size: dict[int, tuple[dict[str, Any], list[NoteSignature]]] = {}

    def add(self, raw: bytes) -> None:
        """Keep the cosignature lines of the receipt `raw` (a format-2 receipt with `witnesses`; any other is skipped)."""
        try:
            receipt = parse_receipt(raw)
        except MalformedReceipt:
            return  # a stored receipt that does not parse: its own row says so in `bundle verify`
        body = receipt.signed_body
        if receipt.format != RECEIPT_VERSION_2 or "witnesses" not in body:
            return
        cp = body["checkpoint"]
        size = int(cp["body"]["tree_size"])
        kept = self._by_size.setdefault(size, (cp, []))
        if checkpoint_text(kept[0]) != checkpoint_text(cp):
            return  # another tree head of the same size: not this log's history (its receipt's row fails)
        for c in body["witnesses"]["cosignatures"]:
            sig = b64decode(c["sig"])
            if sig is not None and len(sig) == 4 + 8 + 64:
                line = NoteSignature(c["name"], int.from_bytes(sig[:4], "big"), sig[4:])
                if line not in kept[1]:
                    kept[1].append(line)

    def members(self) -> list[tuple[str, bytes]]:
        """(member name, the signed note with its cosignatures) per witnessed tree head, by size; a checkpoint this
        key did not sign is left out (a note is only ever the key's own claim, receipts.note.sign_checkpoint_note)."""
        out = []
        for size, (cp, lines) in sorted(self._by_size.items()):
            if not lines:
                continue
            try:
                signed = parse_note(sign_checkpoint_note(cp, self.key))
            except NotSigned:
                continue
            note = Note(signed.text, signed.signatures + tuple(lines))
            out.append((note_name(size), note.encode().encode("utf-8")))
        return out


def check_notes(
    r: Rows,
    notes: Sequence[tuple[str, bytes]],
    *,
    session: str,
    verified: int,
    root_at: Callable[[int], bytes],
    chain_at: Callable[[int], str | None],
    trusted: Sequence[PublicKey],
    own: Sequence[PublicKey],
    policy: Policy | None,
) -> None:
    """Rows for the bundle's `notes/<size>.note` members against its ledger (`verified` events; `root_at(n)` the root
    of the first n recomputed digests, `chain_at(n)` the chain hash of event n - 1), under `policy` when given."""
    if not notes and policy is not None:
        need = policy.quorum
        if need == NONE:
            r.add("witness.quorum", True, "the policy needs no witness (quorum none)")
        else:
            r.add("witness.quorum", False, "the bundle carries no witnessed checkpoint (notes/<size>.note), and the policy needs one", f"a checkpoint cosigned by {need}", "none", "notes/")
        return
    for name, raw in notes:
        size = int(name.removeprefix(FOLDER + "/").removesuffix(".note"))
        row = f"note {size}"
        try:
            note = parse_note(raw)
            cp = parse_checkpoint_text(note.text)
        except MalformedNote as exc:
            r.add(f"{row}.tree_head", False, f"{name}: {exc}", "a checkpoint as a signed note", "malformed", name)
            continue
        keys = list(trusted) or list(own)
        logs = {verifier(k).name for k in keys}
        lines = sum(1 for s in note.signatures if s.name not in logs)
        said = f"; {lines} cosignature line(s), checked below" if policy is not None else f"; {lines} cosignature line(s), not checked: give --policy FILE"
        _tree_head(r, row, name, cp, size, session, verified, root_at, chain_at, trusted, own, said)
        signer = note_signature_rows(r, note, [verifier(k) for k in keys], name=f"{row}.signature")
        if signer is not None and not trusted:  # self-consistent only: the key the bundle carries signed it
            r.rows.pop()  # its pass row says "trusted": replaced by what it is
            r.na(f"{row}.signature", f"signed by {signer.name}, the key the bundle carries: self-consistent, but no --trust key was given")
        if policy is None:  # said, not judged (as for a receipt): the tree_head row names them
            continue
        if policy.logs:
            ok = signer is not None and any(v.key.raw == signer.key.raw for v in policy.logs)
            r.add(f"{row}.witness.log", ok, "the note is signed by a log the policy names" if ok else "the note's signer is not a log of the policy",
                  ", ".join(f"{v.name}+{v.key_hash:08x}" for v in policy.logs), None if signer is None else signer.name, name)
        sub = Rows()
        policy_rows(sub, note, policy)
        for c in sub.rows:
            r.take(f"{row}.{c.name}", c)


def _tree_head(
    r: Rows, row: str, name: str, cp: CheckpointText, size: int, session: str, verified: int,
    root_at: Callable[[int], bytes], chain_at: Callable[[int], str | None],
    trusted: Sequence[PublicKey], own: Sequence[PublicKey], cosignatures: str,
) -> None:
    wanted = {origin(k.key_id, session) for k in [*trusted, *own]}
    problems = []
    if cp.size != size:
        problems.append(f"its size is {cp.size}, its member name says {size}")
    elif not 0 < size <= verified:
        problems.append(f"its size {size} is not within the ledger's {verified} events")
    else:
        if cp.root != root_at(size):
            problems.append(f"its root is not the root of the ledger's first {size} events")
        if cp.chain_head != chain_at(size):
            problems.append(f"its chain head is not the chain hash of event {size - 1}")
    if cp.origin not in wanted:
        problems.append(f"its origin {cp.origin[:120]} is not session {session}'s log under the bundle's key")
    if problems:
        r.add(f"{row}.tree_head", False, f"{name}: " + "; ".join(problems), f"the tree head of the ledger's first {size} events", f"{cp.origin[:120]} size {cp.size} root {b64(cp.root)}", name)
    else:
        r.add(f"{row}.tree_head", True, f"the witnessed tree head is the bundle ledger's first {size} events (root and chain head recomputed){cosignatures}")


__all__ = ["FOLDER", "NOTE_RE", "NoteCollector", "check_notes", "note_name"]
