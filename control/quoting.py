"""Whether a reason repeats a word or number of a text, however it is spelled (control.plan.quoted; pure).

A forget's, revoke's or supersession's reason is kept for good (the erasure record and certificate, the control
record), so it must not carry what it names. Both sides are put in one normal form first: NFKC, Unicode format
characters (category Cf: zero-width spaces and joiners, soft hyphens, BOMs) and every default-ignorable code point
(Hangul fillers, variation selectors, tags: control.confusables.DEFAULT_IGNORABLE) dropped, the common look-alikes
of Latin letters folded to them (Cyrillic, Greek, Armenian, Cherokee, small capitals: control.confusables), case and
diacritics folded, any decimal digit read as 0-9. Then the reason quotes the text when

1. a content term of 4 letters or more, or of 3 digits or more, is in both (the floors: shorter words are too common
   to say a text was quoted, and "1" or "12" are in every other sentence). By design this holds for everyday words
   too ("I changed my mind" for a text saying "clear my mind"): the reason is kept for good, so it is reworded;
2. a number of the reason is a number of the text (3 digits or more). A number is a run of digits, or runs joined by
   spaces, dots, dashes, slashes or commas, its digits read together ("4 7 1 1", "4711th", "no.4711"); or single
   digits one by one with any one other non-alphanumeric character between them ("4;7;1;1", "4_7_1_1", "4·7·1·1");
   or number words in a row ("four seven one one", "forty-seven eleven": zero to nineteen and the tens). The whole
   number must be the text's, not a part of it: "since 2023" does not hold 202, "3/4/2024" not 342 (digits of
   different words are not joined either: "12 March at 3pm" holds 12 and 3, not 123). The text's numbers are its
   runs, their groups of 3 digits or more, and their consecutive groups of 2 digits or more read together ("+351 912
   345 678" holds 912345678); one of LONG_NUMBER (6) digits or more is also found as consecutive groups of a longer
   number of the reason ("351 912 345 678" holds 912345678);
3. a word of the text of 4 letters or more is two or more whole words of the reason read together, across a space or
   punctuation ("Zanzi barquux", "Lis-bon"; not "12 March at" for "chat": the match starts inside "March");
4. a piece of 4 characters or more of a *name or code* of the text makes up the words of the reason it is in, but
   for a letter for each 6 of it ("Zanzi", "ZANZIBAR" for "Zanzibarquux", "Zanzibars"), or the whole name or code is
   inside a word of the reason. A name or code is a word written with a capital inside a sentence, with a capital
   after its first letter, or with letters and digits. Not every word: common words share 4-letter pieces all the
   time ("nothing" and "something", "misheard" and "hear"), and on LoCoMo conversations 0-4 the piece rule over every
   word refused 3.5% of (ordinary reason, memory) pairs the word rule let through (3,410 of 96,600). Nor any piece:
   a name shares pieces with ordinary words too ("confidential" and "accident" hold "iden" of "Identity", "personal"
   "pers" of "Perseid"); over names and codes, any piece refused 0.03% (26 pairs: "entered by mistake" for "The
   Alchemist"), pieces that make up the reason's words none; rules 1-4 together refuse 2 pairs the word rule lets
   through ("not needed any more" for a text saying "anymore", rule 3; measured by tests/services/test_reason_obfuscation.py);
5. any of the above holds for what a base64, URL-safe base64 or hex run of the reason decodes to (as UTF-8 text);
6. or for the reason read another way: its HTML character references (`&#76;`, `&#x4C;`, `&eacute;`) and its
   percent-encoding (`%4C`) decoded; when it holds a direction control, as shown (a right-to-left override's run
   reversed: "nobsiL" shows as "Lisbon", "Lis" + override + "nob" as "Lisbon") and all in reverse; leetspeak read as
   letters inside a run of letters (0 o, 1 l or i, each way for up to 4 of them, 3 e, 4 a, 5 s, 7 t, @ a, $ s:
   "L1sb0n", "115b0n"; a number with an ordinal or a unit, "3pm", "4th", "10km", stays a number).

The enclosed Latin capitals NFKC leaves alone (negative circled 🅛, negative squared 🅻, regional indicators 🇱) are
read as the letters they show (control.confusables.ENCLOSED).
"""

from __future__ import annotations

import base64
import binascii
import html
import itertools
import re
import unicodedata
import urllib.parse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from control.confusables import CAPITALS_TABLE, DIRECTION_CONTROLS, ENCLOSED_TABLE, IGNORABLE_TABLE, SMALL_TABLE
from retrieval.text import STOP_WORDS, content_terms, fold

