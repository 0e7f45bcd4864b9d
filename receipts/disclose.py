"""Format-2 receipts: disclosures, what they open, and redaction (pure).

A format-2 receipt signs each cited event in erased form — its hashed fields
and `commit` (docs/FORMAT.md §4.1) — and carries the event's text, meta and
salt beside the DSSE envelope as a *disclosure* (the idea of SD-JWT, RFC 9901):
`{"seq", "salt", "text", "meta"}`, at most one per cited seq. A verifier opens
the commitment with it; a copy without it (redacted: :func:`redact`) still has a
valid signature, and its digest, chain link and inclusion still check from the
commitment alone (docs/FORMAT.md §15).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ledger.canonical import CanonicalError, dumps_unchecked, loads_strict
from ledger.event import SALT_BYTES, EventError, check_meta, check_sizes, content_commitment, event_digest
from receipts.body import RECEIPT_VERSION_2, MalformedReceipt, cited_events, dump_file, parse_receipt

_LABEL = re.compile(r"memory#(\d+)")


class RedactError(ValueError):
    """This receipt cannot be redacted (format 1 signs its texts whole)."""


def label(name: str) -> str:
    """A cited event's name in words: "the question", "memory 3", "the answer"."""
    m = _LABEL.fullmatch(name)
    if m:
        return f"memory {m.group(1)}"
    return {"query": "the question", "response": "the answer"}.get(name, name)


def held_message(name: str, seq: int, state: str, tail: str = "") -> str:
    """Why a cited event's content was not checked: withheld from this copy, or erased from the ledger too."""
    if state == "erased":
        head = f"{label(name)} (seq {seq}) was erased: this copy carries no disclosure and the ledger keeps only its commitment"
    else:
        head = f"{label(name)} (seq {seq}) was withheld from this copy: it carries no disclosure of its text"
    return f"{head}; {tail}" if tail else head


def is_erased_line(stored: Mapping[str, Any]) -> bool:
    """Whether a stored ledger line (its parsed fields) is in erased form (FORMAT.md §4.1): `commit`, no text."""
    return "commit" in stored and "text" not in stored


def digest_from_commit(ev: Mapping[str, Any]) -> bytes:
    """A format-2 signed event's digest, recomputed from its hashed fields and `commit` (never from text)."""
    try:
        return event_digest(
            session=ev["session"], seq=ev["seq"], event_id=ev["id"], role=ev["role"], ts=ev["ts"], commit=bytes.fromhex(ev["commit"])
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise EventError(f"cannot recompute digest: {exc}") from None


def open_commitment(disclosure: Mapping[str, Any]) -> str:
    """hex of the commitment a disclosure opens: sha256(TAG_CONTENT || salt || JCS({meta, text})).

    Raises EventError for a disclosure the ledger could not have written (meta outside
    the domain or too deep, text or meta over its size limit, a lone surrogate)."""
    salt = bytes.fromhex(disclosure["salt"])
    if len(salt) != SALT_BYTES:
        raise EventError(f"salt: must be {SALT_BYTES} bytes")
    meta, text = disclosure["meta"], disclosure["text"]
    try:
        check_meta(meta)
        meta_bytes = dumps_unchecked(meta, "meta")
    except CanonicalError as exc:
        raise EventError(str(exc)) from None
    check_sizes(text, meta_bytes)
    return content_commitment(salt, text, meta, meta_bytes).hex()


def content_problem(ev: Mapping[str, Any], disclosure: Mapping[str, Any], receipt_id: str | None = None) -> tuple[str, str, str] | None:
    """None when the disclosure opens the signed event's commitment (and, given `receipt_id`, its meta
    names that receipt: the answer's); else (message, expected, found)."""
    try:
        opened = open_commitment(disclosure)
    except EventError as exc:
        return f"the disclosure cannot open a commitment: {exc}", ev["commit"], "error"
    if opened != ev["commit"]:
        return "the disclosed text, meta or salt does not recompute the signed commitment", ev["commit"], opened
    if receipt_id is not None and disclosure["meta"].get("receipt_id") != receipt_id:
        return "the answer's disclosed meta does not name this receipt", receipt_id, str(disclosure["meta"].get("receipt_id"))
    return None


# -- the public functions (exported by the receipts package) -------------------------------------
def receipt_format(raw: bytes) -> int:
    """1 or 2: the format of a well-formed receipt file. Raises MalformedReceipt."""
    return parse_receipt(raw).format


def cited_seqs(raw: bytes) -> dict[int, str]:
    """seq -> "query", "memory#N" (N = rank) or "response", for every event the receipt cites. Raises MalformedReceipt."""
    return {ev["seq"]: name for name, ev in cited_events(parse_receipt(raw).signed_body)}


def withheld_seqs(raw: bytes) -> list[int]:
    """The cited seqs this copy carries no disclosure for (always [] for format 1). Raises MalformedReceipt."""
    receipt = parse_receipt(raw)
    if receipt.format != RECEIPT_VERSION_2:
        return []
    return sorted(seq for seq in cited_seqs(raw) if seq not in receipt.disclosures)


def redact(raw: bytes, seqs: Iterable[int]) -> bytes:
    """The receipt file without the disclosures of `seqs`; the envelope (and so its signature) is untouched.

    A seq the receipt does not cite, or already withholds, is ignored. Raises MalformedReceipt
    for a file that is not a receipt, RedactError for a format-1 receipt (its texts are signed).
    The result is written in the layout of storage.files.receipts.files.write_receipt.
    """
    receipt = parse_receipt(raw)
    if receipt.format != RECEIPT_VERSION_2:
        raise RedactError(
            f"receipt {receipt.receipt_id} is format {receipt.format}: its texts are inside the signature, "
            "so none can be withheld (delete the receipt instead)"
        )
    drop = set()
    for seq in seqs:
        if type(seq) is not int:
            raise RedactError(f"redact: seq {seq!r} is not an integer")
        drop.add(seq)
    obj = loads_strict(raw, "$", allow_floats=True)
    obj["disclosures"] = [d for d in obj["disclosures"] if d["seq"] not in drop]
    out = dump_file(obj)
    try:
        parse_receipt(out)
    except MalformedReceipt as exc:  # cannot happen for a file that parsed: fail closed rather than write it
        raise RedactError(f"redact: the redacted copy would not parse ({exc})") from None
    return out
