"""Reading statements of fact out of one chat message (pure): the first half of the supersession detector.

`read(text)` returns the message's claims — (subject, attribute, value) with whether it is negated,
whether a head naming the attribute said it (strong) and whether its sentence carries a change word —
and the values it says were left behind ("from Leeds to Bristol", "sold the Civic"). A sentence that
is a question, or a clause that is hypothetical ("if I moved to …", "I'd love to live in …") or says
a fact holds beside another ("I also …", "… too"), states nothing. The patterns are data in
facts.patterns; facts.rules compares two readings.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from facts import lexicon as lex
from facts import patterns as pat
from facts import values as val
from retrieval.text import content_terms, fold, stem

SELF = "self"
_RELATION_KEYS = {"mom": "mum", "mother": "mum", "father": "dad", "wife": "partner", "husband": "partner",
                  "girlfriend": "partner", "boyfriend": "partner", "fiance": "partner", "fiancee": "partner",
                  "neighbor": "neighbour", "roommate": "flatmate", "housemate": "flatmate", "coworker": "colleague",
                  "grandmother": "grandma", "gran": "grandma", "nan": "grandma", "grandfather": "grandpa",
                  "grandad": "grandpa"}
_IGNORED_TERMS = frozenset(stem(w) for w in (
    "now days anymore again still yes just really big news actually well last week month year years ago since "
    "recently finally officially update moved new got sadly luckily honestly guess").split())
# What "I" stands for with these attributes: "we migrated to GCP" is about the app, "I'm on Fedora" the computer.
_OWN_THING = {"os": "computer", "hosting": "app"}
_LEAD_FILLER = re.compile(r"(?i)^(?:\s*(?:and|but|so|yes|yeah|actually|well|oh|now|big news|update|fyi|btw)\b[\s,:]*)+")


@dataclass(frozen=True, slots=True)
class Claim:
    """One attribute of one subject, as a message states it."""

    subject: str  # "self", a relation ("sister", "friend sam") or a thing ("dev server")
    attribute: str  # "residence", "port", "favourite colour", …
    value: str  # normalised ("bristol", "8080")
    said: str  # the value as written
    negated: bool  # "no longer …", "not … anymore", "used to …", "don't …"
    strong: bool  # a phrase naming the attribute said it (not a word-list guess)
    changed: bool  # its sentence carries a change word ("moved", "now", "switched", …)
    how: str  # the pattern that read it
    bounded: bool = False  # for a while or in a narrower scope ("for the summer", "at work"): replaces nothing


@dataclass(frozen=True, slots=True)
class Leaving:
    """A value the message says was left behind, and what replaced it if it says so."""

    subject: str
    old: str
    old_said: str
    new: str | None
    new_said: str | None
    attributes: frozenset[str]  # the attributes its sentence states (empty: none)
    how: str
    bounded: bool = False  # its sentence says for a while ("for the summer"): nothing is left behind for good


@dataclass(frozen=True, slots=True)
class Reading:
    claims: tuple[Claim, ...]
    leavings: tuple[Leaving, ...]
    extra_terms: int  # content words outside every phrase read (what superseding the message would also hide)
    sequence: bool = False  # a sentence stating a fact tells several values in sequence ("then", "after that", "in 2010")


def _is_question(sentence: str) -> bool:
    s = sentence.strip()
    if s.endswith("?"):
        return True
    words = fold(s).split()
    return bool(words) and words[0].strip(",") in lex.QUESTION_WORDS and not s.endswith((".", "!"))


def relation_key(word: str, name: str | None) -> str:
    key = _RELATION_KEYS.get(fold(word), fold(word))
    return f"{key} {fold(name)}" if name and fold(name) not in lex.NOT_NAMES else key


def _thing_key(thing: str) -> str | None:
    words = [w for w in fold(thing).split() if w not in pat.THING_DROP and w != "port"]
    if not words or any(w in pat.THING_REJECT for w in words):
        return None
    key = " ".join(words)
    return "computer" if key in pat.COMPUTERS else "app" if key in pat.APPS else key


class _Sentence:
    def __init__(self, text: str) -> None:
        self.text = text
        bounds = [0] + [p for m in pat.CLAUSE_RE.finditer(text) for p in (m.start(), m.end())] + [len(text)]
        self.clauses = [(bounds[i], bounds[i + 1]) for i in range(0, len(bounds) - 1, 2)]
        self.changed = pat.MARKER_RE.search(text) is not None
        self.temporary = pat.TEMPORARY_RE.search(text) is not None and pat.SO_FAR_RE.search(text) is None
        self.scoped = pat.SCOPE_RE.search(text) is not None
        self.cues = {a for a, p in pat.CUES.items() if p.search(text)}
        self.cues |= {pat.PLURALS[m.group("plural").lower()] for m in pat.PLURAL_RE.finditer(text)}
        on = pat.ON_THING_RE.search(text)
        self.computer = _thing_key(on.group(1)) if on else None
        self.claims: list[Claim] = []
        self.covered: list[tuple[int, int]] = []

    def clause(self, pos: int) -> tuple[int, int]:
        for start, end in self.clauses:
            if start <= pos < end:
                return start, end
        return self.clauses[-1]

    def blocked(self, pos: int) -> bool:
        start, end = self.clause(pos)
        part = self.text[start:end]
        return pat.HYPOTHETICAL_RE.search(part) is not None or pat.COEXIST_RE.search(part) is not None

    def subject(self, pos: int, head: str = "") -> str | None:
        """Who the phrase at `pos` is about: "self", a relation key, or None (someone else, or unclear)."""
        start, _ = self.clause(pos)
        pre = self.text[start:pos]
        found = _last_subject(pre)
        if found is not _NOBODY:
            return found
        if start > 0:  # "My mum sold her Civic and got a …": the subject said earlier in the sentence carries over
            earlier = _last_subject(self.text[:start])
            if earlier is not _NOBODY:
                return earlier
        if pat.THIRD_PERSON_RE.match(head):  # "Lives in Leeds now": whose?
            return None
        words = _OPENER.sub("", _TRAILING_DET.sub("", pre)).split()
        first = fold(words[0].strip(",:;")) if words else ""
        if first and first not in lex.NOT_NAMES | lex.SENTENCE_STARTS and not first.endswith(("ly", "ed")):
            return None  # "Sam moved to Leeds", "Standup has moved to 9am": a subject the detector does not know
        return SELF

    def negated(self, pos: int, head_end: int, value_end: int) -> bool:
        start, end = self.clause(pos)
        before = self.text[max(start, pos - 40):head_end]
        return pat.NEGATION_RE.search(before) is not None or pat.ANYMORE_RE.search(self.text[value_end:end]) is not None

    def add(self, attribute: str, subject: str | None, parsed: val.Parsed, start: int, rest_at: int, *,
            strong: bool, how: str, negated: bool | None = None) -> None:
        said, norm, used = parsed
        if subject is None or not norm or self.blocked(start):
            return
        end = rest_at + used
        if subject == SELF and attribute in _OWN_THING:  # "I'm on Fedora": the speaker's computer
            subject = self.computer if attribute == "os" and self.computer else _OWN_THING[attribute]
        neg = self.negated(start, rest_at, end) if negated is None else negated
        bounded = self.temporary or (self.scoped and attribute not in pat.UNSCOPED)
        self.claims.append(Claim(subject, attribute, norm, said, neg, strong, self.changed, how, bounded))
        self.covered.append((start, end))


_NOBODY = "\x00nobody"  # no word in the text says who
# What may open a clause without being its subject: "These days the alarm goes at 7am".
_OPENER = re.compile(
    r"(?i)^\s*(?:(?:these\s+days|nowadays|lately|recently|now|today|tonight|yesterday|this\s+\w+|last\s+\w+|"
    r"since\s+(?:the\s+)?\w+|as\s+of\s+\w+(?:\s+\w+)?|at\s+the\s+moment|at\s+work|for\s+work|finally|actually|"
    r"honestly|so|and|but|well|oh|ok|okay|yes|yeah|big\s+news|update|news)\b[\s,:;!-]*)+"
)
_TRAILING_DET = re.compile(r"(?i)\b(?:the|a|an)\s*$")


def _last_subject(pre: str) -> str | None:
    """The subject the last subject word of `pre` names ("self", a relation, None for anyone else), or _NOBODY."""
    found: list[tuple[int, str | None]] = []
    relations = list(pat.RELATION_RE.finditer(pre))
    for m in relations:  # "my landlord's son moved": neither the landlord nor the speaker
        found.append((m.end(), None if m.group("of") and pre[m.end():].strip() else relation_key(m.group(1), m.group(3))))
    for m in pat.OTHER_RE.finditer(pre):
        found.append((m.end(), None))
    for m in pat.SELF_RE.finditer(pre):
        found.append((m.end(), SELF))
    for m in pat.POSSESSIVE_RE.finditer(pre):  # "my old colleague Ines moved …": not the speaker
        if not any(r.start() <= m.start() < r.end() for r in relations):
            words = pre[m.end():].split()
            found.append((m.end(), SELF if not words or fold(words[0]) in lex.SELF_NOUNS else None))
    return max(found, key=lambda f: f[0])[1] if found else _NOBODY


def _value_before(attribute: str, pre: str) -> val.Parsed | None:
    """A value that is the whole of `pre` ("Radiohead" in "Radiohead are my favourite band")."""
    text = _LEAD_FILLER.sub("", pre).strip()
    parsed = val.value_for(attribute)(text)
    return parsed if parsed is not None and parsed[2] >= len(text.rstrip(".")) else None


def _noun_attributes(noun: str) -> tuple[str, ...]:
    folded = " ".join(fold(noun).split())
    if folded.startswith(("favourite ", "favorite ")):
        word = folded.split()[1].replace("color", "colour")
        return ("favourite " + (word[:-1] if word.endswith("s") and not word.endswith("ss") else word),)
    if folded.endswith(("username", "user name", "handle")):
        first = folded.split()[0]
        return (f"{first} username" if first in lex.PLATFORMS else "username",)
    for rx, attrs in pat.NOUN_RES:
        if rx.match(folded):
            return attrs
    return ()


def _read_closed(s: _Sentence) -> None:
    for attribute, value, rx, negatable in pat.CLOSED:
        for m in rx.finditer(s.text):
            raw = value if value is not None else m.group(1)
            if attribute == "commute":
                raw = pat.commute_value(raw)
            if attribute == "age" and not 1 <= int(raw) <= 120:
                continue
            norm = val.normalise(raw) if attribute != "smoking" else raw
            neg = None if negatable else False
            subject = SELF if pat.SELF_RE.search(m.group(0)) else s.subject(m.start())  # "he proposed and I said yes"
            s.add(attribute, subject, (raw, norm, m.end() - m.start()), m.start(), m.start(),
                  strong=True, how=f"phrase {attribute}", negated=neg)


def _read_nouns(s: _Sentence) -> None:
    for how, rx in pat.NOUN_PATTERNS:
        for m in rx.finditer(s.text):
            noun = fold(" ".join(m.group("noun").split()))
            groups = m.groupdict()
            rel = groups.get("rel")
            if rel:
                subject: str | None = relation_key(rel, None)
            elif fold(m.group(0)).startswith(("my ", "our ", "all my ", "all our ")):
                subject = SELF  # "my usual is …": the possessive says whose
            else:
                subject = s.subject(m.start())
            for attribute in _noun_attributes(noun):
                if how == "my-noun-is" and (attribute == "residence") != (groups.get("prep") == "in"):
                    continue  # "my flat is in Leeds"; but "my bank is in Leeds" says where, not which
                if "pre" in groups and groups["pre"] is not None:
                    parsed = _value_before(attribute, groups["pre"])
                    start = m.start("pre")
                    at = start
                else:
                    parser = val.TYPED["coffee"] if noun in pat.LEX_ONLY_NOUNS else val.value_for(attribute)
                    parsed = parser(s.text[m.end():])
                    start, at = m.start(), m.end()
                if parsed is not None:
                    s.add(attribute, subject, parsed, start, at, strong=True, how=f"{how} '{noun}'")
                    break


def _read_things(s: _Sentence) -> None:
    for how, rx in pat.THING_PATTERNS:
        for m in rx.finditer(s.text):
            thing = _thing_key(m.group("thing"))
            if thing is None:
                continue
            groups = m.groupdict()
            rest = s.text[m.end():]
            prep = (groups.get("prep") or "").lower()
            port_word = bool(groups.get("port")) or "port" in fold(m.group("thing")).split() or rest.startswith(("port ", "localhost:"))
            options: list[tuple[str, val.Parsed | None]] = []
            if how != "thing-runs":
                if port_word or prep in ("on", "to", "onto"):
                    options.append(("port", val.port(rest)))
                options.append(("time", val.clock(rest)))
            if prep in ("on", "to", "onto", "with", "") or how == "thing-runs":
                options.append(("os", val.TYPED["os"](rest)))
                options.append(("hosting", val.TYPED["hosting"](rest)))
            got = [(a, p) for a, p in options if p is not None]
            if not got:
                continue
            attribute, parsed = got[0]
            assert parsed is not None
            s.add(attribute, thing, parsed, m.start(), m.end(), strong=True, how=f"{how} '{thing}'")
            old = groups.get("old")
            if old:
                parser = {"port": val.port, "time": val.clock}.get(attribute, val.cap)
                was = parser(old)
                if was is not None:
                    s.add(attribute, thing, was, m.start(), m.end(), strong=True, how=f"{how} from", negated=True)


def _read_heads(s: _Sentence) -> None:
    for attribute, rx in pat.HEADS:
        for m in rx.finditer(s.text):
            parsed = val.value_for(attribute)(s.text[m.end():])
            if parsed is None or (attribute == "residence" and (any(p.match(parsed[0]) for p in val.LEXICONS.values())
                                                                or val.school(parsed[0]) is not None)):
                continue
            head = s.text[m.start():m.end()].strip()
            subject = SELF if re.search(r"(?i)\bme\b", head) else s.subject(m.start(), head)  # "you can reach me at"
            s.add(attribute, subject, parsed, m.start(), m.end(), strong=True, how=f"head '{fold(head)}'")
    for m in pat.HIRED_RE.finditer(s.text):
        parsed = _value_before("employer", m.group("pre"))
        if parsed is not None:
            s.add("employer", SELF, parsed, m.start("pre"), m.start("pre"), strong=True, how="'… hired me'")
    for m in pat.DR_LIST_RE.finditer(s.text):
        s.add("gp", s.subject(m.start()), (m.group("v"), val.normalise(m.group("v")), len(m.group(0))), m.start(), m.start(),
              strong=True, how="'Dr …'s list'")
    for m in pat.ON_PLATFORM_RE.finditer(s.text):
        s.add(f"{fold(m.group('plat'))} username", SELF, (m.group("v"), val.normalise(m.group("v")), len(m.group(0))),
              m.start(), m.start(), strong=True, how="'I'm … on <platform>'")
    for m in pat.EMAIL_RE.finditer(s.text):  # an address is an email fact; said with an email word, a strong one
        s.add("email", s.subject(m.start()), (m.group(0), m.group(0).lower(), len(m.group(0))), m.start(),
              m.start(), strong=pat.EMAIL_CUE_RE.search(s.text) is not None, how="an email address")
    for m in pat.PHONE_NUMBER_RE.finditer(s.text):  # bare: only what looks like nothing else (no dates, no sums)
        parsed = val.phone_number(m.group(0))
        if parsed is not None and (m.group(0).startswith(("+", "0")) or len(parsed[1]) >= 10) \
                and not pat.DATE_LIKE_RE.search(m.group(0)):
            s.add("phone number", s.subject(m.start()), parsed, m.start(), m.start(), strong=False, how="a phone number")
    for m in pat.CALL_HOME_RE.finditer(s.text):
        parsed = _value_before("residence", m.group("pre"))
        if parsed is not None:
            s.add("residence", s.subject(m.start()), parsed, m.start("pre"), m.start("pre"), strong=True,
                  how="'call … home'")
    for m in pat.TOGETHER_RE.finditer(s.text):
        parsed = val.name(m.group("v"))
        if parsed is not None:
            s.add("partner", SELF, parsed, m.start(), m.start(), strong=True, how="'… and I are together'")
    for m in pat.ORG_NOUN_RE.finditer(s.text):
        parsed = _value_before("bank", m.group("pre"))  # a capitalised name, whole
        if parsed is not None:
            s.add(pat.ORG_NOUN[m.group("noun").lower()], s.subject(m.start()), parsed, m.start("pre"), m.start("pre"),
                  strong=True, how=f"'<name> {m.group('noun').lower()}'")
    for m in pat.RENAMED_RE.finditer(s.text):
        s.add(f"{fold(m.group('plat'))} username", SELF, (m.group("v"), val.normalise(m.group("v")), len(m.group(0))),
              m.start(), m.start(), strong=True, how="'renamed … on <platform>'")
    for m in pat.PLURAL_RE.finditer(s.text):
        if m.group("to"):
            attribute = pat.PLURALS[m.group("plural").lower()]
            parsed = val.value_for(attribute)(s.text[m.end():])
            if parsed is not None:
                s.add(attribute, s.subject(m.start()), parsed, m.start(), m.end(), strong=True,
                      how=f"'switched {m.group('plural').lower()} to'")


def _read_slots(s: _Sentence) -> None:
    for name, rx, candidates in pat.SLOTS:
        for m in rx.finditer(s.text):
            rest = s.text[m.end():]
            found: dict[str, val.Parsed] = {}
            for attribute, mode in candidates:
                if attribute in found or (mode == "cue" and attribute not in s.cues):
                    continue
                parser = val.TYPED[attribute] if mode == "lex" else val.value_for(attribute)
                parsed = parser(rest)
                if parsed is not None:
                    found[attribute] = parsed
            if len(found) != 1:
                continue  # nothing, or two attributes could be meant: say nothing
            ((attribute, parsed),) = found.items()
            at = m.end() if name == "is a" else m.start()  # "my sister is a …": the subject is inside the match
            s.add(attribute, s.subject(at), parsed, m.start(), m.end(), strong=False, how=f"'{name}'")


def _chunk(text: str | None) -> tuple[str, str] | None:
    if text is None:
        return None
    said = re.sub(r"(?i)^(?:(?:the|my|our|her|his|their)\s+)?(?:old\s+)?", "", text).strip()
    norm = val.normalise(said)
    return (said, norm) if norm and norm not in ("it", "them", "that", "this", "there", "him", "her") else None


def _leaving_attribute(s: _Sentence, old: str, new: str, joined: bool) -> str | None:
    """The attribute a value left behind belongs to, when its words say so: a word list ('sold the Civic and
    bought a Tesla': car), else exactly one cue of the sentence ('moved from Leeds to Bristol': residence)."""
    typed = {a for a, parse in val.TYPED.items() if a != "job" and (parse(new) or parse(old))}
    if typed:
        return typed.pop() if len(typed) == 1 else None
    cued = {a for a in s.cues | ({"employer"} if joined else set()) if val.value_for(a)(new) is not None}
    return cued.pop() if len(cued) == 1 else None


def _read_leavings(s: _Sentence, out: list[Leaving]) -> None:
    attributes = frozenset(c.attribute for c in s.claims)
    for how, rx in pat.LEAVING:
        for m in rx.finditer(s.text):
            old = _chunk(m.group("old"))
            subject = s.subject(m.start())
            if old is None or subject is None or s.blocked(m.start()):
                continue
            new = _chunk(m.groupdict().get("new"))
            out.append(Leaving(subject, old[1], old[0], new[1] if new else None, new[0] if new else None,
                               attributes, how, s.temporary))
            s.covered.append((m.start(), m.end()))
            if new is not None and not attributes:  # the replacement is a claim a later statement can supersede
                attribute = _leaving_attribute(s, old[0], new[0], "joined" in m.group(0).lower())
                parsed = val.value_for(attribute)(m.group("new")) if attribute else None
                if attribute is not None and parsed is not None:
                    s.add(attribute, subject, parsed, m.start("new"), m.start("new"), strong=False, how=f"'{how}'")


def _dedupe(claims: list[Claim]) -> tuple[Claim, ...]:
    best: dict[tuple[str, str, str, bool], Claim] = {}
    for c in claims:
        key = (c.subject, c.attribute, c.value, c.negated)
        if key not in best or (c.strong and not best[key].strong):
            best[key] = c
    return tuple(best.values())


@functools.lru_cache(maxsize=16384)
def read(text: str) -> Reading:
    """Every claim and every value left behind in `text` (cached: a session re-reads its earlier events)."""
    claims: list[Claim] = []
    leavings: list[Leaving] = []
    extra: list[str] = []
    sequence = False
    for sentence in pat.SENTENCE_RE.split(text):
        if not sentence.strip():
            continue
        if _is_question(sentence):
            extra.extend(content_terms(sentence))
            continue
        s = _Sentence(sentence)
        before = len(leavings)
        _read_closed(s)
        _read_nouns(s)
        _read_things(s)
        _read_heads(s)
        _read_slots(s)
        _read_leavings(s, leavings)
        claims.extend(s.claims)
        facts = bool(s.claims) or len(leavings) > before
        sequence = sequence or (facts and pat.SEQUENCE_RE.search(sentence) is not None)
        blanked = list(sentence)
        for start, end in s.covered:
            blanked[start:end] = " " * (end - start)
        extra.extend(content_terms("".join(blanked)))
    extra_terms = len({t for t in extra if t not in _IGNORED_TERMS})
    return Reading(_dedupe(claims), tuple(leavings), extra_terms, sequence)
