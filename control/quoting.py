"""Whether a reason repeats a word or number of a text, however it is spelled (control.plan.quoted; pure).

A forget's, revoke's or supersession's reason is kept for good (the erasure record and certificate, the control
record), so it must not carry what it names. Both sides are put in one normal form first: NFKC, Unicode format
characters (category Cf: zero-width spaces and joiners, soft hyphens, BOMs) and every default-ignorable code point
(Hangul fillers, variation selectors, tags: control.confusables.DEFAULT_IGNORABLE) dropped, the common look-alikes
of Latin letters folded to them (Cyrillic, Greek, Armenian, Cherokee, small capitals: control.confusables), case and
diacritics folded, any decimal digit read as 0-9. Then the reason quotes the text when

1. a content term of 4 letters or more, or of 3 digits or more, is in both (the floors: shorter words are too common
   to say a text was quoted, and "1" or "12" are in every other sentence);
2. a number of the text (3 digits or more: a run, or runs joined by spaces, dots, dashes, slashes or commas, as in a
   phone number) is in a number of the reason, its digits read together across the same separators ("4 7 1 1",
   "4711th", "no.4711") but not across words ("12 March at 3pm" holds 12 and 3, not 123);
3. a word of the text of 4 letters or more is in the reason's letters read together, across a space or punctuation
   ("Zanzibar quux", "Lis-bon");
4. any 4-character piece of a *name or code* of the text is in the reason's letters read together ("Zanzi",
   "ZANZIBAR" for "Zanzibarquux"). A name or code is a word written with a capital inside a sentence, with a capital
   after its first letter, or with letters and digits. Not every word: common words share 4-letter pieces all the
   time ("nothing" and "something", "misheard" and "hear"), and on LoCoMo conversations 0-4 the piece rule over every
   word refused 3.5% of (ordinary reason, memory) pairs the word rule let through (3,410 of 96,600); over names and codes, 0.03%
   (26: "asked to forget" for a text naming George, "entered by mistake" for "The Alchemist"; measured by
   tests/test_reason_obfuscation.py);
5. any of the above holds for what a base64, URL-safe base64 or hex run of the reason decodes to (as UTF-8 text);
6. or for the reason read another way: its HTML character references (`&#76;`, `&#x4C;`, `&eacute;`) and its
   percent-encoding (`%4C`) decoded; when it holds a direction control, as shown (a right-to-left override's run
   reversed: "nobsiL" shows as "Lisbon", "Lis" + override + "nob" as "Lisbon") and all in reverse; leetspeak read as letters inside a run of letters (0 o, 1 l or i, 3 e, 4 a,
   5 s, 7 t, @ a, $ s: "L1sb0n"; a number with an ordinal or a unit, "3pm", "4th", "10km", stays a number).
"""

from __future__ import annotations

import base64
import binascii
import html
import re
import unicodedata
import urllib.parse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from retrieval.text import STOP_WORDS, content_terms, fold

from .confusables import CAPITALS_TABLE, DIRECTION_CONTROLS, IGNORABLE_TABLE, SMALL_TABLE

QUOTE_LETTERS_MIN = 4  # a reason's word this long (stemmed, stop words aside) that the text holds is a quote
QUOTE_DIGITS_MIN = 3  # and a number this long: a PIN, a phone number's group, a code
PIECE_MIN = 4  # a piece of a name or code this long is a quote (rule 4)

_TOKEN = re.compile(r"[^\W_]+")  # as retrieval.text: runs of letters and digits
_NUMBER = re.compile(r"\d+(?:[ .,/\-]{1,3}\d+)*")  # a number, its groups separated as people write them
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
_LEET_I = str.maketrans({**_LEET, "1": "i"})
_LEET_L = str.maketrans(_LEET)


def _digits(text: str) -> str:
    """Any decimal digit (Arabic-Indic, Devanagari, ...) as 0-9; NFKC already read the full-width and super/subscript ones."""
    return "".join(str(unicodedata.decimal(ch)) if ch.isdecimal() else ch for ch in text)


