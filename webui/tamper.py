""" "Tamper with it": a copy of a receipt with exactly one byte changed (pure).

The byte is changed where it means something — a memory's text, the answer,
the question, the signed Merkle root, or the signature — so the report shows
which checks notice. Text edits change one byte of the *signed payload* (the
JCS body inside the DSSE envelope; the base64 around it then differs in a few
characters); the signature edit changes one byte of the signature itself. In a
format-2 receipt the texts are disclosures beside the envelope (docs/FORMAT.md
§15): a text edit changes one byte of the file there, which the signature does
not cover, and the check that opens the signed commitment catches it.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from ledger.canonical import canonical_json
from receipts.body import MalformedReceipt, parse_receipt

# target -> label shown in the UI
TARGETS: dict[str, str] = {
    "memory": "a memory's text (what the model was handed)",
    "response": "the answer text",
    "query": "the question text",
    "root": "the signed Merkle root",
    "signature": "the envelope signature",
}
DEFAULT_TARGET = "memory"
_PATHS: dict[str, tuple[str | int, ...]] = {
    "memory": ("memories", 0, "event", "text"),
    "response": ("response", "event", "text"),
    "query": ("query", "event", "text"),
    "root": ("checkpoint", "body", "root"),
}
_HEX = "0123456789abcdef"


class TamperError(ValueError):
    """This receipt offers no byte to change for that target."""


@dataclass(frozen=True, slots=True)
class Tampered:
    raw: bytes  # the tampered receipt file
    target: str
    where: str  # path of the changed value in the body, a memory named by rank ("memory#1.event.text")
    offset: int  # byte offset in `part`
    before: str
    after: str
    note: str | None = None  # e.g. why another target was used
    part: str = "signed payload"  # what `offset` counts in: the signed payload, the decoded signature, the receipt file


def tamper(raw: bytes, target: str = DEFAULT_TARGET) -> Tampered:
    """Raises MalformedReceipt for a non-receipt, TamperError when the target has nothing to change — and nothing
    else: a receipt this code cannot place one changed byte in is a TamperError with one line (issue 28 §7)."""
    try:
        return _tamper(raw, target)
    except (TamperError, MalformedReceipt):
        raise
    except (KeyError, IndexError, TypeError, ValueError) as exc:  # parse_receipt passed, yet the shape surprised us
        raise TamperError(
            f"tamper: this receipt has no byte that can be changed for {TARGETS.get(target, target)[:60]} "
            f"({type(exc).__name__}); pick another target"
        ) from None


def _tamper(raw: bytes, target: str) -> Tampered:
    if target not in TARGETS:
        raise TamperError(f"tamper: unknown target {target[:40]!r}; choose one of {', '.join(TARGETS)}")
    receipt = parse_receipt(raw)
    envelope: dict[str, Any] = json.loads(raw)
    note = None
    if target == "memory" and not receipt.body["memories"]:
        target, note = "response", "this receipt cites no memories, so the answer text was changed instead"
    if target == "signature":
        return _tamper_signature(envelope, note)
    if receipt.format == 2 and target in ("memory", "response", "query"):
        return _tamper_disclosure(envelope, receipt.signed_body, target, note)
    return _tamper_payload(envelope, receipt.envelope.payload, receipt.signed_body, target, note)


def _tamper_disclosure(file: dict[str, Any], body: dict[str, Any], target: str, note: str | None) -> Tampered:
    """Format 2: one byte of a cited event's disclosed text, in the receipt file (outside the signature)."""
    path = _PATHS[target][:-1]
    ev: Any = body
    for step in path:
        ev = ev[step]
    seq = ev["seq"]
    disclosure = next((d for d in file["disclosures"] if d["seq"] == seq), None)
    if disclosure is None:
        raise TamperError(f"tamper: the text of seq {seq} is withheld from this copy; pick another target")
    before_file = _dump(file)
    value: str = disclosure["text"]
    i, new_char = _pick(value, hex_only=False)
    disclosure["text"] = value[:i] + new_char + value[i + 1 :]
    after_file = _dump(file)
    diffs = [n for n, (a, b) in enumerate(zip(before_file, after_file, strict=False)) if a != b]
    if len(before_file) != len(after_file) or len(diffs) != 1:
        raise TamperError("tamper: changing that value would change more than one byte")
    where = f"{_where(path[:-1])}.disclosure.text, character {i + 1}"  # memory#1.disclosure.text
    part = "receipt file (a disclosure beside the envelope: the signature does not cover it)"
    return Tampered(after_file, target, where, diffs[0], value[i], new_char, note, part)


