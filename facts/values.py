"""Value slots of the supersession detector: what a fact's value looks like, and when two values are one.

Each parser reads a value at the *start* of the text after a head ("I live in |Bristol, near…") and
returns (as written, normalised, characters used), or None. A value two parsers disagree about is
not a value: the detector then states nothing. Pure functions, no state.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from facts import lexicon as lex
from retrieval.text import fold, tokens

Parsed = tuple[str, str, int]  # (said, normalised, end offset in the text parsed)

_ARTICLE = r"(?:(?i:the|a|an|my|our|her|his|their)\s+)?"
_CAP_TOKEN = r"(?:[A-Z0-9][\w'&.+-]*|[a-z]{1,4}[A-Z][\w.+-]*)"
_CAP_SEQ = re.compile(rf"{_ARTICLE}({_CAP_TOKEN}(?:\s+(?:of\s+|upon\s+)?{_CAP_TOKEN})*)")
_ARTICLE_RE = re.compile(_ARTICLE)
_NAME = re.compile(r"(?:(?:Dr|Doctor)\.?\s+)?([A-Z][a-z]+(?:[-'][A-Z][a-z]+)?)(?:\s+([A-Z][a-z]+))?")
_PORT = re.compile(
    r"(?i)(?:port\s+(?:number\s+)?|localhost:|:)?([1-9]\d{1,4})(?![\d:.]\d|\d|\s*\d|\s*(?:am|pm|a\.m|p\.m|%|k\b|years?|days?|"
    r"minutes?|mins?|hours?|hrs?|weeks?|months?|people|times|euros?|pounds?|dollars?|quid|miles?|km))"
)
_AGE = re.compile(r"(?i)(\d{1,3})(?:\s+years?\s+old)?(?=\s*(?:now|today|this year|already|again)?\s*(?:[.,;!]|$))")
_TIME = re.compile(r"(?i)(\d{1,2})(?:[:.](\d{2}))?\s?(am|pm|a\.m\.|p\.m\.)?")
_EMAIL = re.compile(r"([\w.+-]+@[\w-]+(?:\.[\w-]+)+)")
_PHONENUM = re.compile(r"(\+?\d[\d -]{6,}\d)")
_TOKEN = re.compile(r"([A-Za-z0-9][\w.-]{1,38}[A-Za-z0-9])")
_FREE_STOP = re.compile(
    r"(?i)\s*(?:[,.;:!?()]|\s-\s|\band\b|\bbut\b|\bbecause\b|\bsince\b|\bso\b|\bwhich\b|\bthat\b|\bwho\b|\bnow\b|"
    r"\bthese days\b|\bnowadays\b|\bagain\b|\banymore\b|\bany more\b|\bat the moment\b|\bcurrently\b|\bthough\b|"
    r"\blast\b|\bthis\b|\bfor\b|\bafter\b|\bbefore\b|\bsince\b|\bin\b|\bat\b|\bon\b|\bwith\b)"
)
# Words that end a value without being part of it ("Bristol now", "Acme these days").
_TRAILING = frozenset("now nowadays again anymore currently today".split())
_DROP = frozenset("a an the my our her his their dr doctor mr mrs ms".split())


def _lexicon(entries: tuple[str, ...] | list[str]) -> re.Pattern[str]:
    alts = "|".join(re.escape(e) for e in sorted(entries, key=len, reverse=True))
    return re.compile(rf"{_ARTICLE}((?i:{alts}))(?![\w+#])")


def normalise(said: str) -> str:
    """Folded tokens without articles, titles or trailing time words: 'the Honda Civic' -> 'honda civic'."""
    toks = [t for t in tokens(said.replace("'s ", " ")) if t not in _DROP]
    while toks and toks[-1] in _TRAILING:
        toks.pop()
    return " ".join(toks)


def same_value(a: str, b: str) -> bool:
    """One value said twice: equal, or one's words contain the other's ('Civic' and 'Honda Civic')."""
    if a == b:
        return True
    ta, tb = set(a.split()), set(b.split())
    return bool(ta) and bool(tb) and (ta <= tb or tb <= ta)


def cap(text: str) -> Parsed | None:
    """A proper noun or model: capitalised words and numbers ('Bristol', 'Tesla Model 3', 'macOS')."""
    m = _CAP_SEQ.match(text)
    if m is None:
        return None
    said = m.group(1).rstrip(".")
    words = said.split()
    if said.endswith("'s") or fold(words[0]) in lex.NOT_NAMES or not any(c.isalpha() for c in said):
        return None
    if fold(words[-1]) in _TRAILING:
        said = " ".join(words[:-1])
        if not said:
            return None
    return said, normalise(said), m.start(1) + len(said)


def name(text: str) -> Parsed | None:
    m = _NAME.match(text)
    if m is None or fold(m.group(1)) in lex.NOT_NAMES:
        return None
    said = m.group(1) if m.group(2) is None or fold(m.group(2)) in lex.NOT_NAMES else f"{m.group(1)} {m.group(2)}"
    if text[m.start(1) + len(said):].startswith("'s"):
        return None
    return said, normalise(said), m.start(1) + len(said)


def port(text: str) -> Parsed | None:
    m = _PORT.match(text)
    if m is None or not 1 <= int(m.group(1)) <= 65535:
        return None
    return m.group(1), str(int(m.group(1))), m.end(1)


def age(text: str) -> Parsed | None:
    m = _AGE.match(text)
    if m is None or not 1 <= int(m.group(1)) <= 120:
        return None
    return m.group(1), str(int(m.group(1))), m.end(1)


def clock(text: str) -> Parsed | None:
    """A time of day: '6am', '7:30', '10:30pm' (a bare number is not one)."""
    m = _TIME.match(text)
    if m is None or (m.group(2) is None and m.group(3) is None):
        return None
    hour, minute = int(m.group(1)), int(m.group(2) or 0)
    if m.group(3) and m.group(3).lower().startswith("p") and hour < 12:
        hour += 12
    if hour > 23 or minute > 59:
        return None
    return m.group(0).strip(), f"{hour}:{minute:02d}", m.end()


def email(text: str) -> Parsed | None:
    m = _EMAIL.match(text)
    return None if m is None else (m.group(1), m.group(1).lower(), m.end(1))


def phone_number(text: str) -> Parsed | None:
    m = _PHONENUM.match(text)
    if m is None:
        return None
    digits = re.sub(r"\D", "", m.group(1))
    return (m.group(1), digits, m.end(1)) if len(digits) >= 7 else None


def token(text: str) -> Parsed | None:
    m = _TOKEN.match(text)
    if m is None or fold(m.group(1)) in lex.NOT_NAMES:
        return None
    return m.group(1), normalise(m.group(1)), m.end(1)


def free(text: str) -> Parsed | None:
    """A short phrase up to the end of its clause ('blue', 'oat milk latte'): 1-5 words."""
    m = _FREE_STOP.search(text)
    said = (text if m is None else text[: m.start()]).strip()
    said = _ARTICLE_RE.sub("", said, count=1) if _ARTICLE_RE.match(said) else said
    words = said.split()
    if not 1 <= len(words) <= 5:
        return None
    norm = normalise(said)
    return (said, norm, text.find(said) + len(said)) if norm else None


def _from_lexicon(pattern: re.Pattern[str], then_cap: bool = False) -> Callable[[str], Parsed | None]:
    """A value that starts with a lexicon entry; `then_cap` keeps the model after a make ('Honda Civic')."""

    def parse(text: str) -> Parsed | None:
        m = pattern.match(text)
        if m is None:
            return None
        if then_cap:
            rest = cap(text[m.start(1):])
            if rest is not None:
                return rest[0], rest[1], m.start(1) + rest[2]
        said = m.group(1)
        tail = re.match(r"\s+(\d{1,2})\b", text[m.end(1):])  # 'Windows 11'
        if tail is not None:
            said += tail.group(0)
        return said, normalise(said), m.start(1) + len(said)

    return parse


def colour(text: str) -> Parsed | None:
    m = _COLOUR.match(text)
    return None if m is None else (m.group(1), normalise(m.group(1)), m.end(1))


_COLOUR = re.compile(
    r"(?i)((?:(?:dark|light|bright|pale|deep|pastel|jet|ash|strawberry|neon|hot)\s+)?(?:"
    + "|".join(lex.COLOURS)
    + r"))\b"
)

LEXICONS: dict[str, re.Pattern[str]] = {
    "car": _lexicon(lex.CAR_MAKES),
    "phone": _lexicon(lex.PHONE_MAKES),
    "editor": _lexicon(lex.EDITORS),
    "os": _lexicon(lex.OSES),
    "browser": _lexicon(lex.BROWSERS),
    "shell": _lexicon(lex.SHELLS),
    "work language": _lexicon(lex.LANGUAGES),
    "hosting": _lexicon(lex.CLOUDS),
    "coffee": _lexicon(lex.COFFEES),
    "timezone": _lexicon(lex.TIMEZONES),
    "gym": _lexicon(lex.GYMS),
    "medication": _lexicon(lex.MEDICATIONS),
    "diet": _lexicon(("vegetarian", "vegan", "pescatarian", "keto", "gluten-free", "omnivore", "flexitarian")),
    "job": _lexicon(lex.PROFESSIONS),
}

# Typed by a word list: a generic slot ("I switched to X") names one of these only when X is in its list.
TYPED: dict[str, Callable[[str], Parsed | None]] = {
    name_: _from_lexicon(pattern, then_cap=name_ in ("car", "phone")) for name_, pattern in LEXICONS.items()
}


def _first(*parsers: Callable[[str], Parsed | None]) -> Callable[[str], Parsed | None]:
    def parse(text: str) -> Parsed | None:
        for p in parsers:
            got = p(text)
            if got is not None:
                return got
        return None

    return parse


# What a head naming the attribute outright takes as its value (a word list first, then the general shape).
def place(text: str) -> Parsed | None:
    """A place: a proper noun that starts with a letter ('9am' is a time, not a town)."""
    got = cap(text)
    return got if got is not None and got[0][:1].isalpha() else None


_SCHOOL_WORDS = frozenset("school primary academy college high grammar nursery".split())


def school(text: str) -> Parsed | None:
    """A school's name: capitalised words ending in a school word ('Oakfield Primary'), or a saint's ('St Brigid's')."""
    m = re.match(r"\s*(?:the\s+)?(St\.?\s+[A-Z][a-z]+'s(?:\s+[A-Z][a-z]+)?)", text)
    if m is not None:
        return m.group(1), normalise(m.group(1)), m.end(1)
    got = cap(text)
    return got if got is not None and fold(got[0].split()[-1]) in _SCHOOL_WORDS else None


VALUE: dict[str, Callable[[str], Parsed | None]] = {
    "residence": place,
    "employer": cap,
    "university": cap,
    "gym": _first(TYPED["gym"], cap),
    "bank": cap,
    "mobile network": cap,
    "broadband": cap,
    "partner": name,
    "manager": name,
    "gp": name,
    "name": name,
    "job": TYPED["job"],
    "car": _first(TYPED["car"], cap),
    "phone": TYPED["phone"],  # a make it knows: "moved my phone over to Tesco Mobile" is a network
    "editor": _first(TYPED["editor"], cap),
    "os": _first(TYPED["os"], cap),
    "browser": _first(TYPED["browser"], cap),
    "shell": _first(TYPED["shell"], token),
    "work language": _first(TYPED["work language"], cap),
    "hosting": _first(TYPED["hosting"], cap),
    "coffee": _first(TYPED["coffee"], free),
    "timezone": _first(TYPED["timezone"], cap),
    "phone number": phone_number,
    "email": email,
    "port": port,
    "time": clock,
    "wake-up time": clock,
    "age": age,
    "hair colour": colour,
    "username": token,
    "address": free,
    "medication": TYPED["medication"],
    "diet": TYPED["diet"],
    "football team": place,
    "school": school,
    "laptop": cap,
}


def value_for(attribute: str) -> Callable[[str], Parsed | None]:
    """The parser of an attribute's value; 'favourite X' takes a short phrase."""
    return VALUE.get(attribute, free)
