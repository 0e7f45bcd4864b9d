"""Canonical JSON bytes for everything the ledger hashes.

Changing this module changes every digest in every ledger: it is part of the
format (docs/FORMAT.md, "Canonical bytes").

The canonical form is RFC 8785 (JCS). JCS is only computed by the slow
reference implementation (``rfc8785``) in tests; the hot path uses orjson with
sorted keys, which is byte-identical to JCS on the restricted *domain* that
:func:`check_domain` enforces (tests/core/test_canonical.py proves it with
hypothesis against ``rfc8785.dumps``):

* ``None``, ``bool``, ``str`` (valid Unicode, no lone surrogates);
* ``int`` with ``-(2**53 - 1) <= n <= 2**53 - 1`` (no floats at all);
* ``list`` of domain values; ``dict`` whose keys are ``str`` of ASCII
  characters (so UTF-16 and UTF-8 key order agree);
* nesting at most :data:`MAX_DEPTH` deep (a receipt body, the deepest value
  the project signs; an event's meta has its own, smaller limit derived from
  it: ledger.event.MAX_META_DEPTH).

Anything outside the domain is refused with :class:`CanonicalError`, which
names the JSON path of the offending value. :func:`loads_strict` is the one
parser for JSON read from outside; it refuses what the domain refuses before a
value is built (duplicate keys, non-finite numbers, floats, long integers,
lone surrogates).
"""

from __future__ import annotations

import json
import math
import re
import threading
from typing import Any

import orjson

MAX_SAFE_INT = 2**53 - 1
# The deepest nesting of any canonical value: the receipt body, whose memories[i].event.meta
# sits 4 levels down (ledger.event.META_NESTING_IN_RECEIPT), so that any meta the ledger
# accepts (ledger.event.MAX_META_DEPTH = 32, unchanged since format 1) fits in a receipt.
MAX_DEPTH = 36


class CanonicalError(ValueError):
    """A value lies outside the canonical-JSON domain; the message names where."""


def check_domain(value: Any, path: str = "$", depth: int = 0, max_depth: int = MAX_DEPTH) -> None:
    """Raise :class:`CanonicalError` unless ``value`` is inside the domain.

    A container at ``depth >= max_depth`` is refused: ``max_depth`` levels of
    nested arrays/objects (the outermost counts as one) are allowed.
    """
    t = type(value)
    if t is str or t is bool or value is None:
        return
    if t is int:
        if -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
            return
        raise CanonicalError(f"{path}: integer {value} is outside ±(2^53-1)")
    if depth >= max_depth:
        raise CanonicalError(f"{path}: nesting deeper than {max_depth}")
    if t is dict:
        for k, v in value.items():
            if type(k) is not str:
                raise CanonicalError(f"{path}: object key {k!r} is not a string")
            if not k.isascii():
                raise CanonicalError(f"{path}: object key {k!r} is not plain ASCII")
            check_domain(v, f"{path}.{k}", depth + 1, max_depth)
        return
    if t is list:
        for i, v in enumerate(value):
            check_domain(v, f"{path}[{i}]", depth + 1, max_depth)
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


def member_bytes(key: str, value: str) -> bytes:
    """The bytes of the member `key: value` inside any canonical object that holds it: `"key":"value"` (JCS writes a
    member as its two canonical strings joined by a colon, nothing between). A canonical line whose object (at any
    depth) has that member holds these bytes; a string holding them is escaped (`\\"key\\":…`), so holding them
    says only that the line may have it (the caller parses to know). ValueError outside the domain (a non-ASCII key)."""
    if type(key) is not str or type(value) is not str or not key.isascii():
        raise ValueError("member_bytes takes an ASCII key and a string value")
    return dumps_unchecked({key: value})[1:-1]


class JSONSyntaxError(CanonicalError):
    """The input is not JSON at all (RFC 8259 grammar, or not UTF-8), as opposed to JSON we refuse."""


# A `\uD800`-`\uDFFF` escape: the only way a lone surrogate gets into a parsed string.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
INT_DIGITS = len(str(MAX_SAFE_INT))  # 16: a longer literal is out of range without converting it


