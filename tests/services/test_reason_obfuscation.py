"""A forget / revoke / supersede reason that repeats what it names is refused however it is spelled (issue 28, item 7).

The reason is kept for good (the erasure record and certificate, the control record), so `control.plan.quoted` must
see a memory's word through a zero-width character or a Cyrillic/Greek look-alike inside it, split by spaces or
punctuation, a number with separators or a suffix, and base64 / URL-safe base64 / hex of it — while an ordinary
reason ("no longer relevant", "wrong, please delete") still passes for ordinary memories (the LoCoMo test below
measures how many more (reason, memory) pairs the stricter rule refuses than the plain word rule did).
"""

from __future__ import annotations

import base64
import binascii
import json
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from chat.engine import Engine
from chat.llm import LLM
from control import confusables, quoting
from control import forget as cf
from control.plan import PlanError, quoted
from control.revocation import ControlError, revoke
from control.supersession import SupersedeError, supersede
from retrieval.text import content_terms
from storage.stores import Stores, file_stores, pg_stores

# -- the issue's own cases ---------------------------------------------------------------------------------------
MEMORY = "My locker word is Zanzibarquux and the alarm code is 4711"


def _b64(word: str) -> str:
    return base64.b64encode(word.encode()).decode()


@pytest.mark.parametrize(
    "reason",
    [
        "drop Zanz\u200bibarquux",  # a zero-width space inside
        "drop Z\u0430nzibarquux",  # a Cyrillic а
        "drop Zanzibar quux",  # split
        "drop Zanzi-bar-quux",
        "drop 4 7 1 1",  # digits with separators
        "the 4711th one",
        "drop 4-7-1-1",
        "drop " + _b64("Zanzibarquux"),
        "drop " + _b64("4711"),
        "drop " + base64.urlsafe_b64encode(b"Zanzibarquux").decode().rstrip("="),
        "drop " + binascii.hexlify(b"Zanzibarquux").decode(),
        "drop " + _b64("Zanzibarquux")[:5] + "\u200b" + _b64("Zanzibarquux")[5:],  # base64 with a zero-width space in it
        "drop Zanzi",  # a 4-letter-or-longer piece of a name
        "the ZANZIBAR one",
        "drop \U0001d419\U0001d41a\U0001d427\U0001d433\U0001d422\U0001d41b\U0001d41a\U0001d42b\U0001d42a\U0001d42e\U0001d42e\U0001d431",  # math bold
        "drop \uff14\uff17\uff11\uff11",  # full-width digits
        "drop \u0664\u0667\u0661\u0661",  # Arabic-Indic digits
    ],
    ids=["zero-width", "cyrillic", "split", "hyphens", "digits-spaced", "digits-suffix", "digits-dashed", "base64", "base64-number", "urlsafe-unpadded", "hex", "base64-zero-width", "fragment", "fragment-caps", "math-bold", "fullwidth-digits", "arabic-indic-digits"],
)
def test_a_reason_hiding_a_word_or_number_of_the_memory_is_quoted(reason: str) -> None:
    assert quoted(reason, MEMORY)


@pytest.mark.parametrize("reason", ["no longer relevant", "wrong, please delete", "asked to forget", "asked about 471", "the visitor asked", "outdated"])
def test_an_ordinary_reason_is_not_quoted(reason: str) -> None:
    assert not quoted(reason, MEMORY)


def test_the_floors_stay_four_letters_and_three_digits() -> None:
    # documented (docs/guides/forgetting.md, FORMAT.md §17): a word of 4 letters or more, a number of 3 digits or more
    assert quoted("cat Miso", "my cat is called Miso") and not quoted("Mis", "my cat is called Miso")
    assert quoted("the 305 one", "my room is 305") and not quoted("the 30 one", "my room is 305")
    assert not quoted("my box", "my box is red")  # 3 letters: too common to say a text was quoted


