"""Resolve by the question (issue 32): which statements that answer a question are the newest, and which earlier.

The write-time detector (facts.rules) must recognise a change however it is said; at read time the question
names the attribute, and the statements that answer it are the candidates. Whether a newer one replaces an
older one is a smaller question than recognising every way a change can be said: two statements of the same
slot (subject, attribute) with different values, the newer said as holding, the older then said earlier. The
claims reader (facts.claims) already refuses what adds rather than replaces ("also", "too", "another", "a
second"), what holds for a while or in a narrower scope, hypotheticals and questions; a statement that tells
several values of one slot at once ("then", a year, two values) replaces nothing here.

The slot's statements are not only those the claims reader reads: a later statement naming a value of the slot
said before it, in the speaker's voice, with a change sign, is one too ("we sold the flat in Leeds, the new place is
smaller"; facts.slots), followed value by value; `values_asked` gives the values to search the session with.

Each clause is its own fact: "I live in Paris and I work as a nurse" answers "where do I live?" and "what is my
job?" separately, so "I moved to Berlin" makes it an earlier statement for the first question only (the event
stays one line; no record is written).

Pure: `resolve(question, statements)` -> Resolution. chat.supersede uses it for a question about now (the
newest wins; the earlier ones are left out of the K); a question about the past gets them all.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from facts import lexicon as lex
from facts import slots
from facts.asked import _attribute_fits, _subject_fits, asked
from facts.claims import SELF, Claim, read
from facts.rules import MAX_READ_CHARS
from facts.values import same_value
from retrieval.text import fold


@dataclass(frozen=True, slots=True)
class Resolution:
    """For one question: `current` the newest statement of each slot it asks about, `earlier` each older
    statement of a slot a newer one replaces -> the seq of that newer statement."""

    current: frozenset[int] = frozenset()
    earlier: dict[int, int] = field(default_factory=dict)


def _slot_claims(statements: Sequence[tuple[int, str]], question: str) -> dict[tuple[str, str], list[tuple[int, Claim]]]:
    q = asked(question)
    slots: dict[tuple[str, str], list[tuple[int, Claim]]] = defaultdict(list)
    if q is None:
        return slots
    for seq, text in sorted(set(statements)):
        if not isinstance(text, str) or len(text) > MAX_READ_CHARS:
            continue
        reading = read(text)
        if reading.sequence:
            continue  # values in sequence: which one holds now is not said
        fits = [c for c in reading.claims if not c.bounded and _attribute_fits(q, c.attribute) and _subject_fits(q, c.subject)]
        for slot in {(c.subject, c.attribute) for c in fits}:
            here = [c for c in fits if (c.subject, c.attribute) == slot]
            if len({c.value for c in here if not c.negated}) > 1:
                continue  # several values of one slot at once
            slots[slot].append((seq, next((c for c in here if not c.negated), here[0])))
    return slots


def _left(statements: Sequence[tuple[int, str]], question: str) -> dict[tuple[str, str], list[tuple[int, str]]]:
    """Per slot the question asks about, the values its statements say were left or are denied, as written, with
    the statement's seq: "I don't follow Arsenal anymore" -> Arsenal, "I sold the Civic and bought …" -> Civic."""
    q = asked(question)
    left: dict[tuple[str, str], list[tuple[int, str]]] = defaultdict(list)
    if q is None:
        return left
    for seq, text in sorted(set(statements)):
        if not isinstance(text, str) or len(text) > MAX_READ_CHARS:
            continue
        reading = read(text)
        fits = [c for c in reading.claims if not c.bounded and _attribute_fits(q, c.attribute) and _subject_fits(q, c.subject)]
        for c in fits:
            if c.negated:
                left[(c.subject, c.attribute)].append((seq, c.said))
        for leaving in reading.leavings:
            if leaving.bounded:
                continue
            for c in fits:
                if c.subject == leaving.subject and (not leaving.attributes or c.attribute in leaving.attributes):
                    left[(c.subject, c.attribute)].append((seq, leaving.old_said))
    return left


_FIRST_PERSON = re.compile(r"(?i)\b(?:I|I'm|I've|me|my|we|we're|our|us)\b")
_SOMEONE_ELSES = re.compile(rf"(?i)\b(?:my|our)\s+(?:\w+\s+)?(?:{'|'.join(sorted(lex.RELATIONS))})\b")


def _takes_back(text: str, said: str, subject: str) -> bool:
    """Whether `text` takes back the value `said` of a slot: "…, not Leeds", "I said Leeds earlier" (a correction,
    or a value denied), said by the speaker about the slot's subject. Read without the claims reader: a statement
    that corrects a value need not state the new one in a shape it reads."""
    if len(said) < 3:
        return False
    if subject == SELF and (not _FIRST_PERSON.search(text) or _SOMEONE_ELSES.search(text)):
        return False
    if subject != SELF and subject.split()[-1] not in fold(text).replace("'s", " ").replace(".", " ").split():
        return False
    value = re.escape(said)
    return re.search(rf"(?i)\b(?:not|said|wrote|typed)\s+(?:the\s+|a\s+|an\s+)?{value}(?![\w-])", text) is not None