class _Bad:
    """Stands in for a value the careful parser refuses, until the walk names where it is."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


class _Careful:
    """One careful parse: stdlib json (C scanner) with hooks that mark what is refused.

    The hooks never raise (the scanner would lose the position): they leave a
    :class:`_Bad` in place of the refused value and set `flagged`; a walk then
    names the first one by its JSON path, in document order.
    """

    def __init__(self, allow_floats: bool) -> None:
        self.allow_floats = allow_floats
        self.flagged = False
        self.decoder = json.JSONDecoder(
            object_pairs_hook=self._pairs,
            parse_float=self._float,
            parse_int=self._int,
            parse_constant=self._constant,
        )

    def _bad(self, reason: str) -> _Bad:
        self.flagged = True
        return _Bad(reason)

    def _pairs(self, items: list[tuple[str, Any]]) -> Any:
        out = dict(items)
        if len(out) != len(items):
            seen: set[str] = set()
            for k, _ in items:
                if k in seen:
                    return self._bad(f"duplicate key {_short(k)}")
                seen.add(k)
        return out

    def _float(self, literal: str) -> Any:
        if not math.isfinite(float(literal)):
            return self._bad(f"number {literal[:40]} is not finite as a double")
        if not self.allow_floats:
            return self._bad(f"number {literal[:40]} is not an integer (floating-point numbers are refused)")
        return float(literal)

    def _int(self, literal: str) -> Any:
        digits = len(literal) - (literal[0] == "-")
        if digits > INT_DIGITS:
            return self._bad(f"integer of {digits} digits is outside ±(2^53-1)")
        value = int(literal)
        if not -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
            return self._bad(f"integer {literal} is outside ±(2^53-1)")
        return value

    def _constant(self, name: str) -> Any:
        return self._bad(f"{name} is not valid JSON")


_decoders = threading.local()  # one _Careful per thread and allow_floats: a JSONDecoder costs more to build than to run on a line


def _careful(allow_floats: bool) -> _Careful:
    """This thread's careful parser for `allow_floats`, its flag cleared (its hooks keep no other state)."""
    mine: dict[bool, _Careful] | None = getattr(_decoders, "by_floats", None)
    if mine is None:
        mine = _decoders.by_floats = {}
    careful = mine.get(allow_floats)
    if careful is None:
        careful = mine[allow_floats] = _Careful(allow_floats)
    careful.flagged = False
    return careful


def _short(key: str) -> str:
    return repr(key[:40] + ("…" if len(key) > 40 else ""))


def _first_problem(value: Any, path: str, depth: int, max_depth: int | None, strings: bool) -> str | None:
    """The first refused value (document order), lone surrogate or too-deep container, with its path."""
    t = type(value)
    if t is _Bad:
        return f"{path}: {value.reason}"
    if t is str:
        if strings and not _valid_unicode(value):
            return f"{path}: string holds a lone surrogate (not valid Unicode)"
        return None
    if t is dict or t is list:
        if max_depth is not None and depth >= max_depth:
            return f"{path}: nesting deeper than {max_depth}"
        if t is list:
            for i, v in enumerate(value):
                found = _first_problem(v, f"{path}[{i}]", depth + 1, max_depth, strings)
                if found is not None:
                    return found
            return None
        for k, v in value.items():
            if strings and not _valid_unicode(k):
                return f"{path}: key holds a lone surrogate (not valid Unicode)"
            where = f"{path}.{k}" if k.isidentifier() else f"{path}[{_short(k)}]"
            found = _first_problem(v, where, depth + 1, max_depth, strings)
            if found is not None:
                return found
    return None


