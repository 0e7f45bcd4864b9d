"""Cyrillic and Greek letters that look like Latin ones, as data (for control.quoting's normal form).

A subset of Unicode's confusables.txt (UTS #39, "Unicode Security Mechanisms"): the common Cyrillic and Greek
letters whose prototype there is a Latin letter. Not the whole file: a reason's check only needs the look-alikes a
person can type or paste in place of a letter of a memory's word. Two tables, because the lower case of a look-alike
capital does not always look like the lower-case Latin letter (Greek Ν is N, its ν looks like v): CAPITALS is applied
before case folding, SMALL after it (so a small letter here is matched whichever case it was typed in).
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
}  # fmt: skip

CAPITALS_TABLE = str.maketrans(CAPITALS)
SMALL_TABLE = str.maketrans(SMALL)