# -- generated: every obfuscation of every sampled memory token ---------------------------------------------------
# Samples: these memory tokens (names, places, a lower-case code word, words of 4-13 letters), each inside a plain
# memory sentence; for each, every interior position of each Cf character below, every Latin letter that has a
# look-alike in LOOKALIKES replaced by each of its look-alikes, every interior split by a space / "-" / ". ", and the
# token base64-, URL-safe-base64- and hex-encoded (padded and not, alone and inside a sentence); since review 5 also
# every interior position of each Hangul filler (default-ignorable letters), each leetspeak letter alone and all of them
# at once (LEET), and the token percent-encoded and as HTML decimal and hex character references.
TOKENS = ["Zanzibarquux", "Quuxborough", "Miso", "Lisbon", "octocat", "Patterson", "Vorquzqxvjian", "sourdough"]
NUMBERS = ["4711", "305", "0161", "912345678", "48213907"]
FORMAT_CHARS = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u180e", "\u3164", "\u115f", "\u1160", "\uffa0"]
LEET = {"a": "4", "e": "3", "i": "1", "l": "1", "o": "0", "s": "5", "t": "7"}
# Latin letter -> look-alikes, from Unicode's confusables.txt (UTS #39), written out here independently of the
# code's table: a check below asserts each is the Cyrillic or Greek letter it is named as.
LOOKALIKES: dict[str, list[str]] = {
    "a": ["\u0430", "\u03b1"],  # CYRILLIC SMALL LETTER A, GREEK SMALL LETTER ALPHA
    "c": ["\u0441", "\u03f2"],  # CYRILLIC SMALL LETTER ES, GREEK LUNATE SIGMA SYMBOL
    "e": ["\u0435"],  # CYRILLIC SMALL LETTER IE
    "i": ["\u0456", "\u03b9"],  # CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I, GREEK SMALL LETTER IOTA
    "j": ["\u0458"],  # CYRILLIC SMALL LETTER JE
    "o": ["\u043e", "\u03bf"],  # CYRILLIC SMALL LETTER O, GREEK SMALL LETTER OMICRON
    "p": ["\u0440", "\u03c1"],  # CYRILLIC SMALL LETTER ER, GREEK SMALL LETTER RHO
    "s": ["\u0455"],  # CYRILLIC SMALL LETTER DZE
    "x": ["\u0445", "\u03c7"],  # CYRILLIC SMALL LETTER HA, GREEK SMALL LETTER CHI
    "y": ["\u0443"],  # CYRILLIC SMALL LETTER U
    "h": ["\u04bb"],  # CYRILLIC SMALL LETTER SHHA
    "A": ["\u0410", "\u0391"],
    "B": ["\u0412", "\u0392"],
    "E": ["\u0415", "\u0395"],
    "H": ["\u041d", "\u0397"],
    "K": ["\u041a", "\u039a"],
    "M": ["\u041c", "\u039c"],
    "O": ["\u041e", "\u039f"],
    "P": ["\u0420", "\u03a1"],
    "Q": ["\u051a"],  # CYRILLIC CAPITAL LETTER QA
    "T": ["\u0422", "\u03a4"],
    "V": ["\u0474"],  # CYRILLIC CAPITAL LETTER IZHITSA
    "X": ["\u0425", "\u03a7"],
    "Z": ["\u0396"],  # GREEK CAPITAL LETTER ZETA
    "L": ["\u04c0"],  # CYRILLIC LETTER PALOCHKA (confusables.txt: l / I)
}


def _memory(token: str) -> str:
    return f"I told you the name is {token} and that is it"


def test_the_lookalikes_sampled_are_cyrillic_or_greek_letters() -> None:
    for latin, chars in LOOKALIKES.items():
        for ch in chars:
            name = unicodedata.name(ch)
            assert name.startswith(("CYRILLIC", "GREEK")) and ("LETTER" in name or "SYMBOL" in name), (latin, name)


