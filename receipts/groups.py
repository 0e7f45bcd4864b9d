"""A receipt report's checks grouped by what they are about, one plain sentence per group (pure).

Groups, in order: the signature; the receipt as a whole; the question; memory 1 … K
(by rank, the check names' `memory#N`); the answer; the ledger. Every check row
belongs to exactly one group, so a group's status is its rows' status: `fail` if
one failed, else `not_verifiable` if one could not run, else `erased` or
`withheld` (format 2: a cited event's content is not in this copy), else `pass`. The CLI, its
`--json` output and the Verify tab all show these, with the raw rows one step away.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from receipts.disclose import held_message
from receipts.verify import ERASED, FAIL, NO_TRUSTED_KEY, NOT_VERIFIABLE, PASS, WITHHELD, Check, Cited, Report

# What a failed row means, in plain words, by the part of its name after the subject.
_EVENT_FAIL = {
    "content": "its disclosed text, meta or salt does not open the signed commitment",
    "digest": "its text or fields were changed: the digest no longer recomputes",
    "chain_link": "its chain hash does not link its predecessor to its digest",
    "inclusion": "it is not in the signed Merkle tree",
}
_ROW_FAIL = {
    "envelope.payload_type": "the envelope does not name this receipt format",
    "envelope.signature": "the receipt's signature does not verify under a trusted key",
    "checkpoint.signature": "the checkpoint's signature does not verify under a trusted key",
    "response.hash": "the answer text does not hash to the signed response hash",
    "checkpoint.chain_head": "the signed chain head is not the answer's chain hash",
    "prompt.hash": "the prompt does not re-derive from the question and these memories",
}


@dataclass(frozen=True, slots=True)
class Group:
    key: str  # "signature", "receipt", "question", "memory#N", "answer", "ledger"
    title: str  # "the signature", "memory 3 (seq 41)", ...
    status: str  # pass / fail / not_verifiable / erased / withheld
    sentence: str  # one plain sentence: what was shown, or what failed
    checks: tuple[str, ...]  # the names of the raw rows in this group

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.key, "title": self.title, "status": self.status, "sentence": self.sentence, "checks": list(self.checks)}


def group_of(name: str) -> str:
    """The group a check row belongs to, from its name."""
    head = name.split(".", 1)[0]
    if name in ("envelope.payload_type", "envelope.signature", "checkpoint.signature"):
        return "signature"
    if head == "receipt" or name == "prompt.hash":
        return "receipt"
    if head == "query":
        return "question"
    if head.startswith("memory#"):
        return head
    if head == "response" or name == "checkpoint.chain_head":
        return "answer"
    if head == "ledger":
        return "ledger"
    return "receipt"


def _status(rows: Sequence[Check], extra: str | None = None) -> str:
    states = {c.status for c in rows} | ({extra} if extra else set())
    if FAIL in states:
        return FAIL
    if NOT_VERIFIABLE in states or not rows:
        return NOT_VERIFIABLE
    for held in (ERASED, WITHHELD):
        if held in states:
            return held
    return PASS


def _failures(rows: Sequence[Check]) -> str:
    out = []
    for c in rows:
        if c.status != FAIL:
            continue
        suffix = c.name.rsplit(".", 1)[-1]
        plain = _ROW_FAIL.get(c.name) or (_EVENT_FAIL.get(suffix) if _is_event(c.name.split(".", 1)[0]) else None)
        out.append(plain or c.message)
    return "; ".join(dict.fromkeys(out))


def _is_event(head: str) -> bool:
    return head in ("query", "response") or head.startswith("memory#")


def _event_sentence(title: str, rows: Sequence[Check], cited: Cited | None) -> tuple[str, str]:
    ledger = None if cited is None else cited.ledger
    ledger_status = None if ledger is None else (PASS if ledger == "" else FAIL)
    status = _status(rows, ledger_status)
    if status == FAIL:
        parts = [p for p in (_failures(rows), f"it {ledger}" if ledger else "") if p]
        return status, f"{title} does not verify: {'; '.join(parts)}"
    if status == NOT_VERIFIABLE:
        return status, f"{title} could not be fully checked here"
    if status in (ERASED, WITHHELD) and cited is not None:
        where = "; the ledger holds it at that seq with the same digest" if ledger_status == PASS else ""
        return status, held_message(cited.name, cited.seq, status, f"its digest, chain link and inclusion in the signed tree verify from its signed commitment{where}")
    if ledger_status == PASS:
        return status, f"{title} is exactly what is in the signed ledger"
    seq = "" if cited is None else f" at seq {cited.seq}"
    return status, f"{title} is exactly the event the signed checkpoint holds{seq} (not compared with a ledger here)"


def _signature_sentence(rows: Sequence[Check]) -> str:
    status = _status(rows)
    if status == FAIL:
        return f"the signature does not verify: {_failures(rows)}"
    if status == NOT_VERIFIABLE:
        na = next((c.message for c in rows if c.status == NOT_VERIFIABLE), NO_TRUSTED_KEY)
        na = na.removesuffix(f"; {NO_TRUSTED_KEY}")
        if na == NO_TRUSTED_KEY:
            return "the signatures were not checked: no trusted public key was given (--trust PUBKEY)"
        return f"the signatures were not checked against a trusted key (--trust PUBKEY); {na}"
    signer = next((c.message for c in rows if c.name == "envelope.signature"), "signed")
    return f"the receipt and its checkpoint are signed by a trusted key ({signer.removeprefix('signed by trusted key ')})"


def _receipt_sentence(rows: Sequence[Check], k: int) -> str:
    prompt = next((c for c in rows if c.name == "prompt.hash"), None)
    if _status(rows) == NOT_VERIFIABLE and prompt is not None and prompt.status == NOT_VERIFIABLE:
        ranks = "no memories cited" if k == 0 else "memory ranked 1" if k == 1 else f"memories ranked 1…{k}"
        return f"one session throughout and {ranks}; the prompt hash was {prompt.message}"
    if _status(rows) == FAIL:
        details = "; ".join(
            f"{_ROW_FAIL.get(c.name) or c.message}" + (f" ({c.found})" if c.found and c.name not in _ROW_FAIL else "")
            for c in rows
            if c.status == FAIL
        )
        return f"the receipt does not hold together: {details}"
    if k == 0:
        return "one session throughout, no memories cited, and the prompt re-derives from the question alone"
    ranks = "memory ranked 1" if k == 1 else f"memories ranked 1…{k}"
    these = "this memory" if k == 1 else f"these {k} memories"
    return f"one session throughout, {ranks}, and the prompt re-derives from the question and {these}" + _decisions(rows)


def _decisions(rows: Sequence[Check]) -> str:
    """What a person decided (FORMAT.md §17, §18), when the receipt records it: the passing rows' own words."""
    said = [c.message for c in rows if c.status == PASS and c.name in ("consent.decision", "exclusions.records")]
    return "".join(f"; {m}" for m in said)


