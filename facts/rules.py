"""The supersession detector (issue 12): does a new user statement supersede an earlier one? Pure, deterministic.

    detect(new_text, earlier, new_seq=N) -> [Proposal, …]

`earlier` is (seq, text) of earlier *user* events (the caller picks them: a lexical shortlist from
`shortlist_query(new_text)` is enough). A Proposal says the event `new_seq` supersedes `older_seq`,
by which rule, on which attribute of whom, the two values as written and a one-line reason that
quotes the values, never the statements.

The rules (docs/RETRIEVAL.md, "Facts that change"), over the claims facts.claims reads:

- rule:same-attribute  both state the same attribute of the same subject with different values
                       ("my dev server port is 3000" / "I moved the dev server to 8080");
- rule:negation        the new one says the old value no longer holds ("I'm not vegetarian anymore"),
                       or holds again after the old one said it did not;
- rule:left-behind     the new one names the old value as left behind ("moved from Leeds to Bristol",
                       "sold the Civic and bought …", "Sam and I broke up").

It refuses (proposes nothing) when the new statement is a question, hypothetical or says "also"/"too";
when a value holds for a while ("for the summer") or in a narrower scope ("at work", "on my laptop", "on
weekends"); when the new statement tells several values in sequence ("then", "after that", "in 2010") or
says the old value again as current;
when the values are the same said again ("Civic" / "Honda Civic"); when the subjects differ ("my sister
lives in Leeds" / "I live in Bristol"); when the new claim is a word-list guess ("I use Firefox") or about
someone else and its sentence has no change word ("now", "moved", "switched", …); and when the older
statement says something else the new one does not replace (superseding it would hide a live fact).
It reads statements of at most MAX_READ_CHARS characters: a longer new statement is not read as a fact
change, and a longer earlier one is skipped (a note, not a single fact) — which also bounds the time it
takes under a session's turn lock.
Precision before recall: a missed supersession leaves an old fact served; a false one hides a true fact.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from facts import lexicon as lex
from facts.claims import SELF, Claim, Reading, read, relation_key
from facts.values import same_value
from retrieval.text import content_terms, fold, stem

RULE_SAME = "rule:same-attribute"
RULE_NEGATION = "rule:negation"
RULE_LEFT = "rule:left-behind"
RULES = (RULE_SAME, RULE_NEGATION, RULE_LEFT)

# The longest statement the detector reads, new or earlier; a longer one is a note, not a single fact.
MAX_READ_CHARS = 400
# An older statement holding more than this many content words besides the fact says something else too.
_MAX_EXTRA_TERMS = 6
# A value that implies another: "not vegetarian anymore" ends "vegan" as well.
_IMPLIES = frozenset({("vegan", "vegetarian")})
_RELATION_WORDS = lex.RELATIONS | {"mum", "dad", "partner", "neighbour", "flatmate", "colleague", "grandma", "grandpa"}


@dataclass(frozen=True, slots=True)
class Proposal:
    """The event `new_seq` supersedes the earlier event `older_seq`."""

    new_seq: int
    older_seq: int
    rule: str  # one of RULES
    subject: str  # "self", a relation ("sister") or a thing ("dev server")
    attribute: str  # "residence", "port", "diet", "favourite colour", …
    old_value: str  # as the older statement wrote it
    new_value: str  # as the new one wrote it; "not <old>" when it only says the old no longer holds
    reason: str  # one line, values only


def _is_relation(subject: str) -> bool:
    return subject.split()[0] in _RELATION_WORDS


def _who(subject: str) -> str:
    if subject == SELF:
        return "you"
    return f"your {subject}" if _is_relation(subject) else f"the {subject}"


def _same_subject(a: str, b: str) -> bool:
    return a == b


def _leaving_reaches(leaving_subject: str, claim_subject: str) -> bool:
    """A value the speaker left behind may be one of their things' ("moved hosting from AWS to …")."""
    return leaving_subject == claim_subject or (leaving_subject == SELF and not _is_relation(claim_subject))