def _obfuscations(token: str) -> Iterator[tuple[str, str]]:
    for i in range(1, len(token)):
        for fc in FORMAT_CHARS:
            yield f"format U+{ord(fc):04X} at {i}", token[:i] + fc + token[i:]
        for sep in (" ", "-", ". "):
            yield f"split {sep!r} at {i}", token[:i] + sep + token[i:]
    for i, ch in enumerate(token):
        for alike in LOOKALIKES.get(ch, []):
            yield f"{unicodedata.name(alike)} for {ch!r} at {i}", token[:i] + alike + token[i + 1 :]
    for i, ch in enumerate(token):
        if ch.lower() in LEET:
            yield f"leet {ch!r} at {i}", token[:i] + LEET[ch.lower()] + token[i + 1 :]
    yield "leet", "".join(LEET.get(ch.lower(), ch) for ch in token)
    yield "percent-encoded", "".join(f"%{b:02X}" for b in token.encode())
    yield "HTML decimal references", "".join(f"&#{ord(ch)};" for ch in token)
    yield "HTML hex references", "".join(f"&#x{ord(ch):X};" for ch in token)
    raw = token.encode()
    for name, enc in (("base64", base64.b64encode(raw)), ("urlsafe", base64.urlsafe_b64encode(raw)), ("hex", binascii.hexlify(raw))):
        text = enc.decode()
        yield name, text
        yield name + " unpadded", text.rstrip("=")
        yield name + " of a sentence", base64.b64encode(f"it said {token} there".encode()).decode() if name == "base64" else text


def test_the_codes_lookalike_table_maps_lookalike_letters_to_latin_ones() -> None:
    # (review 5 widened the table beyond Cyrillic and Greek: Armenian, Cherokee, Latin extensions, small capitals,
    # the estimated sign; each entry is still a letter or letterlike symbol of those scripts mapped to a Latin letter)
    scripts = ("CYRILLIC", "GREEK", "ARMENIAN", "CHEROKEE", "LATIN", "ESTIMATED SYMBOL")
    for table in (confusables.CAPITALS, confusables.SMALL):
        for ch, latin in table.items():
            name = unicodedata.name(ch)
            assert name.startswith(scripts) and latin.isascii() and latin.isalpha() and not ch.isascii(), ch
            if "SMALL CAPITAL" in name:  # LATIN LETTER SMALL CAPITAL X shows an x
                assert latin == name.split()[-1].lower(), name
    small_capitals = {ch for ch in confusables.SMALL if "LATIN LETTER SMALL CAPITAL" in unicodedata.name(ch)}
    assert {confusables.SMALL[ch] for ch in small_capitals} == set("abcdefghijklmnopqrstuvwyz")  # no small capital X


@pytest.mark.parametrize("cp", [0x00AD, 0x034F, 0x115F, 0x1160, 0x17B4, 0x180B, 0x200B, 0x2064, 0x3164, 0xFE0F, 0xFFA0, 0x1D173, 0xE0041, 0xE0100])
def test_a_default_ignorable_code_point_inside_a_word_does_not_hide_it(cp: int) -> None:
    # a sample of Unicode's Default_Ignorable_Code_Point set (DerivedCoreProperties.txt), one from each kind:
    # soft hyphen, grapheme joiner, Hangul fillers, Khmer inherent vowel, Mongolian selector, zero-width space,
    # invisible plus, variation selectors, musical symbol format, tags
    assert quoted(f"please drop Lis{chr(cp)}bon now", "I live in Lisbon")


@pytest.mark.parametrize("token", TOKENS)
def test_every_obfuscation_of_a_memory_word_is_quoted(token: str) -> None:
    memory = _memory(token)
    assert not quoted("please drop Kettleworth now", memory), "the sentence around each obfuscation quotes nothing by itself"
    missed = [(how, r) for how, hidden in _obfuscations(token) if not quoted(r := f"please drop {hidden} now", memory)]
    assert missed == []


