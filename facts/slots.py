"""Statements of a slot found by the slot's values, not by the question's words (issue 32; pure).

A question names a slot (subject, attribute: "where do I live?" -> the speaker's residence). The claims reader
(facts.claims) reads many statements of it, and each of those says a value ("I live in Leeds" -> Leeds). A later
statement that names that value again, in the speaker's voice, with a sign that something changed, is about the
same slot whatever else its words are: "we sold the flat in Leeds, the new place is smaller", "Leeds is behind us
now". It shares no word with the question, and the reader need not read it: the value it names ties it to the
slot. Such a statement *moves on* from the value; the newest statement of the slot, read or moved on, is the one
that holds (facts.resolve).

The values a moved-on statement names beside the one it leaves (capitalised names, numbers, times: "the new place
in Bristol") are what a still later statement may name in turn, so a chain of changes is followed value by value.

Exact and bounded: a statement is tied to a slot only by a whole-word mention of a value already tied to it, and
the values to look for are few (one per statement of the slot), so the chat hook (chat.supersede) finds the
candidates with one search per round over the session's index (`value_query`), whatever the session's size.
"""

from __future__ import annotations

import re

from facts import lexicon as lex
from facts import patterns as pat
from retrieval.text import STOP_WORDS, fold

# A sign that the statement tells a change: a change word ("new", "moved", "sold", "now"), a denial ("not",
# "no longer", "don't"), or "anymore". Without one, a statement naming the value tells nothing about the slot
# ("Mum visited me in Leeds").
_CHANGED = (pat.MARKER_RE, pat.NEGATION_RE, pat.ANYMORE_RE)
# Value-like words: a run of capitalised words or numbers ("Bristol", "Subaru Outback", "Pixel 8", "10:15"),
# less a leading common word.
_VALUE_RE = re.compile(r"\b(?:[A-Z][\w'&-]*|\d[\d:.]*)(?:\s+(?:[A-Z][\w'&-]*|\d[\d:.]*))*")
_NOT_VALUES = frozenset({"i", "i'm", "i've", "i'd", "i'll", "mum", "dad", "monday", "tuesday", "wednesday",
                         "thursday", "friday", "saturday", "sunday", "january", "february", "march", "april", "may",
                         "june", "july", "august", "september", "october", "november", "december", "sorry", "ok"})


def mentions(text: str, said: str) -> bool:
    """Whether `text` names the value `said` as a whole word or phrase, any case ("Leeds", "Royal Canin")."""
    said = said.strip()
    if len(said) < 2:
        return False
    words = r"\s+".join(re.escape(w) for w in said.split())
    return re.search(rf"(?i)(?<![\w-]){words}(?![\w-])", text) is not None


_RELATION_WORDS = "|".join(sorted(map(re.escape, lex.RELATIONS)))


def _about(text: str, subject: str, attribute: str) -> bool:
    """Said by the speaker about `subject`: the first person for the speaker's own slots, naming no relation of
    theirs but one the attribute itself names ("my brother lives in York" is the brother's; "my new manager" is
    the speaker's manager); the subject's last word for a relation's or a thing's."""
    if subject == "self":
        if pat.SELF_RE.search(text) is None and pat.POSSESSIVE_RE.search(text) is None:
            return False
        if re.search(rf"(?i)\b(?:{_RELATION_WORDS})'s\b", text):
            return False  # a relation's ("my partner's standup")
        own = {attribute, *attribute.split(), *lex.shortlist_words(attribute)}
        return all(m.group(1).lower() in own for m in pat.RELATION_RE.finditer(text))
    word = re.escape(subject.split()[-1])
    if re.search(rf"(?i)(?<![\w'-]){word}(?![\w-])", text) is None:
        return False
    if re.search(rf"(?i)\b(?:{_RELATION_WORDS})'s\s+(?:\w+\s+)?{word}\b", text):
        return False  # someone else's ("my partner's standup")
    if subject in lex.RELATIONS or subject.split()[0] in lex.RELATIONS:
        # the relation says it, not the speaker about them ("I cook for my sister"), nor of theirs ("my sister's husband")
        return pat.SELF_RE.search(text) is None and re.search(rf"(?i)\b{word}'s\s+(?:{_RELATION_WORDS})\b", text) is None
    return True


def moves_on(text: str, said: str, subject: str, attribute: str) -> bool:
    """Whether `text` names the value `said` of the slot (`subject`, `attribute`) and tells that something changed: it is a
    statement of that slot, newer than the value (the caller keeps the order). Not a question; the clause naming
    the value says nothing hypothetical ("if I left Leeds…") nor beside it ("also", "too", "another")."""
    return names_value(text, said, subject, attribute) and any(p.search(text) is not None for p in _CHANGED)


def names_value(text: str, said: str, subject: str, attribute: str) -> bool:
    """Whether `text` names the value `said` in the speaker's voice about the slot's subject, not in a question
    and not in a clause that is hypothetical or says something beside it. An older statement naming a value the
    speaker later leaves or denies ("I don't follow Arsenal anymore") is an earlier statement of that slot."""
    if not mentions(text, said) or not _about(text, subject, attribute):
        return False
    sentences = [s for s in pat.SENTENCE_RE.split(text) if mentions(s, said)]
    if any(s.strip().endswith("?") for s in sentences):
        return False
    for sentence in sentences:  # the clause naming the value, as the claims reader blocks a clause
        for clause in pat.CLAUSE_RE.split(sentence):
            if mentions(clause, said) and (pat.HYPOTHETICAL_RE.search(clause) or pat.COEXIST_RE.search(clause)):
                return False
    return True


def named_values(text: str, *leaving: str) -> frozenset[str]:
    """The value-like phrases `text` names besides `leaving` (folded): what a later statement of the slot may
    name in turn."""
    left = {fold(v) for v in leaving}
    found: set[str] = set()
    for m in _VALUE_RE.finditer(text):
        words = m.group(0).split()
        while words and (fold(words[0]) in _NOT_VALUES or fold(words[0]) in STOP_WORDS):
            words.pop(0)  # a sentence's first word ("The new place…", "Sorry")
        value = fold(" ".join(words)).rstrip(".:")
        if value and value not in left and not any(value in v or v in value for v in left) and value not in lex.NOT_NAMES:
            found.add(value)
    return frozenset(found)


def value_query(values: set[str] | frozenset[str]) -> str | None:
    """The words to search the session with for statements naming any of `values` (None when there are none)."""
    words = sorted({w for v in values for w in fold(v).split() if len(w) > 1 or w.isdigit()})
    return " ".join(words) if words else None