def _implied(old_value: str, negated_value: str) -> bool:
    return same_value(old_value, negated_value) or (old_value, negated_value) in _IMPLIES


def _fires(new: Reading, old: Claim) -> tuple[str, str, str] | None:
    """(rule, new value as written, how the new one said it) if `new` supersedes the older claim `old`."""
    if old.bounded or (not old.negated and _restated(new, old)) or _several(new, old):
        return None  # a value for a while or in one scope; the old value said again as current; several values
    for n in new.claims:
        if n.bounded or n.attribute != old.attribute or not _same_subject(n.subject, old.subject):
            continue
        if n.negated != old.negated:
            if n.negated and _implied(old.value, n.value):
                return RULE_NEGATION, f"not {n.said}", n.how
            if old.negated and same_value(n.value, old.value):
                return RULE_NEGATION, n.said, n.how
            continue
        if n.negated or same_value(n.value, old.value):
            continue  # both say what no longer holds, or the same value said again
        if not (n.strong or n.changed) or (old.subject != SELF and _is_relation(old.subject) and not n.changed):
            continue
        return RULE_SAME, n.said, n.how
    if old.negated:
        return None
    for lv in new.leavings:
        if lv.bounded or not _leaving_reaches(lv.subject, old.subject) or not same_value(lv.old, old.value):
            continue
        if (lv.attributes and old.attribute not in lv.attributes) or (lv.new and same_value(lv.new, old.value)):
            continue
        replacement = lv.new_said or next(
            (n.said for n in new.claims if n.attribute == old.attribute and not n.negated and n.subject == old.subject),
            f"not {lv.old_said}",
        )
        return RULE_LEFT, replacement, f"'{lv.how}'"
    return None


def _several(new: Reading, old: Claim) -> bool:
    """The new statement gives several values of the old claim's attribute (which one holds now is not said)."""
    values = {n.value for n in new.claims if n.attribute == old.attribute and _same_subject(n.subject, old.subject) and not n.negated}
    return len(values) > 1


def _restated(new: Reading, old: Claim) -> bool:
    return any(
        n.attribute == old.attribute and _same_subject(n.subject, old.subject) and not n.negated
        and same_value(n.value, old.value)
        for n in new.claims
    )


def _compare(new: Reading, old: Reading) -> tuple[tuple[str, Claim, str, str] | None, str]:
    """(rule, older claim, new value, how) or None, and one line saying why."""
    if new.sequence:
        return None, "the new statement tells values in sequence ('then', 'after that', a year): not which one holds now"
    fired: list[tuple[str, Claim, str, str]] = []
    for o in old.claims:
        got = _fires(new, o)
        if got is not None:
            fired.append((got[0], o, got[1], got[2]))
    if not fired:
        if not new.claims and not new.leavings:
            return None, "the new statement states no fact the detector reads"
        if not old.claims:
            return None, "the older statement states no fact the detector reads"
        if any(c.bounded for c in (*new.claims, *old.claims)) or any(lv.bounded for lv in new.leavings):
            return None, "a value holds for a while or in a narrower scope ('for the summer', 'at work'): it replaces nothing"
        return None, "no attribute of the same subject changes value"
    keys = {(o.subject, o.attribute) for _, o, _, _ in fired}
    kept = [o for o in old.claims if not o.negated and (o.subject, o.attribute) not in keys and not _restated(new, o)]
    if kept:
        return None, f"the older statement also states {kept[0].attribute} ({_who(kept[0].subject)}), which stays true"
    if old.extra_terms > _MAX_EXTRA_TERMS:
        return None, f"the older statement says more than the fact ({old.extra_terms} other words)"
    rule, o, new_value, how = fired[0]
    return (rule, o, new_value, how), "fires"


def _reason_line(rule: str, claim: Claim, new_value: str, how: str) -> str:
    head = f"{claim.attribute} ({_who(claim.subject)})"
    if rule == RULE_NEGATION and new_value.startswith("not "):
        return f"{head}: {claim.said!r} no longer holds ({how})"
    if rule == RULE_LEFT:
        if new_value.startswith("not "):
            return f"{head}: {claim.said!r} left behind ({how})"
        return f"{head}: {claim.said!r} left behind for {new_value!r} ({how})"
    return f"{head}: was {claim.said!r}, now {new_value!r} ({how})"