@pytest.mark.parametrize("number", NUMBERS)
def test_every_spelling_of_a_memory_number_is_quoted(number: str) -> None:
    memory = f"the code I use is {number} for everything"
    assert not quoted("please drop 86 now", memory), "the sentence around each spelling quotes nothing by itself"
    hidden = [
        *(sep.join(number) for sep in (" ", "-", ".", ", ", "\u200b", " - ")),
        number + "th",
        "#" + number + "x",
        "no" + number,
        "".join(chr(0xFF10 + int(d)) for d in number),  # full-width
        "".join(chr(0x0660 + int(d)) for d in number),  # Arabic-Indic
        base64.b64encode(number.encode()).decode(),
        binascii.hexlify(number.encode()).decode(),
    ]
    assert [h for h in hidden if not quoted(f"please drop {h} now", memory)] == []


@pytest.mark.parametrize(
    "shown", ["\u202enobsiL\u202c", "Lis\u202enob\u202c", "\u202esiL\u202c\u202enob\u202c", "\u202dLis\u202c\u202enob\u202c"]
)
def test_a_word_shown_through_a_right_to_left_override_is_quoted(shown: str) -> None:
    # each renders as "Lisbon" (UAX #9: an override's run is shown reversed); the override may cover part of the word
    assert quoted(f"moved from {shown} last year", "I live in Lisbon with my cat")


def test_a_number_the_memory_writes_with_separators_is_quoted_without_them() -> None:
    assert quoted("call 912345678", "Call me on +351 912 345 678")
    assert quoted("pin 4711", "my pin is 4 7 1 1")


# -- ordinary reasons against ordinary memories (LoCoMo conversations 0-4) -----------------------------------------
ORDINARY_REASONS = [
    "no longer relevant", "wrong, please delete", "outdated", "not true anymore", "I changed my mind", "privacy",
    "asked to forget", "the visitor asked", "entered by mistake", "typo", "duplicate", "it was a joke",
    "I don't want this remembered", "too personal", "incorrect", "out of date", "not accurate", "sensitive information",
    "I shared too much", "this is wrong", "remove it please", "no reason given", "it is old news",
    "it was about someone else", "it's private", "please forget this", "not needed any more", "wrong person",
    "test entry", "confidential", "GDPR request", "right to erasure", "I regret saying it", "misheard",
    "mistaken identity",
]  # fmt: skip
CORE_REASONS = ["no longer relevant", "wrong, please delete"]


def locomo_memories(shared_data: Path) -> list[str]:
    """Every turn's text of LoCoMo conversations 0-4 (shared data, PROVENANCE.md there)."""
    convs = json.loads((shared_data / "locomo10.json").read_text(encoding="utf-8"))[:5]
    return [t["text"] for c in convs for v in c["conversation"].values() if isinstance(v, list) for t in v if t.get("text")]


def _word_terms(text: str, floor: bool) -> set[str]:
    terms = content_terms(text)
    return {t for t in terms if len(t) >= (3 if t.isdigit() else 4)} if floor else set(terms)


def extra_refusals(reasons: list[str], memories: list[str]) -> dict[str, int]:
    """Per reason, how many memories refuse it now (control.plan.quoted) that the plain word rule let through:
    cf5de17's rule, a content term of 4+ letters or 3+ digits in both. Each side is read once (quoting.reading /
    holding: quoted(r, m) is quotes(reading(r), holding(m)))."""
    read = {r: (quoting.reading(r), _word_terms(r, True)) for r in reasons}
    out = dict.fromkeys(reasons, 0)
    for m in memories:
        held, terms = quoting.holding(m), _word_terms(m, False)
        for r, (said, words) in read.items():
            if not words & terms and quoting.quotes(said, held):
                out[r] += 1
    return out


def test_ordinary_reasons_still_pass_for_ordinary_memories(shared_data: Path) -> None:
    memories = locomo_memories(shared_data)
    assert len(memories) > 2000
    extra = extra_refusals(ORDINARY_REASONS, memories)
    for r in CORE_REASONS:
        assert extra[r] == 0, f"{r!r} is refused for {extra[r]} memories holding none of its words"
    pairs = len(ORDINARY_REASONS) * len(memories)
    # measured on this data: 26 of 96,600 pairs (0.03%; 13 of the 35 reasons, each for 1-4 of 2,760 memories); the literal "any 4-letter piece of any word" rule refused
    # 3,410 (3.5%), so it is narrowed to names and codes (control.quoting says how); since review 6 (pieces must make
    # up the reason's words, split words must line up with them) 2 ("not needed any more" for "anymore")
    assert sum(extra.values()) <= pairs // 1000, extra


