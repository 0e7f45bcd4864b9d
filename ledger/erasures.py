"""What a walk must know about erasure: which lines are erased, and which erasure record lists each (pure).

An erased line (docs/FORMAT.md §4.4) verifies from its stored commitment, but
it is legitimate only when a later erasure record (§4.5) lists it with the
same id, digest and commitment. A walk sees the erased line first and the
record later, so it carries this small state (a few entries per erasure, never
per event) from line to line; the writer's tail and the auditor's cache keep it
with the prefix they vouch for, so a walk resumed in the middle of a ledger
checks exactly what a walk from genesis checks.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ledger.event import ERASURE_VERSION, EVENT_ID_RE, HEX64_RE, erasure_record_text


class ErasedLine(NamedTuple):
    seq: int
    id: str
    digest: str
    commit: str
    prev: str  # the chain hash before it: where a walk stops when the line turns out unrecorded


class Entry(NamedTuple):
    seq: int
    id: str
    digest: str
    commit: str


def record_entries(seq: int, obj: dict[str, Any]) -> list[Entry] | str:
    """The entries of the erasure record `obj` (a verified line at `seq`), or what is wrong with its shape."""
    meta = obj["meta"]
    if meta.keys() != {"erasure"}:
        return "an erasure record's meta holds only 'erasure'"
    rec = meta["erasure"]
    if type(rec) is not dict or rec.keys() != {"v", "erased", "reason"}:
        return "meta.erasure must be an object with exactly v, erased and reason"
    if type(rec["v"]) is not int or rec["v"] != ERASURE_VERSION:
        return f"meta.erasure.v {rec['v']!r} is unknown (expected {ERASURE_VERSION})"
    if rec["reason"] is not None and type(rec["reason"]) is not str:
        return "meta.erasure.reason must be a string or null"
    items = rec["erased"]
    if type(items) is not list or not items:
        return "meta.erasure.erased must be a non-empty list"
    out = []
    for i, item in enumerate(items):
        where = f"meta.erasure.erased[{i}]"
        if type(item) is not dict or item.keys() != {"seq", "id", "digest", "commit"}:
            return f"{where} must be an object with exactly seq, id, digest and commit"
        s = item["seq"]
        if type(s) is not int or not 0 <= s < seq:
            return f"{where}.seq {s!r} is not an earlier seq"
        if type(item["id"]) is not str or not EVENT_ID_RE.fullmatch(item["id"]):
            return f"{where}.id is not an event id"
        for key in ("digest", "commit"):
            if type(item[key]) is not str or not HEX64_RE.fullmatch(item[key]):
                return f"{where}.{key} is not 64 lowercase hex digits"
        out.append(Entry(s, item["id"], item["digest"], item["commit"]))
    if obj["text"] != erasure_record_text(len(out)):
        return f"an erasure record's text must be exactly {erasure_record_text(len(out))!r}"
    return out


class ErasureState:
    """Erased lines seen, and which record listed each, for the prefix a walk has covered.

    `unknown_before`: seqs below it were not seen by this walk and no state was
    given for them (a parallel range, a diagnostic walk): entries naming them
    are kept in `unchecked` for whoever holds the whole picture.
    """

    __slots__ = ("erased", "recorded", "unknown_before", "unchecked")

    def __init__(self, unknown_before: int = 0) -> None:
        self.erased: dict[int, ErasedLine] = {}
        self.recorded: dict[int, int] = {}  # erased seq -> seq of the record listing it
        self.unknown_before = unknown_before
        self.unchecked: list[tuple[int, Entry]] = []  # (record seq, entry) naming a seq below unknown_before

    def copy(self) -> ErasureState:
        return self.cut(None)

    def cut(self, n: int | None) -> ErasureState:
        """The state as it was before seq `n` (a walk restarting there); None: a copy."""
        out = ErasureState(self.unknown_before)
        out.erased = {s: e for s, e in self.erased.items() if n is None or s < n}
        out.recorded = {s: r for s, r in self.recorded.items() if n is None or r < n}
        out.unchecked = [(r, e) for r, e in self.unchecked if n is None or r < n]
        return out

    def saw_erased(self, seq: int, obj: dict[str, Any]) -> None:
        self.erased[seq] = ErasedLine(seq, obj["id"], obj["digest"], obj["commit"], obj["prev"])

    def saw_record(self, seq: int, entries: list[Entry]) -> str | None:
        """Account for the erasure record at `seq`; return what is wrong (and change nothing) or None."""
        seen: set[int] = set()
        unchecked = []
        for e in entries:
            if e.seq in seen or e.seq in self.recorded:
                earlier = self.recorded.get(e.seq, seq)
                return f"seq {e.seq} is already listed by the erasure record at seq {earlier}"
            seen.add(e.seq)
            line = self.erased.get(e.seq)
            if line is not None:
                if (line.id, line.digest, line.commit) != (e.id, e.digest, e.commit):
                    return f"its entry for seq {e.seq} does not match the erased line (id, digest or commit differ)"
            elif e.seq >= self.unknown_before:
                return f"it lists seq {e.seq}, which is not in erased form"
            else:
                unchecked.append((seq, e))
        for e in entries:
            self.recorded[e.seq] = seq
        self.unchecked.extend(unchecked)
        return None

    def first_unrecorded(self) -> ErasedLine | None:
        """The first erased line no record has listed (at the end of a ledger: a break)."""
        pending = [s for s in self.erased if s not in self.recorded]
        return self.erased[min(pending)] if pending else None

    def seqs(self, below: int | None = None) -> tuple[int, ...]:
        return tuple(sorted(s for s in self.erased if below is None or s < below))

    # -- kept with a cache (receipts/audit.py state.json), read back from outside --------------
    def to_json(self) -> dict[str, Any]:
        return {
            "erased": [list(e) for e in sorted(self.erased.values())],
            "recorded": sorted([s, r] for s, r in self.recorded.items()),
        }

    @staticmethod
    def from_json(obj: Any, verified: int) -> ErasureState:
        """From `to_json` output covering `verified` lines; ValueError for anything else."""
        if type(obj) is not dict or obj.keys() != {"erased", "recorded"}:
            raise ValueError("erasure state")
        out = ErasureState()
        for item in obj["erased"]:
            if type(item) is not list or len(item) != 5:
                raise ValueError("erased line")
            seq, eid, digest, commit, prev = item
            if type(seq) is not int or not 0 <= seq < verified or seq in out.erased:
                raise ValueError("erased seq")
            if type(eid) is not str or not all(type(h) is str and HEX64_RE.fullmatch(h) for h in (digest, commit, prev)):
                raise ValueError("erased line fields")
            out.erased[seq] = ErasedLine(seq, eid, digest, commit, prev)
        for item in obj["recorded"]:
            if type(item) is not list or len(item) != 2 or not all(type(v) is int for v in item):
                raise ValueError("recorded")
            seq, rec = item
            if seq not in out.erased or not seq < rec < verified or seq in out.recorded:
                raise ValueError("recorded seq")
            out.recorded[seq] = rec
        return out


__all__ = ["Entry", "ErasedLine", "ErasureState", "record_entries"]
