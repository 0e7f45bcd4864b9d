"""Resolve by the question (issue 32): which statements that answer a question are the newest, and which earlier.

The write-time detector (facts.rules) must recognise a change however it is said; at read time the question
names the attribute, and the statements that answer it are the candidates. Whether a newer one replaces an
older one is a smaller question than recognising every way a change can be said: two statements of the same
slot (subject, attribute) with different values, the newer said as holding, the older then said earlier. The
claims reader (facts.claims) already refuses what adds rather than replaces ("also", "too", "another", "a
second"), what holds for a while or in a narrower scope, hypotheticals and questions; a statement that tells
several values of one slot at once ("then", a year, two values) replaces nothing here.

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


def resolve(question: str, statements: Sequence[tuple[int, str]]) -> Resolution:
    """Which of `statements` ((seq, text), any order) answer `question` now, and which only did earlier.

    Per slot the question asks about: the newest statement saying a value as holding is current; an older one
    saying another value, or a value a newer statement denies ("I don't live in Leeds anymore"), is earlier,
    replaced by the first later statement that says so. Nothing is earlier when the question asks about no
    tracked attribute of the speaker or theirs (facts.asked)."""
    current: set[int] = set()
    earlier: dict[int, int] = {}
    texts = sorted((seq, t) for seq, t in set(statements) if isinstance(t, str) and len(t) <= MAX_READ_CHARS)
    for (subject, _), entries in _slot_claims(statements, question).items():
        taken = 0
        for seq, old in entries:  # a later statement taking the value back, read or not: it is about this slot
            if not old.negated:
                later = next((s for s, t in texts if s > seq and _takes_back(t, old.said, subject)), None)
                if later is not None:
                    earlier.setdefault(seq, later)
                    taken = max(taken, later)
        holding = [(seq, c) for seq, c in entries if not c.negated]
        if holding or taken:
            current.add(max(holding[-1][0] if holding else 0, taken))
        for i, (seq, old) in enumerate(entries):
            if old.negated:
                continue
            for later_seq, new in entries[i + 1:]:
                if new.negated and same_value(new.value, old.value):
                    earlier.setdefault(seq, later_seq)  # "I don't live in Leeds anymore"
                    break
                if not new.negated and not same_value(new.value, old.value):
                    earlier.setdefault(seq, later_seq)  # a restatement of the same value replaces nothing
                    break
    return Resolution(frozenset(current - set(earlier)), earlier)