# -- through the commands, on both backends -----------------------------------------------------------------------
@dataclass
class Deployment:
    data: Path
    stores: Stores
    engine: Engine


@pytest.fixture(params=["files", pytest.param("pg", marks=pytest.mark.pg)])
def dep(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Deployment]:
    data = tmp_path / "data"
    data.mkdir()
    if request.param == "files":
        stores = file_stores(data)
    else:
        stores = pg_stores(request.getfixturevalue("pg_url"), data, pool_size=2)
    try:
        yield Deployment(data, stores, Engine(data, llm=LLM(api_key=""), stores=stores))
    finally:
        stores.close()


SPLIT = "drop Zanzibar quux"
CYRILLIC = "drop Z\u0430nzibarquux"


def test_forget_revoke_and_supersede_refuse_an_obfuscated_reason_and_change_nothing(dep: Deployment) -> None:
    s, led = "alice", dep.stores.ledger
    old = dep.engine.remember(s, "my wifi password is Zanzibarquux").seq
    new = dep.engine.remember(s, "I changed the wifi password, it is now 4711").seq
    before = led.head(s)
    for reason in (SPLIT, CYRILLIC, "drop " + _b64("Zanzibarquux")):
        with pytest.raises(PlanError, match="reason: repeats a word"):
            cf.forget(dep.data, s, [old], reason=reason, stores=dep.stores, key=dep.engine.key)
        with pytest.raises(ControlError, match="reason: repeats a word"):
            revoke(dep.data, s, old, reason=reason, stores=dep.stores, key=dep.engine.key)
        with pytest.raises(SupersedeError, match="reason repeats a word"):
            supersede(dep.data, s, new, old, reason=reason, stores=dep.stores, key=dep.engine.key)
    with pytest.raises(ControlError, match="reason: repeats a word"):
        revoke(dep.data, s, new, reason="code 4 7 1 1", stores=dep.stores, key=dep.engine.key)
    assert led.head(s) == before
    assert cf.forget(dep.data, s, [old], reason="no longer relevant", stores=dep.stores, key=dep.engine.key).erased


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review5_reason_lookalikes.py):
# Reviewer finding (issue 28 item 7, "fold confusables"): control.confusables folds a subset of Cyrillic and Greek
# look-alikes only. Letters that Unicode's confusables.txt (UTS #39) also gives a Latin prototype — Armenian օ (U+0585,
# 'o'), Latin alpha ɑ (U+0251, 'a'), Latin small capital ᴄ (U+1D04, 'c'), Cyrillic г (U+0433, 'r'), the estimated
# sign ℮ (U+212E, 'e') — leave a reason that reads as the memory's word passing the check, for a common word (no
# 4-character pieces) and for a short name alike.
# --------------------------------------------------------------------------------------------------------------------


LOOKALIKE_MEMORY = "my safe word is chocolate and my dog is Oreo"


def test_the_plain_words_are_refused() -> None:
    assert quoted("chocolate", LOOKALIKE_MEMORY) and quoted("Oreo", LOOKALIKE_MEMORY)


@pytest.mark.parametrize(
    "reason",
    ["ch\u0585c\u0585late", "chocol\u0251te", "\u1d04hocolate", "chocolat\u212e", "Ore\u0585", "O\u0433eo"],
    ids=["armenian-o", "latin-alpha", "small-capital-c", "estimated-sign", "armenian-o-name", "cyrillic-ge-name"],
)
def test_a_reason_spelling_the_word_with_a_lookalike_is_refused(reason: str) -> None:
    assert quoted(reason, LOOKALIKE_MEMORY)


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review5_reason_obfuscation.py):
# Reviewer findings (issue 28 item 7, the reason check): a forget/revoke reason that repeats a memory's word,
# obfuscated in ways control.quoting does not normalise, still passes — and an ordinary reason with a date and a time
# is refused because the reason's digits are all read together.
# --------------------------------------------------------------------------------------------------------------------