def _cased(text: str) -> str:
    """NFKC, format characters dropped, look-alike capitals as Latin: the text with its case still there."""
    if text.isascii():
        return text
    # the look-alikes before NFKC too: it makes some of them (the lunate sigmas) a letter that looks like none
    text = unicodedata.normalize("NFKC", text.translate(CAPITALS_TABLE).translate(SMALL_TABLE))
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
    bounds: frozenset[int]  # where `letters` crosses a space or punctuation of the reason
    numbers: tuple[str, ...]  # each number's digits, read together across its separators (not across words)


@dataclass(frozen=True, slots=True)
class Held:
    """What a text holds, for the rules (`holding`)."""

    terms: frozenset[str]
    numbers: frozenset[str]  # QUOTE_DIGITS_MIN digits or more, separators dropped
    words: frozenset[str]  # QUOTE_LETTERS_MIN or more, not stop words, not all digits
    pieces: frozenset[str]  # the PIECE_MIN-character pieces of its names and codes


def _said(reason: str) -> Said:
    norm = normal_form(reason)
    terms = frozenset(t for t in content_terms(norm) if len(t) >= (QUOTE_DIGITS_MIN if t.isdigit() else QUOTE_LETTERS_MIN))
    toks = _TOKEN.findall(norm)
    bounds, at = set(), 0
    for tok in toks[:-1]:
        at += len(tok)
        bounds.add(at)
    numbers = tuple(n for m in _NUMBER.finditer(norm) if (n := "".join(ch for ch in m.group() if "0" <= ch <= "9")))
    return Said(terms, "".join(toks), frozenset(bounds), numbers)


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
        run = m.group()
        joined = "".join(ch for ch in run if ch.isdigit())
        numbers.update(d for d in re.findall(r"\d+", run) if len(d) >= QUOTE_DIGITS_MIN)
        if len(joined) >= QUOTE_DIGITS_MIN:
            numbers.add(joined)
    words = frozenset(t for t in _TOKEN.findall(norm) if len(t) >= QUOTE_LETTERS_MIN and t not in STOP_WORDS and not t.isdigit())
    pieces: set[str] = set()
    for m in _TOKEN.finditer(cased):
        if not _specific(m.group(), cased[: m.start()]):
            continue
        word = _folded(m.group())
        if len(word) >= PIECE_MIN and word not in STOP_WORDS and not word.isdigit():
            pieces.update(word[i : i + PIECE_MIN] for i in range(len(word) - PIECE_MIN + 1))
    return Held(frozenset(content_terms(norm)), frozenset(numbers), words, frozenset(pieces))


def _quotes(said: Said, held: Held) -> bool:
    if said.terms & held.terms:  # 1
        return True
    if any(n in run for run in said.numbers for n in held.numbers):  # 2
        return True
    for word in held.words:  # 3: only where the match crosses a space or punctuation (rule 1 has the rest)
        at = said.letters.find(word)
        while at >= 0:
            if any(at < b < at + len(word) for b in said.bounds):
                return True
            at = said.letters.find(word, at + 1)
    letters = said.letters
    return any(letters[i : i + PIECE_MIN] in held.pieces for i in range(len(letters) - PIECE_MIN + 1))  # 4


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
    """`text` with leetspeak read as letters inside each run holding a letter (1 as l, then as i), if that changes it."""
    runs = [
        m
        for m in _LEET_RUN.finditer(text)
        if any(c.isalpha() for c in m.group()) and any(c in _LEET for c in m.group()) and not _NUMBER_UNIT.fullmatch(m.group())
    ]
    if not runs:
        return
    for table in (_LEET_L, _LEET_I):
        out, at = [], 0
        for m in runs:
            out += [text[at : m.start()], m.group().translate(table)]
            at = m.end()
        yield "".join(out) + text[at:]


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