def readable(text: str) -> bool:
    """Whether the detector reads `text` at all (at most MAX_READ_CHARS characters)."""
    return len(text) <= MAX_READ_CHARS


def _check_seq(what: str, seq: object) -> int:
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        raise ValueError(f"supersede: {what} {seq!r} is not a seq")
    return seq


def detect(new_text: str, earlier: Sequence[tuple[int, str]], *, new_seq: int) -> list[Proposal]:
    """Which of the `earlier` user statements the statement `new_text` (event `new_seq`) supersedes, oldest first.

    An earlier entry whose seq is not below `new_seq` is ignored: a statement never supersedes itself or a
    later one. A repeated seq is judged once. A `new_text` over MAX_READ_CHARS supersedes nothing, and an
    earlier text over it is skipped.
    """
    _check_seq("new_seq", new_seq)
    if not isinstance(new_text, str):
        raise TypeError(f"supersede: new_text must be a string, not {type(new_text).__name__}")
    if not readable(new_text):
        return []
    new = read(new_text)
    if not new.claims and not new.leavings:
        return []
    out: dict[int, Proposal] = {}
    for seq, text in earlier:
        _check_seq("earlier seq", seq)
        if seq >= new_seq or seq in out or not isinstance(text, str) or not readable(text):
            continue
        verdict, _ = _compare(new, read(text))
        if verdict is None or not _same_person(new_text, text, verdict[1].subject):
            continue  # ("my older sister …" and "my younger sister …" are two people)
        rule, claim, new_value, how = verdict
        out[seq] = Proposal(new_seq, seq, rule, claim.subject, claim.attribute, claim.said, new_value,
                            _reason_line(rule, claim, new_value, how))
    return [out[s] for s in sorted(out)]


# Words before a relation that pick out one person among several ("my older sister", "my ex-husband"): two
# statements whose relation words carry different ones may be about two people, so they are not the same subject.
_SUBJECT_QUALIFIERS = frozenset(
    "older younger elder eldest oldest youngest big little baby twin step half ex late middle first second third "
    "new former other".split()
)
_WORD = re.compile(r"[a-z]+")


def _qualifiers(text: str, relation: str) -> frozenset[str]:
    """The qualifiers standing right before each word of `text` that names the relation `relation` ("sister")."""
    words = _WORD.findall(fold(text))
    return frozenset(
        words[i - 1] for i in range(1, len(words))
        if words[i - 1] in _SUBJECT_QUALIFIERS and relation_key(words[i], None) == relation
    )


def _same_person(new_text: str, older_text: str, subject: str) -> bool:
    """Whether nothing in the two texts says the relation `subject` names two different people."""
    if not _is_relation(subject):
        return True
    relation = subject.split()[0]
    return _qualifiers(new_text, relation) == _qualifiers(older_text, relation)


def _states_it(new: Reading, o: Claim) -> bool:
    """Whether `new` says something else holds for the older claim's subject and attribute: a different value, or
    that the older value no longer holds (not another value's negation, not the same value again)."""
    for n in new.claims:
        if n.bounded or n.attribute != o.attribute or not _same_subject(n.subject, o.subject):
            continue
        if n.negated != o.negated:
            if (n.negated and _implied(o.value, n.value)) or (o.negated and same_value(n.value, o.value)):
                return True
            continue
        if not n.negated and not same_value(n.value, o.value):
            return True
    if o.negated:
        return False
    for lv in new.leavings:
        if lv.bounded or not _leaving_reaches(lv.subject, o.subject) or not same_value(lv.old, o.value):
            continue
        if (not lv.attributes or o.attribute in lv.attributes) and not (lv.new and same_value(lv.new, o.value)):
            return True
    return False