LISBON_MEMORY = "I live in Lisbon with my cat Zanzibar"


def test_a_reason_that_displays_the_word_through_a_bidi_override_is_refused() -> None:
    # U+202E RIGHT-TO-LEFT OVERRIDE is dropped as a format character, which leaves the reversed word; the kept reason
    # still renders as "Lisbon" wherever it is shown (certificate, History, erasure record).
    assert quoted("moved from \u202enobsiL\u202c", LISBON_MEMORY)


@pytest.mark.parametrize("filler", ["\u3164", "\u115f", "\u1160", "\uffa0"])
def test_a_reason_with_an_invisible_hangul_filler_inside_the_word_is_refused(filler: str) -> None:
    assert quoted(f"the Lis{filler}bon one", LISBON_MEMORY)


@pytest.mark.parametrize(
    "reason",
    [
        "L1sb0n was wrong",  # leetspeak: digits for letters
        "%4C%69%73%62%6F%6E",  # percent-encoding of Lisbon
        "&#76;&#105;&#115;&#98;&#111;&#110;",  # HTML character references
    ],
)
def test_a_reason_spelling_the_word_in_a_common_obfuscation_is_refused(reason: str) -> None:
    assert quoted(reason, LISBON_MEMORY)


@pytest.mark.parametrize("reason", ["said on 12 March at 3pm by mistake", "typed at 11:23 on the bus", "moved on 1 Feb, 23 days ago"])
def test_an_ordinary_reason_with_a_date_is_not_read_as_quoting_a_code(reason: str) -> None:
    # the memory's number is 123; the reason holds 12 and 3, or 11 and 23 — two numbers, neither the code
    assert not quoted(reason, "my door code is 123")


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review6_reason_enclosed_letters.py):
# Reviewer finding (control.quoting, rule 6 / the normal form): the negative circled (U+1F150-1F169) and negative
# squared (U+1F170-1F189) Latin capitals and the regional indicator symbols (U+1F1E6-1F1FF) read as the letters they
# enclose wherever the reason is shown, but NFKC has no decomposition for them and control.confusables does not fold
# them (the plain circled and squared letters, which NFKC maps, are refused): a reason spelling the memory's word in
# them passes the check and is kept for good.
# --------------------------------------------------------------------------------------------------------------------


def _spelled(word: str, first: int) -> str:
    return "".join(chr(first + ord(c) - ord("a")) for c in word.lower())


@pytest.mark.parametrize(
    "reason",
    [
        _spelled("lisbon", 0x1F150),  # 🅛🅘🅢🅑🅞🅝
        _spelled("lisbon", 0x1F170),  # 🅻🅸🆂🅱🅾🅽
        f"moved from {_spelled('zanzibar', 0x1F170)}",
        _spelled("zanzibar", 0x1F1E6),  # regional indicators (shown as letters where a pair is no flag)
    ],
)
def test_a_reason_in_enclosed_letters_is_refused(reason: str) -> None:
    assert quoted(reason, LISBON_MEMORY)


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review6_reason_digit_separators.py):
# Reviewer finding (control.quoting rule 2): a memory's code repeated digit by digit is refused with spaces, dots,
# dashes, slashes or commas between the digits, but accepted with ';', '_', '|', '·', 'x', ' and ', or spelled out in
# words: the kept reason then carries the code for good.
# --------------------------------------------------------------------------------------------------------------------


DOOR_CODE_MEMORY = "my door code is 4711"


@pytest.mark.parametrize("reason", ["4;7;1;1", "4_7_1_1", "4|7|1|1", "4·7·1·1", "it was four seven one one", "four-seven-one-one"])
def test_a_code_repeated_with_other_separators_or_in_words_is_refused(reason: str) -> None:
    assert quoted(reason, DOOR_CODE_MEMORY)
