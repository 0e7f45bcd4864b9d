"""What a question asks about, and whether a statement answers it (issue 12's live fact; pure).

"How old am I?" shares no word with "I turned 43 last week", and "Where do I live?" none with "we've just got
the keys to our place in Dublin": a lexical search can miss the statement that holds now. `asked(question)`
reads which tracked attributes a question asks about and of whom (the speaker, a relation of theirs, a thing
of theirs); `answers(asked, text)` says whether a statement states one of them, of that subject, as holding
(not negated, not for a while, not in a narrower scope). chat.supersede.newest_statement searches with the
attributes' words (facts.rules.topic_query) and keeps the newest statement that answers — the one a person
would call current — for one slot of the K (docs/RETRIEVAL.md, "The newest statement of what was asked").

A question about someone who is neither the speaker nor named as theirs ("Where does Caroline live?") asks
nothing here: the detector reads statements in the first person and of the speaker's relations and things.

`asks_about_past(question)` is the small rule that lets a question see superseded statements, marked
(docs/RETRIEVAL.md, "Questions about the past").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from facts import lexicon as lex
from facts.claims import _OWN_THING, SELF, read, relation_key
from facts.rules import _TOPICS, MAX_READ_CHARS
from retrieval.text import content_terms, fold

_SELF_WORDS = frozenset({"i", "me", "my", "mine", "myself", "am", "we", "our", "ours", "i'm", "im"})
_THING_ATTRIBUTES = frozenset({"time", "port"})  # of a thing the question names (facts.claims THING_PATTERNS)
_RELATIONS = lex.RELATIONS | {"mum", "dad", "partner", "neighbour", "flatmate", "colleague", "grandma", "grandpa"}


@dataclass(frozen=True, slots=True)
class Asked:
    """The tracked attributes a question asks about, of the speaker (`relations` empty) or of their relations."""

    attributes: frozenset[str]
    relations: frozenset[str]  # relation keys named after "my" ("brother", "partner"), if any
    words: frozenset[str]  # the question's words, folded (a thing's name must be among them)
    speaker: bool = True  # it asks about the speaker or theirs ("my"); False: only about a thing it names


def asked(question: str) -> Asked | None:
    """The attributes `question` asks about, or None when it names none or is not about the speaker or theirs."""
    if not isinstance(question, str) or len(question) > MAX_READ_CHARS:
        return None
    attributes = frozenset(a for t in content_terms(question) for a in _TOPICS.get(t, ()))
    if not attributes:
        return None
    words = [w.strip(".,!?;:'\"()") for w in fold(question).replace("’", "'").split()]
    # "Who is my manager?" asks the speaker's manager: a relation word that names an asked attribute is that attribute
    owners = [w.removesuffix("'s") for w in words]  # "my daughter's school" asks the daughter's
    relations = frozenset(
        relation_key(w, None)
        for before, w in zip(["", *owners], owners, strict=False)
        if w in _RELATIONS and w not in attributes and before in ("my", "our")
    )
    if not relations and not _SELF_WORDS & set(words) and not attributes & _THING_ATTRIBUTES:
        return None  # a thing's time or port may be asked without "my" ("What time is standup?")
    return Asked(attributes, relations, frozenset(words), speaker=bool(relations or _SELF_WORDS & set(words)))


def _subject_fits(q: Asked, subject: str) -> bool:
    if q.relations:
        return subject.split()[0] in q.relations
    if subject == SELF or subject in _OWN_THING.values():
        return q.speaker
    return set(subject.split()) <= q.words  # a thing of theirs the question names ("my dev server")


def _attribute_fits(q: Asked, attribute: str) -> bool:
    if attribute in q.attributes:
        return True
    *qualifier, last = attribute.split()  # "github username": a username, on the platform the question names
    return bool(qualifier) and last in q.attributes and set(qualifier) <= q.words


def answers(q: Asked, text: str) -> bool:
    """Whether `text` states an attribute `q` asks about, of its subject, as holding now."""
    if len(text) > MAX_READ_CHARS:
        return False
    return any(
        _attribute_fits(q, c.attribute) and not c.negated and not c.bounded and _subject_fits(q, c.subject)
        for c in read(text).claims
    )


# Words that ask about what held before, not what holds now (docs/RETRIEVAL.md). Whole words, any case.
PAST_WORDS = (
    "before", "used to", "previously", "previous", "former", "formerly", "old", "originally", "original",
    "history", "change", "changed", "changes", "earlier", "past", "no longer", "anymore", "any more", "prior",
)
_PAST_RE = re.compile(
    r"\b(?:" + "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in PAST_WORDS) + r"|did\s+\w+\s+use\s+to)\b", re.IGNORECASE
)
# "How old am I?" asks an age, now: "old" after "how" is not a past word
_HOW_OLD_RE = re.compile(r"\bhow\s+old\b", re.IGNORECASE)


def asks_about_past(question: str) -> bool:
    """Whether a question asks what held before ("where did I live before?", "what was my old port?"): then
    retrieval may hand the model superseded statements, each marked as superseded, with when and by what."""
    return _PAST_RE.search(_HOW_OLD_RE.sub("how", question)) is not None