def same_fact(new_text: str, older_text: str) -> tuple[str, str] | None:
    """(subject, attribute) when the rules read the new statement as saying that a fact the older one states no
    longer holds as it said — the same attribute of the same subject (and the same person: "my older sister" is not
    "my younger sister"), with another value or the old one negated — and the older statement states nothing else
    that stays true nor much more than the fact; else None. This is the bar a model's supersession proposal must
    pass to be recorded (facts.model.accept): the model may judge that a fact changed where the rules
    would not decide it alone (no change word, a value they cannot compare), never which fact it is or that an
    older statement holding more is dead. Either text over MAX_READ_CHARS: None."""
    if not readable(new_text) or not readable(older_text):
        return None
    new, old = read(new_text), read(older_text)
    fired, _ = _compare(new, old)
    if fired is not None:  # what the rules would propose themselves
        subject, attribute = fired[1].subject, fired[1].attribute
        return (subject, attribute) if _same_person(new_text, older_text, subject) else None
    if new.sequence or old.extra_terms > _MAX_EXTRA_TERMS:
        return None
    for o in old.claims:
        if o.bounded or _several(new, o) or (not o.negated and _restated(new, o)) or not _states_it(new, o):
            continue
        others = [c for c in old.claims if not c.negated and (c.subject, c.attribute) != (o.subject, o.attribute) and not _restated(new, c)]
        if others or not _same_person(new_text, older_text, o.subject):
            return None
        return o.subject, o.attribute
    return None


def explain(new_text: str, older_text: str) -> str:
    """One line: the rule that fires for this pair, or why none does (for tests, the CLI and a person)."""
    for which, text in (("new", new_text), ("older", older_text)):
        if not readable(text):
            return f"no supersession: the {which} statement is over {MAX_READ_CHARS} characters, a note the detector does not read"
    verdict, why = _compare(read(new_text), read(older_text))
    if verdict is None:
        return f"no supersession: {why}"
    rule, claim, new_value, how = verdict
    return f"{rule}: {_reason_line(rule, claim, new_value, how)}"


def shortlist_query(new_text: str) -> str | None:
    """Words to search earlier events with, so `detect` sees every statement of the same attribute.

    None when the text states no fact the detector reads, or is over MAX_READ_CHARS (then nothing can be
    superseded: skip the search).
    The words are the attributes' heads, nouns and word lists, the subjects and the values said, so
    "we've just moved to Bristol" finds "I live in Leeds".
    """
    if not readable(new_text):
        return None
    reading = read(new_text)
    if not reading.claims and not reading.leavings:
        return None
    words: dict[str, None] = {}
    for c in reading.claims:
        for w in (*c.subject.split(), *c.said.split(), *lex.shortlist_words(c.attribute), *c.attribute.split()):
            words.setdefault(w.lower(), None)
    for lv in reading.leavings:
        for w in (*lv.subject.split(), *lv.old_said.split()):
            words.setdefault(w.lower(), None)
    words.pop("self", None)
    return " ".join(words)


def _topic_index() -> dict[str, tuple[str, ...]]:
    """word -> the attributes whose vocabulary holds it (built once)."""
    out: dict[str, list[str]] = {}
    for attribute, words in lex.SHORTLIST.items():
        for w in (*words, *lex.CUE_WORDS.get(attribute, ()), *attribute.split()):
            out.setdefault(stem(fold(w)), []).append(attribute)
    return {w: tuple(dict.fromkeys(a)) for w, a in out.items()}


_TOPICS = _topic_index()


def topic_query(text: str) -> str | None:
    """`text` plus the vocabulary of every attribute it mentions, or None if it mentions none.

    For a question ("How old am I?") that shares no word with the statement that answers it ("I turned
    43 last week"): a search with it finds every statement of the attribute, and the supersession state
    decides which of them is live. The words are the ones `shortlist_query` uses.
    """
    attributes: dict[str, None] = {}
    for t in content_terms(text):
        for a in _TOPICS.get(t, ()):
            attributes.setdefault(a, None)
    if not attributes:
        return None
    words = dict.fromkeys(w for a in attributes for w in lex.shortlist_words(a))
    return " ".join((text, *words))
