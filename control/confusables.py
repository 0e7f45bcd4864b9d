"""Letters that look like Latin ones, and code points that show nothing, as data (for control.quoting's normal form).

Look-alikes: a subset of Unicode's confusables.txt (UTS #39, "Unicode Security Mechanisms"): the common Cyrillic,
Greek, Armenian, Cherokee and Latin-extension letters and letterlike symbols whose prototype there is a Latin letter,
and the Latin small capitals (ᴀ-ᴢ: LATIN LETTER SMALL CAPITAL X is folded to x; confusables.txt gives most of them a
Latin prototype, and each is named after the letter it shows). Not the whole file: a reason's check only needs the
look-alikes a person can type or paste in place of a letter of a memory's word. Two tables, because the lower case
of a look-alike capital does not always look like the lower-case Latin letter (Greek Ν is N, its ν looks like v):
CAPITALS is applied before case folding, SMALL after it (so a small letter here is matched whichever case it was
typed in).

Invisible code points: Unicode's Default_Ignorable_Code_Point property (DerivedCoreProperties.txt, Unicode 15.1),
as ranges: they render as nothing (Hangul fillers, variation selectors, tags, bidi and zero-width controls), so one
inside a word hides it from a comparison that keeps it. DIRECTION_CONTROLS are the bidi controls among them that can
show a run of letters in reverse (UAX #9: embeddings, overrides, isolates, marks).
"""

from __future__ import annotations

# capital look-alike -> Latin capital (the palochka Ӏ -> l, its prototype in confusables.txt)
CAPITALS: dict[str, str] = {
    # Cyrillic
    "\u0410": "A", "\u0412": "B", "\u0421": "C", "\u0415": "E", "\u041d": "H", "\u0406": "I", "\u0408": "J",
    "\u041a": "K", "\u041c": "M", "\u041e": "O", "\u0420": "P", "\u0405": "S", "\u0422": "T", "\u0425": "X",
    "\u0423": "Y", "\u04ae": "Y", "\u051a": "Q", "\u051c": "W", "\u04c0": "l", "\u0474": "V", "\u0500": "D",
    # Greek
    "\u0391": "A", "\u0392": "B", "\u0395": "E", "\u0396": "Z", "\u0397": "H", "\u0399": "I", "\u039a": "K",
    "\u039c": "M", "\u039d": "N", "\u039f": "O", "\u03a1": "P", "\u03a4": "T", "\u03a5": "Y", "\u03a7": "X",
    "\u03f9": "C", "\u037f": "J",
    # Armenian
    "\u0555": "O", "\u054d": "U", "\u054f": "S",
    # Cherokee (casefold leaves a Cherokee capital as it is, and turns a small one into it)
    "\u13aa": "A", "\u13f4": "B", "\u13df": "C", "\u13a0": "D", "\u13ac": "E", "\u13c0": "G", "\u13bb": "H",
    "\u13a5": "i", "\u13ab": "J", "\u13e6": "K", "\u13de": "L", "\u13b7": "M", "\u13e2": "P", "\u13a1": "R",
    "\u13da": "S", "\u13a2": "T", "\u13d9": "V", "\u13b3": "W", "\u13c3": "Z",
}  # fmt: skip

# small look-alike (as case folding leaves it) -> Latin small letter
SMALL: dict[str, str] = {
    # Cyrillic
    "\u0430": "a", "\u0441": "c", "\u0501": "d", "\u0435": "e", "\u04bb": "h", "\u0456": "i", "\u0458": "j",
    "\u04cf": "l", "\u043e": "o", "\u0440": "p", "\u051b": "q", "\u0455": "s", "\u0475": "v", "\u051d": "w",
    "\u0445": "x", "\u0443": "y", "\u04af": "y",
    # Greek
    "\u03b1": "a", "\u03f2": "c", "\u03b9": "i", "\u03f3": "j", "\u03ba": "k", "\u03bf": "o", "\u03c1": "p",
    "\u03c5": "u", "\u03bd": "v", "\u03c7": "x", "\u03b3": "y",
    # Cyrillic, more
    "\u0433": "r", "\u043f": "n", "\u044c": "b", "\u0461": "w", "\u04bd": "e", "\u0509": "u",
    # Greek, more
    "\u03b7": "n", "\u03f1": "p", "\u03c9": "w",
    # Armenian
    "\u0585": "o", "\u057d": "u", "\u0570": "h", "\u0578": "n", "\u0581": "g", "\u0566": "q", "\u0584": "f",
    # Latin letters outside ASCII
    "\u0251": "a", "\u0261": "g", "\u0269": "i", "\u0131": "i", "\u0237": "j", "\u01c0": "l", "\u028b": "u",
    "\u0252": "a",
    # Latin small capitals (LATIN LETTER SMALL CAPITAL A ... Z)
    "\u1d00": "a", "\u0299": "b", "\u1d04": "c", "\u1d05": "d", "\u1d07": "e", "\ua730": "f", "\u0262": "g",
    "\u029c": "h", "\u026a": "i", "\u1d0a": "j", "\u1d0b": "k", "\u029f": "l", "\u1d0d": "m", "\u0274": "n",
    "\u1d0f": "o", "\u1d18": "p", "\ua7af": "q", "\u0280": "r", "\ua731": "s", "\u1d1b": "t", "\u1d1c": "u",
    "\u1d20": "v", "\u1d21": "w", "\u028f": "y", "\u1d22": "z",
    # letterlike symbols NFKC leaves alone
    "\u212e": "e",
    # Cherokee capitals, as casefold leaves them (CAPITALS has them too)
    "\u13aa": "a", "\u13f4": "b", "\u13df": "c", "\u13a0": "d", "\u13ac": "e", "\u13c0": "g", "\u13bb": "h",
    "\u13a5": "i", "\u13ab": "j", "\u13e6": "k", "\u13de": "l", "\u13b7": "m", "\u13e2": "p", "\u13a1": "r",
    "\u13da": "s", "\u13a2": "t", "\u13d9": "v", "\u13b3": "w", "\u13c3": "z",
}  # fmt: skip

# enclosed Latin capitals NFKC leaves alone -> the Latin capital each shows (UnicodeData.txt, Unicode 15.1, block
# Enclosed Alphanumeric Supplement: NEGATIVE CIRCLED LATIN CAPITAL LETTER A-Z U+1F150-1F169, NEGATIVE SQUARED LATIN
# CAPITAL LETTER A-Z U+1F170-1F189, REGIONAL INDICATOR SYMBOL LETTER A-Z U+1F1E6-1F1FF; each is named after its
# letter, and a regional indicator pair that is no flag is shown as the two letters). The plain circled, squared and
# parenthesized letters have a compatibility decomposition: NFKC reads them.
ENCLOSED: dict[str, str] = {
    chr(first + i): chr(ord("A") + i) for first in (0x1F150, 0x1F170, 0x1F1E6) for i in range(26)
}

CAPITALS_TABLE = str.maketrans(CAPITALS)
ENCLOSED_TABLE = str.maketrans(ENCLOSED)
SMALL_TABLE = str.maketrans(SMALL)

# Default_Ignorable_Code_Point, DerivedCoreProperties.txt (Unicode 15.1): first and last code point of each range
DEFAULT_IGNORABLE: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F),
    (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)  # fmt: skip
IGNORABLE_TABLE = {cp: None for lo, hi in DEFAULT_IGNORABLE for cp in range(lo, hi + 1)}

# the bidi controls (UAX #9): LRE RLE PDF LRO RLO, LRI RLI FSI PDI, LRM RLM, ALM
DIRECTION_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
