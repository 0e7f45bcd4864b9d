"""The fast canonical path equals RFC 8785 on the whole domain it accepts, and refuses the rest."""

from __future__ import annotations

import json
import math

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.canonical import MAX_SAFE_INT, CanonicalError, canonical_json, loads_strict

from ..conftest import SHARED_DATA

safe_ints = st.integers(min_value=-MAX_SAFE_INT, max_value=MAX_SAFE_INT)
# Valid Unicode text: every code point except the surrogate block.
unicode_text = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=40)
ascii_keys = st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=12)
domain_values = st.recursive(
    st.none() | st.booleans() | safe_ints | unicode_text,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(ascii_keys, children, max_size=5),
    max_leaves=30,
)


class TestFastPathEqualsJcs:
    @settings(max_examples=1500, deadline=None)
    @given(domain_values)
    def test_fast_path_is_byte_identical_to_rfc8785_on_the_domain(self, value: object) -> None:
        assert canonical_json(value) == rfc8785.dumps(value)

    @settings(max_examples=300, deadline=None)
    @given(st.text(max_size=60))
    def test_any_string_value_either_matches_rfc8785_or_is_refused(self, text: str) -> None:
        try:
            fast = canonical_json({"t": text})
        except CanonicalError:
            assert any(0xD800 <= ord(c) <= 0xDFFF for c in text)
            return
        assert fast == rfc8785.dumps({"t": text})

    def test_boundary_integers_match(self) -> None:
        for n in (MAX_SAFE_INT, -MAX_SAFE_INT, 0, 1, -1):
            assert canonical_json([n]) == rfc8785.dumps([n])


class TestDomainIsEnforced:
    @pytest.mark.parametrize(
        "value, where",
        [
            ({"x": 1.5}, "$.x"),
            ({"x": 1.0}, "$.x"),
            ({"x": -0.0}, "$.x"),
            ([math.nan], "$[0]"),
            ([math.inf], "$[0]"),
            ({"n": 2**53}, "$.n"),
            ({"n": -(2**53)}, "$.n"),
            ({"é": 1}, "$"),
            ({"😀": 1}, "$"),
            ({1: "int key"}, "$"),
            ({"s": "lone \ud800 surrogate"}, "$"),
            ({"b": b"bytes"}, "$.b"),
            ({"t": (1, 2)}, "$.t"),
        ],
    )
    def test_out_of_domain_value_is_refused_naming_its_path(self, value: object, where: str) -> None:
        with pytest.raises(CanonicalError) as err:
            canonical_json(value)
        assert str(err.value).startswith(where)

    def test_nesting_beyond_the_limit_is_refused(self) -> None:
        deep: object = "x"
        for _ in range(40):
            deep = [deep]
        with pytest.raises(CanonicalError, match="nesting deeper"):
            canonical_json(deep)


class TestJcsVectors:
    def _pairs(self) -> list[tuple[str, object, bytes]]:
        folder = SHARED_DATA / "jcs_vectors"
        pairs = []
        for src in sorted((folder / "input").glob("*.json")):
            expected = bytes.fromhex((folder / "outhex" / (src.stem + ".txt")).read_text().replace(" ", "").replace("\n", ""))
            pairs.append((src.name, json.loads(src.read_text(encoding="utf-8")), expected))
        return pairs

    def test_vectors_are_present(self) -> None:
        assert len(self._pairs()) >= 6

    def test_reference_reproduces_every_vector(self) -> None:
        for name, value, expected in self._pairs():
            assert rfc8785.dumps(value) == expected, name

    def test_fast_path_reproduces_in_domain_vectors_and_refuses_the_rest(self) -> None:
        accepted = refused = 0
        for name, value, expected in self._pairs():
            try:
                got = canonical_json(value)
            except CanonicalError:
                refused += 1
                continue
            accepted += 1
            assert got == expected, name
        # arrays/structures/values/weird use floats or non-ASCII keys; the rest must pass the fast path
        assert accepted >= 1 and refused >= 1


class TestStrictParsing:
    def test_duplicate_keys_are_refused(self) -> None:
        with pytest.raises(CanonicalError, match="duplicate key 'a'"):
            loads_strict(b'{"a": 1, "a": 2}')

    def test_nan_literal_is_refused(self) -> None:
        with pytest.raises(CanonicalError, match="NaN"):
            loads_strict(b'{"a": NaN}')

    def test_invalid_utf8_is_refused_with_its_offset(self) -> None:
        with pytest.raises(CanonicalError, match="not valid UTF-8"):
            loads_strict(b'{"a": "\xff"}')
