"""control.confusables.ENCLOSED is the data its comment cites: each negative circled / negative squared Latin capital
and regional indicator symbol letter (UnicodeData.txt names) mapped to the Latin capital it is named after, and none
of them has an NFKC decomposition (else the normal form would read it already)."""

from __future__ import annotations

import unicodedata

from control.confusables import ENCLOSED


def test_each_enclosed_letter_maps_to_the_letter_it_is_named_after() -> None:
    assert len(ENCLOSED) == 3 * 26
    prefixes = ("NEGATIVE CIRCLED LATIN CAPITAL LETTER ", "NEGATIVE SQUARED LATIN CAPITAL LETTER ", "REGIONAL INDICATOR SYMBOL LETTER ")
    for ch, latin in ENCLOSED.items():
        name = unicodedata.name(ch)
        assert name.startswith(prefixes) and name.endswith(" " + latin), (hex(ord(ch)), name)
        assert unicodedata.normalize("NFKC", ch) == ch