def _valid_unicode(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _opens(data: bytes) -> int:
    return data.count(b"{") + data.count(b"[")


def loads_strict(
    data: bytes | str, where: str = "input", *, allow_floats: bool = False, max_depth: int | None = None
) -> Any:
    """THE parser for JSON read from outside (import files, receipts, envelopes, ledger lines).

    Refused, each with one :class:`CanonicalError` line naming `where` and the
    JSON path: not UTF-8 or not JSON (:class:`JSONSyntaxError`); a duplicate key
    at any depth; NaN/Infinity and numbers that are infinite as a double
    (``1e400``); floating-point numbers unless ``allow_floats`` (no format of
    this project has them); integers outside ±(2^53-1), however many digits;
    lone surrogates (``"\ud800"``); nesting deeper than ``max_depth`` (when given).
    Never raises anything else.

    Fast path, sound by construction: when orjson's compact re-serialisation of
    its parse is byte-identical to the input, the input has no whitespace, no
    duplicate key (orjson keeps one member, so the output would be shorter), no
    NaN/Infinity and no lone surrogate (orjson refuses both), and every string
    reads the same in any parser; a walk of the parsed value (:func:`_plain`)
    then finds no float (orjson also turns integers beyond 64 bits into floats),
    no integer out of range and no nesting past ``max_depth``. So the careful
    parser would accept the input and build the same value; anything else is
    decided (and its error worded) by the careful parser.
    """
    if isinstance(data, str):
        try:
            raw = data.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise CanonicalError(f"{where}: not valid Unicode (lone surrogate at character {exc.start})") from None
    else:
        raw = data if type(data) is bytes else bytes(data)
    try:
        obj = orjson.loads(raw)
        if orjson.dumps(obj) == raw and _plain(obj, max_depth):
            return obj
    except (orjson.JSONDecodeError, TypeError):
        pass
    return _loads_careful(raw, where, allow_floats, max_depth)


def loads_plain(raw: bytes) -> Any:
    """`raw` parsed when orjson's parse is provably the value loads_strict would return (no max_depth, no floats);
    else None.

    For a hot loop that parses plain lines and hands anything else to loads_strict or loads_careful
    (JSON `null` also gives None: the careful parser then decides). Compact lines are decided as by
    loads_strict's fast path. Lines with whitespace (Python's json.dumps writes ", " and ": ") are accepted
    when the colons add up: orjson refuses everything the careful parser refuses but a duplicate key (it keeps
    one member) and the walk's refusals (floats, integers out of range: _plain). Every colon outside a string
    is a member's, and a colon byte never occurs inside a multi-byte UTF-8 character, so the input's colons
    are its members plus the colons written in its strings; orjson's compact output of the parse holds its
    members plus the colons of its strings (orjson never escapes one). A dropped duplicate removes at least
    one member (and the colons of its strings), so, with no `\\u003` in the input (no colon written as an
    escape, which the output would count and the input would not), equal counts mean none was dropped.
    """
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return obj if vouched(raw, obj) else None


def plain_value(value: Any) -> bool:
    """No float and no integer outside ±(2^53-1) anywhere in `value` (orjson's parse then is loads_strict's, but
    for duplicate keys: see vouched)."""
    return _plain(value, None)


def vouched(raw: bytes, obj: Any) -> bool:
    """Whether `obj`, orjson's parse of `raw`, is the value loads_strict would return (loads_plain's test, for a
    caller that has parsed already: the line is parsed once)."""
    try:
        out = orjson.dumps(obj)
    except TypeError:
        return False
    if out != raw and (b"\\u003" in raw or out.count(b":") != raw.count(b":")):
        return False
    return _plain(obj, None)


def loads_careful(raw: bytes, where: str = "input") -> Any:
    """loads_strict(raw, where) for bytes loads_plain has already turned down (its fast path would only fail
    again): the careful parser alone, with loads_strict's defaults (no floats, no max_depth)."""
    return _loads_careful(raw, where, False, None)


def _plain(value: Any, max_depth: int | None) -> bool:
    """No float, no integer outside ±(2^53-1), no container at depth >= max_depth (when given).

    Iterative, with the common types first: it runs on every fast-path parse.
    """
    t = type(value)
    if t is not dict and t is not list:
        return t is not float and (t is not int or -MAX_SAFE_INT <= value <= MAX_SAFE_INT)
    if max_depth is not None and max_depth < 1:
        return False
    todo: list[tuple[Any, int]] = [(value.values() if t is dict else value, 1)]
    while todo:
        items, depth = todo.pop()
        for v in items:
            t = type(v)
            if t is str:
                continue
            if t is int:
                if -MAX_SAFE_INT <= v <= MAX_SAFE_INT:
                    continue
                return False
            if t is dict or t is list:
                if max_depth is not None and depth >= max_depth:
                    return False
                todo.append((v.values() if t is dict else v, depth + 1))
            elif t is float:
                return False
    return True


def _loads_careful(raw: bytes, where: str, allow_floats: bool, max_depth: int | None) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JSONSyntaxError(f"{where}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    careful = _careful(allow_floats)
    try:
        obj = careful.decoder.decode(text)
    except json.JSONDecodeError as exc:
        raise JSONSyntaxError(
            f"{where}: invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except RecursionError:
        raise CanonicalError(f"{where}: JSON nested too deeply") from None
    strings = _SURROGATE_ESCAPE.search(text) is not None
    check_depth = max_depth is not None and _opens(raw) > max_depth
    if careful.flagged or strings or check_depth:
        try:
            problem = _first_problem(obj, "$", 0, max_depth if check_depth else None, strings)
        except RecursionError:
            problem = "$: JSON nested too deeply"
        if problem is not None:
            raise CanonicalError(_at(where, problem))
    return obj


def _at(where: str, problem: str) -> str:
    """`where: $.path: reason`, or `$.path: reason` when where is the document root "$" itself."""
    return problem if where == "$" else f"{where}: {problem}"