QUOTE_LETTERS_MIN = 4  # a reason's word this long (stemmed, stop words aside) that the text holds is a quote
QUOTE_DIGITS_MIN = 3  # and a number this long: a PIN, a phone number's group, a code
PIECE_MIN = 4  # a piece of a name or code this long is a quote (rule 4)
LONG_NUMBER = 6  # a number of the text this long is a quote as consecutive groups of a longer number of the reason

_TOKEN = re.compile(r"[^\W_]+")  # as retrieval.text: runs of letters and digits
_NUMBER = re.compile(r"\d+(?:[ .,/\-]{1,3}\d+)*")  # a number, its groups separated as people write them
# single digits one by one, with any one non-alphanumeric character between them (spaces around it or not)
_DIGIT_BY_DIGIT = re.compile(r"(?<![0-9])[0-9](?![0-9])(?:(?:\s?(?:[^\w\s]|_)\s?|\s+)[0-9](?![0-9]))+")
_DIGIT_SEP = re.compile(r"(?:[\W_]){1,3}")  # what may stand between two number words of one number
_UNITS = {w: str(i) for i, w in enumerate("zero one two three four five six seven eight nine".split())}
_TEENS = {w: str(10 + i) for i, w in enumerate("ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split())}
_TENS = {w: str(2 + i) for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())}
_B64_RUN = re.compile(r"[A-Za-z0-9+/_\-]{4,}={0,2}")
_HEX_RUN = re.compile(r"[0-9A-Fa-f]{6,}")
_SENTENCE_END = frozenset(".!?:;\"'“”‘’([{\n")
_RLO_RUN = re.compile("\u202e([^\u202c\n]*)\u202c?")  # a right-to-left override's run: shown reversed, up to its PDF
_LEET_RUN = re.compile(r"(?:[^\W_]|[@$])+")  # a run of letters, digits, '@' and '$'
_LEET = {"0": "o", "1": "l", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s"}
# a number with an ordinal or unit is a number, not leetspeak ("3pm", "4th", "10km")
_NUMBER_UNIT = re.compile(
    r"\d+(?:st|nd|rd|th|s|am|pm|h|hr|hrs|m|min|mins|d|k|km|kg|g|cm|mm|ml|l|x|kb|mb|gb|mph|ft|lb|lbs|oz|yr|yrs)", re.I
)
_LEET_L = str.maketrans(_LEET)
LEET_ONES = 4  # up to this many 1s in leetspeak are read each way (l or i: "115b0n"); more, all as l then all as i


def _digits(text: str) -> str:
    """Any decimal digit (Arabic-Indic, Devanagari, ...) as 0-9; NFKC already read the full-width and super/subscript ones."""
    return "".join(str(unicodedata.decimal(ch)) if ch.isdecimal() else ch for ch in text)


def _cased(text: str) -> str:
    """NFKC, format characters dropped, look-alike capitals as Latin: the text with its case still there."""
    if text.isascii():
        return text
    # the look-alikes before NFKC too: it makes some of them (the lunate sigmas) a letter that looks like none
    text = unicodedata.normalize("NFKC", text.translate(ENCLOSED_TABLE).translate(CAPITALS_TABLE).translate(SMALL_TABLE))
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf").translate(IGNORABLE_TABLE).translate(CAPITALS_TABLE)
    return _digits(text)


def _folded(cased: str) -> str:
    """The normal form: case and diacritics folded, look-alike small letters as Latin."""
    out = fold(cased)
    if not out.isascii():
        out = out.translate(SMALL_TABLE)
    return out if out.isascii() else out.translate(CAPITALS_TABLE).lower()  # a capital casefold leaves (Cherokee)


def normal_form(text: str) -> str:
    """The normal form both sides are compared in (module docstring)."""
    return _folded(_cased(text))


@dataclass(frozen=True, slots=True)
class Said:
    """What a reason says, for the rules (`reading`)."""

    terms: frozenset[str]  # content terms of QUOTE_LETTERS_MIN letters / QUOTE_DIGITS_MIN digits or more
    letters: str  # the letters and digits, read together
    edges: tuple[int, ...]  # where each word of the reason starts and ends in `letters` (0 ... len(letters))
    numbers: tuple[tuple[str, ...], ...]  # each number's groups of digits, in order (read together: the number)


@dataclass(frozen=True, slots=True)
class Held:
    """What a text holds, for the rules (`holding`)."""

    terms: frozenset[str]
    numbers: frozenset[str]  # QUOTE_DIGITS_MIN digits or more, separators dropped (a number and its groups)
    words: frozenset[str]  # QUOTE_LETTERS_MIN or more, not stop words, not all digits
    names: frozenset[str]  # its names and codes (folded), PIECE_MIN characters or more
    pieces: frozenset[str]  # the PIECE_MIN-character pieces of its names and codes


def _number_words(norm: str) -> Iterator[tuple[str, ...]]:
    """Numbers spelled out word by word ("four seven one one", "forty-seven eleven"): each word's digits, in order."""
    groups: list[str] = []
    end = -1
    tens = ""
    for m in _TOKEN.finditer(norm):
        word = m.group()
        digits = _UNITS.get(word) or _TEENS.get(word) or _TENS.get(word)
        if digits is None or (groups and not _DIGIT_SEP.fullmatch(norm[end : m.start()])):
            if len(groups) > 1:
                yield tuple(groups)
            groups, tens = [], ""
            if digits is None:
                continue
        if tens and word in _UNITS and word != "zero":  # "forty seven": 47
            groups[-1] = tens + digits
            tens = ""
        else:
            tens = digits if word in _TENS else ""
            groups.append(digits + "0" if tens else digits)
        end = m.end()
    if len(groups) > 1:
        yield tuple(groups)


def _said(reason: str) -> Said:
    norm = normal_form(reason)
    terms = frozenset(t for t in content_terms(norm) if len(t) >= (QUOTE_DIGITS_MIN if t.isdigit() else QUOTE_LETTERS_MIN))
    toks = _TOKEN.findall(norm)
    edges, at = [0], 0
    for tok in toks:
        at += len(tok)
        edges.append(at)
    numbers = [tuple(g) for m in _NUMBER.finditer(norm) if (g := re.findall(r"[0-9]+", m.group()))]
    numbers += [tuple(re.findall(r"[0-9]", m.group())) for m in _DIGIT_BY_DIGIT.finditer(norm)]
    numbers += _number_words(norm)
    return Said(terms, "".join(toks), tuple(dict.fromkeys(edges)), tuple(dict.fromkeys(numbers)))


def _specific(word: str, before: str) -> bool:
    """A name or code: letters and digits, a capital after the first letter, or a capital inside a sentence."""
    if any(c.isdigit() for c in word) and any(c.isalpha() for c in word):
        return True
    if any(c.isupper() for c in word[1:]):
        return True
    prev = before.rstrip()
    return word[:1].isupper() and bool(prev) and prev[-1] not in _SENTENCE_END


def _text(text: str) -> Held:
    cased = _cased(text)
    norm = _folded(cased)
    numbers: set[str] = set()
    for m in _NUMBER.finditer(norm):
        groups = re.findall(r"[0-9]+", m.group())
        numbers.add("".join(groups))  # the number, and its groups of 2 digits or more read together ("912 345 678")
        for i in range(len(groups)):
            for j in range(i + 1, len(groups) + 1):
                if all(len(g) >= 2 for g in groups[i:j]):
                    numbers.add("".join(groups[i:j]))
    numbers = {n for n in numbers if len(n) >= QUOTE_DIGITS_MIN}
    words = frozenset(t for t in _TOKEN.findall(norm) if len(t) >= QUOTE_LETTERS_MIN and t not in STOP_WORDS and not t.isdigit())
    names: set[str] = set()
    for m in _TOKEN.finditer(cased):
        if not _specific(m.group(), cased[: m.start()]):
            continue
        word = _folded(m.group())
        if len(word) >= PIECE_MIN and word not in STOP_WORDS and not word.isdigit():
            names.add(word)
    pieces = frozenset(w[i : i + PIECE_MIN] for w in names for i in range(len(w) - PIECE_MIN + 1))
    return Held(frozenset(content_terms(norm)), frozenset(numbers), words, frozenset(names), pieces)


def _number_quoted(groups: tuple[str, ...], held: Held) -> bool:
    """Rule 2: the reason's number is a number of the text, or a long number of the text is some of its groups."""
    if "".join(groups) in held.numbers:
        return True
    for i in range(len(groups)):
        joined = ""
        for group in groups[i:]:
            joined += group
            if len(joined) >= LONG_NUMBER and joined in held.numbers:
                return True
    return False


def _hidden_piece(said: Said, held: Held) -> bool:
    """Rule 4: a piece of a name or code of the text that makes up the reason's words it is in (but for a letter for
    each 6 of it), or the whole name or code inside one word of the reason."""
    letters, edges = said.letters, said.edges
    for i in range(len(letters) - PIECE_MIN + 1):
        if letters[i : i + PIECE_MIN] not in held.pieces:
            continue
        j = i + PIECE_MIN
        while j < len(letters) and any(letters[i : j + 1] in name for name in held.names):
            j += 1
        start = max(e for e in edges if e <= i)  # the first word it is in starts here, the last ends at `end`
        end = min(e for e in edges if e >= j)
        if letters[i:j] in held.names and not any(i < e < j for e in edges):  # the whole name, inside one word
            return True
        if (end - start) - (j - i) <= (j - i) // 6:
            return True
    return False


def _quotes(said: Said, held: Held) -> bool:
    if said.terms & held.terms:  # 1
        return True
    if any(_number_quoted(groups, held) for groups in said.numbers):  # 2
        return True
    edges = said.edges
    for word in held.words:  # 3: only whole words of the reason, two or more (rule 1 has one)
        at = said.letters.find(word)
        while at >= 0:
            if at in edges and at + len(word) in edges and any(at < e < at + len(word) for e in edges):
                return True
            at = said.letters.find(word, at + 1)
    return _hidden_piece(said, held)  # 4


def _printable(raw: bytes) -> str | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if text and all(ch.isprintable() or ch.isspace() for ch in text) else None


def _decoded(reason: str) -> Iterator[str]:
    """What the reason's base64 / URL-safe base64 / hex runs decode to, as text (each run also from its 2nd, 3rd and
    4th character: a base64 word pasted after a letter of the reason still decodes)."""
    plain = _cased(reason)  # a zero-width character or a look-alike letter inside a run does not hide it
    for m in _B64_RUN.finditer(plain):
        run = m.group().rstrip("=").replace("-", "+").replace("_", "/")
        for start in range(min(4, len(run))):
            part = run[start:]
            part = part[: len(part) - len(part) % 4 if len(part) % 4 == 1 else len(part)]
            if len(part) < 2:
                continue
            try:
                raw = base64.b64decode(part + "=" * (-len(part) % 4), validate=True)
            except (binascii.Error, ValueError):
                continue
            text = _printable(raw)
            if text is not None:
                yield text
    for m in _HEX_RUN.finditer(plain):
        run = m.group()
        for start in (0, 1):
            part = run[start : start + (len(run) - start) // 2 * 2]
            text = _printable(binascii.unhexlify(part)) if part else None
            if text is not None:
                yield text


def _leet(text: str) -> Iterator[str]:
    """`text` with leetspeak read as letters inside each run holding a letter (each 1 as l or as i), if that changes it."""
    runs = [
        m
        for m in _LEET_RUN.finditer(text)
        if any(c.isalpha() for c in m.group()) and any(c in _LEET for c in m.group()) and not _NUMBER_UNIT.fullmatch(m.group())
    ]
    if not runs:
        return
    out, at = [], 0
    for m in runs:
        out += [text[at : m.start()], m.group().translate(_LEET_L)]
        at = m.end()
    read = "".join(out) + text[at:]  # each 1 read as l; then each way of reading up to LEET_ONES of them as i
    ones = [k for k, ch in enumerate(read) if ch == "l" and text[k] == "1"]
    picks = itertools.product("li", repeat=len(ones)) if len(ones) <= LEET_ONES else iter(("l" * len(ones), "i" * len(ones)))
    for pick in picks:
        chars = list(read)
        for k, ch in zip(ones, pick, strict=True):
            chars[k] = ch
        yield "".join(chars)


def _readings(reason: str) -> Iterator[str]:
    """The reason read each way of rule 6 (the module docstring), the reason itself first."""
    plain = [reason]
    if "&" in reason:
        plain.append(html.unescape(reason))
    if "%" in reason:
        plain += [urllib.parse.unquote(t) for t in plain]
    if any(ch in DIRECTION_CONTROLS for ch in reason):  # as shown (each override's run reversed), and all reversed
        plain += [_RLO_RUN.sub(lambda m: m.group(1)[::-1], t) for t in plain] + [t[::-1] for t in plain]
    for text in plain:
        yield text
        yield from _leet(_cased(text))


def reading(reason: str) -> tuple[Said, ...]:
    """What the rules read in a reason: the reason as written, read each other way of rule 6, and each text its
    encoded runs decode to."""
    texts = dict.fromkeys(_readings(reason))
    decoded = dict.fromkeys(d for t in texts for d in _decoded(t))
    return tuple(_said(t) for t in dict.fromkeys([*texts, *decoded]))


def holding(text: str) -> Held:
    """What the rules look for in a text."""
    return _text(text)


def quotes(read: tuple[Said, ...], held: Held) -> bool:
    """Whether a reason `reading` gave quotes a text `holding` gave (for checking many pairs, each side read once)."""
    return any(_quotes(s, held) for s in read)


def first_quoted(reason: str, texts: Iterable[str]) -> int | None:
    """The index of the first of `texts` that `reason` quotes (the reason read once), or None."""
    read = reading(reason)
    return next((i for i, text in enumerate(texts) if quotes(read, _text(text))), None)


def quoted(reason: str, text: str) -> bool:
    """Whether `reason` repeats a word or number of `text`, however spelled (the module docstring's rules)."""
    return quotes(reading(reason), _text(text))