# The row that best says what is wrong with a ledger comes first: a break, then a fork, then the rest.
_LEDGER_ORDER = ("ledger.chain", "ledger.root", "ledger.consistency", "ledger.events", "ledger.response")


def _ledger_sentence(rows: Sequence[Check]) -> str:
    status = _status(rows)
    if status == FAIL:
        failed = {c.name: c for c in rows if c.status == FAIL}
        first = next((failed[n] for n in _LEDGER_ORDER if n in failed), next(iter(failed.values())))
        return f"the ledger does not match the receipt: {first.message}"
    if status == NOT_VERIFIABLE:
        na = next((c.message for c in rows if c.status == NOT_VERIFIABLE), "not checked")
        return f"not compared with a ledger: {na}"
    chain = next((c for c in rows if c.name == "ledger.consistency"), None)
    held = "".join(f"; {c.message}" for c in rows if c.status in (ERASED, WITHHELD))
    return "the ledger chains from genesis to the signed root" + (f"; {chain.message}" if chain is not None else "") + held


def group_report(report: Report) -> tuple[Group, ...]:
    """Group the report's rows (every row in exactly one group), in reading order."""
    by_group: dict[str, list[Check]] = {}
    for c in report.checks:
        by_group.setdefault(group_of(c.name), []).append(c)
    cited = {c.name: c for c in report.cited}
    memories = [c.name for c in report.cited if c.name.startswith("memory#")]
    extra = sorted((g for g in by_group if g.startswith("memory#") and g not in memories), key=_rank)
    order = ["signature", "receipt", "question", *memories, *extra, "answer", "ledger"]
    out = []
    for key in order:
        rows = by_group.get(key, [])
        if not rows:
            continue
        names = tuple(c.name for c in rows)
        if key == "signature":
            out.append(Group(key, "the signature", _status(rows), _signature_sentence(rows), names))
        elif key == "receipt":
            out.append(Group(key, "the receipt as a whole", _status(rows), _receipt_sentence(rows, len(memories)), names))
        elif key == "ledger":
            out.append(Group(key, "the ledger", _status(rows), _ledger_sentence(rows), names))
        else:
            ev = cited.get({"question": "query", "answer": "response"}.get(key, key))
            title = {"question": "the question", "answer": "the answer"}.get(key) or f"memory {_rank(key)}"
            title += f" (seq {ev.seq})" if ev is not None else ""
            status, sentence = _event_sentence(title, rows, ev)
            out.append(Group(key, title, status, sentence, names))
    return tuple(out)


def _rank(key: str) -> int:
    try:
        return int(key.removeprefix("memory#"))
    except ValueError:
        return 0
