"""Which statements are superseded, derived from the ledger (pure; docs/FORMAT.md §19).

Replaying a session's supersession records in seq order gives the state, so a rebuilt index, another
process or a restarted app see the same. Each record links a newer statement to an older one it supersedes:

- `superseded[old]` is the first record that superseded `old` (a later record naming `old` again — a
  correction of the correction, or the detector finding it too — adds a link for `history`, and changes
  nothing of `superseded[old]`); a record naming a pair already linked changes nothing at all.
- `live(seq)` follows the links forward to the statement that holds now; `history(seq)` is every statement
  linked to `seq`, in either direction, oldest first: all statements of that fact.

What else happens to the two events does not undo a supersession: a newer statement that is later revoked or
forgotten leaves the older one superseded (the person said the old value stopped holding; taking the new
statement out of use, or destroying its words, does not say the old one holds again). Forgetting the older
one removes its words; the record still names its seq and id, and holds no word of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from control.plan import quoted
from ledger.supersessions import SupersessionRecord


@dataclass(frozen=True, slots=True)
class Supersession:
    """One link in force: `new_seq` supersedes `old_seq`, by the record at `record_seq`."""

    old_seq: int
    old_id: str
    new_seq: int
    new_id: str
    decided_by: str  # "visitor", "rule:<name>", "model:<id>"
    checked_by: str | None  # the rule that accepted a model's proposal
    reason: str | None  # as stored: never quotes a value
    record_seq: int
    record_id: str


@dataclass(slots=True)
class SupersessionState:
    """superseded: older seq -> the first supersession of it; links: every (older, newer) pair, in record order."""

    superseded: dict[int, Supersession] = field(default_factory=dict)
    links: list[Supersession] = field(default_factory=list)
    _newer: dict[int, list[int]] = field(default_factory=dict)  # older seq -> the seqs that superseded it
    _older: dict[int, list[int]] = field(default_factory=dict)  # newer seq -> the seqs it superseded

    def apply(self, record: SupersessionRecord, record_seq: int, record_id: str) -> None:
        """Fold one supersession record (the next in seq order)."""
        if record.new_seq in self._newer.get(record.old_seq, ()):
            return
        link = Supersession(
            record.old_seq, record.old_id, record.new_seq, record.new_id, record.decided_by, record.checked_by, record.reason, record_seq, record_id
        )
        self.links.append(link)
        self.superseded.setdefault(record.old_seq, link)
        self._newer.setdefault(record.old_seq, []).append(record.new_seq)
        self._older.setdefault(record.new_seq, []).append(record.old_seq)

    @classmethod
    def from_links(cls, links: list[Supersession]) -> SupersessionState:
        """The state whose `links` are these, in this order (each a link `apply` kept): what a saved state holds."""
        state = cls()
        for link in links:
            state.links.append(link)
            state.superseded.setdefault(link.old_seq, link)
            state._newer.setdefault(link.old_seq, []).append(link.new_seq)
            state._older.setdefault(link.new_seq, []).append(link.old_seq)
        return state

    def copy(self) -> SupersessionState:
        return SupersessionState(
            dict(self.superseded),
            list(self.links),
            {k: list(v) for k, v in self._newer.items()},
            {k: list(v) for k, v in self._older.items()},
        )

    def link(self, old_seq: int, new_seq: int) -> Supersession | None:
        """The supersession of `old_seq` by `new_seq`, if one is recorded."""
        return next((x for x in self.links if x.old_seq == old_seq and x.new_seq == new_seq), None) if new_seq in self._newer.get(old_seq, ()) else None

    def superseded_by(self, seq: int) -> int | None:
        """The seq of the statement that replaced `seq` (its first supersession), or None while it is live."""
        link = self.superseded.get(seq)
        return None if link is None else link.new_seq

    def supersedes(self, seq: int) -> list[int]:
        """The older seqs `seq` superseded, ascending."""
        return sorted(self._older.get(seq, ()))

    def live(self, seq: int) -> int:
        """The statement holding now in `seq`'s line of replacements (`seq` itself when nothing replaced it)."""
        while seq in self.superseded:  # ends: a newer seq is always greater
            seq = self.superseded[seq].new_seq
        return seq

    def history(self, seq: int) -> list[int]:
        """Every statement linked to `seq` through supersessions, either way, oldest first ([seq] alone if none)."""
        seen = {seq}
        todo = [seq]
        while todo:
            s = todo.pop()
            for other in self._neighbours(s):
                if other not in seen:
                    seen.add(other)
                    todo.append(other)
        return sorted(seen)

    def _neighbours(self, seq: int) -> Iterator[int]:
        yield from self._newer.get(seq, ())
        yield from self._older.get(seq, ())

    def excluded(self) -> list[int]:
        """The superseded seqs: by default retrieval hands none of them to the model unmarked."""
        return sorted(self.superseded)


# -- reasons: what is stored for good, and what a person reads ------------------------------------------
def stored_reason(attribute: str, *texts: str) -> str | None:
    """A reason to keep in the record for a rule's or a model's supersession: the attribute as the detector
    names it, never a value, and no word of either statement (control.plan.quoted: the record outlives an
    erasure of both). "residence changed"; "new port" when the statement says "changed"; None when the
    attribute's own words are the statement's ("my dev server port is 3000": the rule in `decided_by` says
    enough), and None for a label outside the detector's fixed vocabulary (`facts.lexicon.attribute_name`):
    a model's free-text attribute ("nyc home") can hold a short word of a memory that `quoted` lets through."""
    # imported here, not at the top: facts compiles its patterns on import (~0.1-0.2 s); a search's control state needs none
    from facts.lexicon import attribute_name

    name = attribute_name(attribute)
    for candidate in (f"{name} changed", f"new {name}") if name else ():
        if not any(quoted(candidate, t) for t in texts):
            return candidate
    return None


def shown_reason(link: Supersession, old_text: str | None, new_text: str | None) -> str | None:
    """The sentence a person reads, recomputed while both statements hold their words: the detector's reason,
    which quotes the two values ("residence: 'Leeds' → 'Bristol'"); otherwise the stored reason."""
    if old_text is not None and new_text is not None:
        from facts.rules import detect  # imported here: see stored_reason

        found = [p for p in detect(new_text, [(link.old_seq, old_text)], new_seq=link.new_seq) if p.older_seq == link.old_seq]
        best = next((p for p in found if p.rule == link.decided_by or p.rule == link.checked_by), found[0] if found else None)
        if best is not None:
            return best.reason
    return link.reason