@dataclass(frozen=True, slots=True)
class _Entry:
    """One statement of a slot: a value read as holding or denied (`value`), or a statement that moves on from
    the values in `leaves` (facts.slots, value None) naming `names` beside them."""

    seq: int
    value: str | None
    negated: bool = False
    leaves: frozenset[str] = frozenset()
    names: frozenset[str] = frozenset()


def _replaces(new: _Entry, old: _Entry) -> bool:
    """Whether the later `new` makes the statement `old` of the same slot an earlier one."""
    if old.negated:
        return False
    olds = [old.value] if old.value is not None else list(old.names)
    if new.value is None:  # moves on from the values it leaves
        return any(same_value(v, o) for v in new.leaves for o in olds)
    if new.negated:
        return any(same_value(new.value, o) for o in olds)  # "I don't live in Leeds anymore"
    return not any(same_value(new.value, o) for o in olds)  # a restatement of the same value replaces nothing


def _moved_on(entries: list[_Entry], slot: tuple[str, str], texts: list[tuple[int, str]]) -> list[_Entry]:
    """The statements in `texts` that move on from a value of the slot said before them (facts.slots), followed
    value by value: a statement naming the new value a moved-on one named moves on from it in turn. Bounded:
    each statement is looked at once per value it could leave."""
    taken = {e.seq for e in entries}
    said: list[tuple[int, str, str]] = []  # (seq, the value as said or named, its folded form)
    for e in entries:
        if e.value is not None and not e.negated:
            said.append((e.seq, e.value, fold(e.value)))
    found: list[_Entry] = []
    i = 0
    while i < len(said):
        seq, value, key = said[i]
        i += 1
        for s, text in texts:
            if s <= seq or s in taken or not slots.moves_on(text, value, *slot):
                continue
            taken.add(s)
            names = slots.named_values(text, value)
            found.append(_Entry(s, None, leaves=frozenset({key}), names=names))
            said.extend((s, n, n) for n in sorted(names))
    return found


def resolve(question: str, statements: Sequence[tuple[int, str]]) -> Resolution:
    """Which of `statements` ((seq, text), any order) answer `question` now, and which only did earlier.

    Per slot the question asks about: its statements are those the claims reader reads as the slot, and those
    that name a value of the slot said before them and tell a change (facts.slots: "we sold the flat in Leeds,
    the new place is smaller"), followed value by value. The newest statement saying a value as holding, or
    moving on, is current; an older one saying another value, or a value a newer statement denies or moves on
    from, is earlier, replaced by the first later statement that says so. Nothing is earlier when the question
    asks about no tracked attribute of the speaker or theirs (facts.asked)."""
    current: set[int] = set()
    earlier: dict[int, int] = {}
    texts = sorted((seq, t) for seq, t in set(statements) if isinstance(t, str) and len(t) <= MAX_READ_CHARS)
    left_by_slot = _left(statements, question)
    for (subject, attribute), claimed in _slot_claims(statements, question).items():
        taken = 0
        for seq, claim in claimed:  # a later statement taking the value back, read or not: it is about this slot
            if not claim.negated:
                later = next((s for s, t in texts if s > seq and _takes_back(t, claim.said, subject)), None)
                if later is not None:
                    earlier.setdefault(seq, later)
                    taken = max(taken, later)
        entries = [_Entry(seq, c.value, c.negated) for seq, c in claimed]
        said = [_Entry(seq, c.said, c.negated) for seq, c in claimed]  # as written: what a later statement names
        entries = sorted([*entries, *_moved_on(said, (subject, attribute), texts)], key=lambda e: e.seq)
        for i, entry in enumerate(entries):
            replaced = next((new.seq for new in entries[i + 1:] if _replaces(new, entry)), None)
            if replaced is not None:
                earlier.setdefault(entry.seq, replaced)
        # an older statement naming a value the slot's statements leave or deny, read or not, is an earlier one
        gone = [*left_by_slot.get((subject, attribute), []),
                *((e.seq, v) for e in entries if e.value is None for v in e.leaves)]
        known = {e.seq for e in entries}
        for later, value in sorted(gone):
            for seq, text in texts:
                if seq < later and seq not in known and slots.names_value(text, value, subject, attribute):
                    earlier.setdefault(seq, later)
        holding = [e.seq for e in entries if not e.negated and e.seq not in earlier]  # the newest still holding
        if holding or taken:
            current.add(max(holding[-1] if holding else 0, taken))
    return Resolution(frozenset(current - set(earlier)), earlier)


def values_asked(question: str, statements: Sequence[tuple[int, str]]) -> frozenset[str]:
    """The values, as written, that `statements` give the slots `question` asks about, with those the statements
    that move on from them name: the words to search the session with for the rest of the slot's statements
    (facts.slots.value_query; chat.supersede.resolved_for_now)."""
    texts = sorted((seq, t) for seq, t in set(statements) if isinstance(t, str) and len(t) <= MAX_READ_CHARS)
    found: set[str] = set()
    for slot, claimed in _slot_claims(statements, question).items():
        said = [_Entry(seq, c.said, c.negated) for seq, c in claimed]
        found |= {fold(e.value) for e in said if e.value is not None and not e.negated}
        found |= {n for e in _moved_on(said, slot, texts) for n in e.names}
    return frozenset(found)
