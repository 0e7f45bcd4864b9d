"""Canonical JSON bytes for everything the ledger hashes.

Changing this module changes every digest in every ledger: it is part of the
format (docs/FORMAT.md, "Canonical bytes").

The canonical form is RFC 8785 (JCS). JCS is only computed by the slow
reference implementation (``rfc8785``) in tests; the hot path uses orjson with
sorted keys, which is byte-identical to JCS on the restricted *domain* that
:func:`check_domain` enforces (tests/test_canonical.py proves it with
hypothesis against ``rfc8785.dumps``):

* ``None``, ``bool``, ``str`` (valid Unicode, no lone surrogates);
* ``int`` with ``-(2**53 - 1) <= n <= 2**53 - 1`` (no floats at all);
* ``list`` of domain values; ``dict`` whose keys are ``str`` of ASCII
  characters (so UTF-16 and UTF-8 key order agree);
* nesting at most :data:`MAX_DEPTH` deep.

Anything outside the domain is refused with :class:`CanonicalError`, which
names the JSON path of the offending value.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

MAX_SAFE_INT = 2**53 - 1
MAX_DEPTH = 32


class CanonicalError(ValueError):
    """A value lies outside the canonical-JSON domain; the message names where."""


def check_domain(value: Any, path: str = "$", depth: int = 0) -> None:
    """Raise :class:`CanonicalError` unless ``value`` is inside the domain."""
    t = type(value)
    if t is str or t is bool or value is None:
        return
    if t is int:
        if -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
            return
        raise CanonicalError(f"{path}: integer {value} is outside ±(2^53-1)")
    if depth >= MAX_DEPTH:
        raise CanonicalError(f"{path}: nesting deeper than {MAX_DEPTH}")
    if t is dict:
        for k, v in value.items():
            if type(k) is not str:
                raise CanonicalError(f"{path}: object key {k!r} is not a string")
            if not k.isascii():
                raise CanonicalError(f"{path}: object key {k!r} is not plain ASCII")
            check_domain(v, f"{path}.{k}", depth + 1)
        return
    if t is list:
        for i, v in enumerate(value):
            check_domain(v, f"{path}[{i}]", depth + 1)
        return
    if t is float:
        raise CanonicalError(f"{path}: floating-point numbers are not allowed ({value!r})")
    raise CanonicalError(f"{path}: {t.__name__} is not a JSON value")


def canonical_json(value: Any, path: str = "$") -> bytes:
    """Return the RFC 8785 bytes of ``value``; refuse values outside the domain."""
    check_domain(value, path)
    return dumps_unchecked(value, path)


def dumps_unchecked(value: Any, path: str = "$") -> bytes:
    """orjson with sorted keys, for values already known to be in the domain."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError as exc:  # lone surrogates and the like
        raise CanonicalError(f"{path}: {exc}") from None


def _unique_pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(items)
    if len(out) != len(items):
        seen: set[str] = set()
        for k, _ in items:
            if k in seen:
                raise CanonicalError(f"duplicate key {k!r}")
            seen.add(k)
    return out


def _bad_constant(name: str) -> Any:
    raise CanonicalError(f"{name} is not valid JSON")


_STRICT = json.JSONDecoder(object_pairs_hook=_unique_pairs, parse_constant=_bad_constant)


def loads_strict(data: bytes | str, where: str = "input") -> Any:
    """Parse JSON refusing duplicate keys, NaN/Infinity and invalid UTF-8.

    Used at the edges (import files, uploaded receipts) where a duplicate key
    would let two parsers disagree about what was signed.
    """
    # Fast path: orjson never keeps a duplicate key silently *and* re-serialises to the
    # same length (its output is never longer than its input, and strictly shorter once
    # a key was dropped); anything else takes the strict stdlib parser below.
    try:
        obj = orjson.loads(data)
        if len(orjson.dumps(obj)) == len(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")):
            return obj
    except (orjson.JSONDecodeError, TypeError):
        pass
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CanonicalError(f"{where}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        return _STRICT.decode(data)
    except CanonicalError as exc:
        raise CanonicalError(f"{where}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise CanonicalError(f"{where}: invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise CanonicalError(f"{where}: JSON nested too deeply") from None