def _tamper_signature(envelope: dict[str, Any], note: str | None) -> Tampered:
    sigs = envelope.get("signatures") or []
    if not sigs:
        raise TamperError("tamper: the envelope carries no signature to change")
    encoded = sigs[0].get("sig") if isinstance(sigs[0], dict) else None
    if not isinstance(encoded, str) or not encoded:
        raise TamperError("tamper: the envelope's signature is empty: there is no byte of it to change")
    urlsafe = "-" in encoded or "_" in encoded
    sig = bytearray(base64.urlsafe_b64decode(encoded) if urlsafe else base64.b64decode(encoded))
    if not sig:
        raise TamperError("tamper: the envelope's signature is empty: there is no byte of it to change")
    before = sig[0]
    sig[0] ^= 0x01
    sigs[0]["sig"] = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(bytes(sig)).decode("ascii")
    return Tampered(_dump(envelope), "signature", "signatures[0].sig", 0, f"0x{before:02x}", f"0x{sig[0]:02x}", note, "decoded signature")


def _tamper_payload(
    envelope: dict[str, Any], payload: bytes, body: dict[str, Any], target: str, note: str | None
) -> Tampered:
    if canonical_json(body) != payload:
        raise TamperError("tamper: the payload is not in canonical form, so one changed byte cannot be placed exactly")
    path = _PATHS[target]
    parent: Any = body
    for step in path[:-1]:
        parent = parent[step]
    value: str = parent[path[-1]]
    i, new_char = _pick(value, hex_only=target == "root")
    parent[path[-1]] = value[:i] + new_char + value[i + 1 :]
    changed = canonical_json(body)
    diffs = [n for n, (a, b) in enumerate(zip(payload, changed, strict=False)) if a != b]
    if len(changed) != len(payload) or len(diffs) != 1:
        raise TamperError("tamper: changing that value would change more than one byte")
    urlsafe = "-" in envelope["payload"] or "_" in envelope["payload"]
    envelope["payload"] = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(changed).decode("ascii")
    where = _where(path)
    return Tampered(_dump(envelope), target, f"{where}, character {i + 1}", diffs[0], value[i], new_char, note)


def _where(path: tuple[str | int, ...]) -> str:
    """A path in the receipt body, written the way the checks name it: memories[i] is memory#(i+1), its rank."""
    if path[0] == "memories":
        return ".".join([f"memory#{int(path[1]) + 1}", *map(str, path[2:])])
    return ".".join(map(str, path))


def _pick(value: str, *, hex_only: bool) -> tuple[int, str]:
    """The first character whose replacement is one byte in canonical JSON, and that replacement."""
    for i, c in enumerate(value):
        if hex_only and c in _HEX:
            return i, _HEX[(_HEX.index(c) + 1) % 16]
        if not hex_only and c.isascii() and c.isalnum():
            if c.isdigit():
                return i, str((int(c) + 1) % 10)
            return i, c.swapcase()
    raise TamperError("tamper: that value has no plain letter or digit to change; pick another target")


def _dump(envelope: dict[str, Any]) -> bytes:
    # The same layout storage.files.receipts.files.write_receipt uses.
    return (json.dumps(envelope, indent=2, sort_keys=True) + "\n").encode("utf-8")
