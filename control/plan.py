"""Which events and receipts an erasure touches (pure).

Named events are erased; with the cascade, so is every assistant answer whose
receipt cited an erased event (its text may repeat the memory — the offline
stand-in quotes it), and again for the answers that cited those, until nothing
changes. A user message is erased only when named. Stored receipts that cite an
erased event are redacted (format 2: the disclosure is dropped, the signature
still verifies) or, for format 1 (the text is inside the signed payload),
withdrawn: deleted and listed in the certificate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from control import quoting
from ledger.erasing import MAX_ERASE

MAX_FORGET = MAX_ERASE  # events one forget erases, named and cascaded together (storage.files.ledger.store.MAX_ERASE)


# A reason (kept for good) must not repeat a word or number of what it names, however spelled: control.quoting.
QUOTE_LETTERS_MIN = quoting.QUOTE_LETTERS_MIN  # a reason's word this long (stemmed, stop words aside) the text holds
QUOTE_DIGITS_MIN = quoting.QUOTE_DIGITS_MIN  # and a number this long: a PIN, a phone number's group, a code
quoted = quoting.quoted


class PlanError(ValueError):
    """The request cannot be carried out; nothing was changed. One line, naming the seq or session."""


class Slot(NamedTuple):
    """What the plan needs to know of one ledger event."""

    seq: int
    role: str
    erased: bool  # already in erased form
    record: bool  # an erasure record (never erased)
    control: bool = False  # a control record (revoke/restore §17, supersession §19): never erased, the state derives from it


@dataclass(frozen=True, slots=True)
class Citation:
    """One stored receipt: which seqs it cites (query, memories, response) and its answer's seq."""

    receipt_id: str
    format: int
    response_seq: int
    cited: dict[int, str]  # seq -> "query" / "memory#N" / "response"


@dataclass(frozen=True, slots=True)
class Plan:
    session: str
    named: tuple[int, ...]
    cascaded: tuple[int, ...]  # assistant answers erased because their receipt cited an erased event
    erase: tuple[int, ...]  # named + cascaded, in order
    roles: dict[int, str]
    redact: dict[str, tuple[int, ...]]  # receipt id -> the seqs whose disclosures go
    withdraw: tuple[str, ...]  # format-1 receipts citing an erased event: deleted


def parse_seqs(values: Iterable[object]) -> list[int]:
    """Seqs as the visitor typed them (ints or decimal strings); PlanError naming the first bad one."""
    out: list[int] = []
    for v in values:
        if isinstance(v, bool):
            raise PlanError(f"seq {v!r}: not a non-negative integer")
        if isinstance(v, str) and v.strip().isascii() and v.strip().isdigit():
            v = int(v.strip())
        if not isinstance(v, int) or v < 0:
            raise PlanError(f"seq {v!r}: not a non-negative integer")
        out.append(v)
    if not out:
        raise PlanError("no seq named: say which events to forget")
    return sorted(set(out))


def plan(
    session: str,
    named: Iterable[object],
    count: int,
    slot_at: Callable[[int], Slot],
    citations: Sequence[Citation],
    *,
    cascade: bool = True,
) -> Plan:
    """The erasure of `named` in a session of `count` events. Raises PlanError (nothing changes) for a seq
    the session does not hold, an event already erased, or an erasure record."""
    seqs = parse_seqs(named)
    for s in seqs:
        if s >= count:
            raise PlanError(f"session {session}: no event at seq {s} (it holds {count}, seqs 0–{count - 1})")
    roles: dict[int, str] = {}
    for s in seqs:
        slot = slot_at(s)
        if slot.record:
            raise PlanError(f"session {session}: seq {s} is an erasure record; it says what was erased and cannot be erased itself")
        if slot.control:
            raise PlanError(f"session {session}: seq {s} is a control record (a revoke, restore or supersession); it holds no memory and cannot be erased")
        if slot.erased:
            raise PlanError(f"session {session}: seq {s} is already erased")
        roles[s] = slot.role
    erase = set(seqs)
    cascaded: set[int] = set()
    changed = cascade
    while changed:
        changed = False
        for c in citations:
            resp = c.response_seq
            if resp in erase or not erase.intersection(c.cited) or not 0 <= resp < count:
                continue
            slot = slot_at(resp)
            if slot.erased or slot.record or slot.control or slot.role != "assistant":
                continue
            erase.add(resp)
            cascaded.add(resp)
            roles[resp] = slot.role
            changed = True
    if len(erase) > MAX_FORGET:
        raise PlanError(
            f"session {session}: this forget would erase {len(erase):,} events ({len(seqs):,} named, {len(cascaded):,} answers "
            f"that cited them); at most {MAX_FORGET:,} in one forget: forget fewer at once"
        )
    redact: dict[str, tuple[int, ...]] = {}
    withdraw = []
    for c in citations:
        hit = tuple(sorted(erase.intersection(c.cited)))
        if not hit or c.format == 0:  # format 0: an answer whose receipt was never written (nothing to redact)
            continue
        if c.format == 1:
            withdraw.append(c.receipt_id)
        else:
            redact[c.receipt_id] = hit
    return Plan(session, tuple(seqs), tuple(sorted(cascaded)), tuple(sorted(erase)), roles, redact, tuple(sorted(withdraw)))
