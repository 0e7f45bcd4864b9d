"""What a caller appends, and what an import file may hold (docs/FORMAT.md §7): parse and validate, no I/O.

A `Message` is what is said (role, text, meta, and for an import when it was said); the ledger
gives it its place (seq, id, salt, hashes). `parse_import` reads an import file line by line and
refuses it whole, naming the first bad line (`ImportError_`); `import_message` is its rule for one
line, shared with the bulk encoder (ledger/bulk.py), which takes a faster road to the same
answers and asks this module whenever a line is not plainly acceptable.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from ledger.canonical import CanonicalError, loads_careful, loads_strict
from ledger.event import ROLES, EventError, check_content, format_ts, normalize_ts

UTF8_BOM = b"\xef\xbb\xbf"
IMPORT_FUTURE_LIMIT = timedelta(days=1)  # an imported ts says when it was said: not later than the import (clock skew aside)
IMPORT_FIELDS = frozenset({"role", "text", "meta", "ts"})


class ImportError_(ValueError):
    """An import file was refused; nothing was appended. `.line` is 1-based."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}" if line else message)
        self.line = line


class Message(NamedTuple):
    """Input for an append: what a caller says, before the ledger gives it a place."""

    role: str
    text: str
    meta: dict[str, Any]
    ts: str | None = None  # when it was originally said (imports); default: now


def validate_message(role: object, text: object, meta: object, ts: object, *, parsed_json: bool = False) -> Message:
    if role not in ROLES:
        raise EventError(f"role {role!r}: must be one of {', '.join(ROLES)}")
    if meta is None:
        meta = {}
    if role == "system" and isinstance(meta, dict) and "erasure" in meta:
        raise EventError('meta: the key "erasure" of a system event is reserved for erasure records (Ledger.erase writes them)')
    check_content(text, meta, parsed_json=parsed_json)
    norm_ts = None if ts is None else normalize_ts(ts)
    assert isinstance(role, str) and isinstance(text, str) and isinstance(meta, dict)
    return Message(role, text, meta, norm_ts)


# The texts only the control commands write (docs/FORMAT.md §4.4 erasure records, §17 revoke/restore, §19 supersede):
# control.revocation, control.supersession and Ledger.erase append them; an import file may not hold one.
RECORD_TEXT_RE = re.compile(r"\[control record: [a-z]+\]|\[erasure record: [0-9]+ event\(s\) erased\]")
RECORD_META_KEYS = frozenset({"control", "supersession", "erasure"})


def record_problem(role: str, text: str, meta: dict[str, Any]) -> str | None:
    """Why a message is (or looks like) a control, supersession or erasure record, which only the control commands
    append; None for an ordinary message. Any role with a record's reserved text; a system message whose meta holds
    a record's key; anything ledger.supersessions.is_control_record recognises."""
    if text[:1] == "[" and RECORD_TEXT_RE.fullmatch(text):
        return f"text {text!r} is a control or erasure record's"
    if role != "system":
        return None
    keys = RECORD_META_KEYS.intersection(meta)
    if keys:
        return f"meta {sorted(keys)[0]!r} is a control, supersession or erasure record's"
    from ledger.supersessions import is_control_record  # here: the ledger is below receipts

    if is_control_record(role, text, meta):
        return "it is a control record"
    return None


def record_refusal(n: int, problem: str) -> ImportError_:
    return ImportError_(n, f"{problem}: such records come only from the control commands (python -m control), never from an import")


def latest_ts(now: datetime | None = None) -> str:
    """The latest `ts` an import accepts: a day after `now` (default: the clock)."""
    return format_ts((now or datetime.now(UTC)) + IMPORT_FUTURE_LIMIT)


def parse_import_line(stripped: bytes, n: int, *, plain_tried: bool = False) -> Any:
    """Line `n` (stripped, not blank) parsed by the strict parser; ImportError_ naming the line. `plain_tried`:
    loads_plain has already turned the line down (the careful parser alone decides)."""
    try:
        return loads_careful(stripped, f"line {n}") if plain_tried else loads_strict(stripped, f"line {n}")
    except CanonicalError as exc:
        raise ImportError_(n, str(exc).removeprefix(f"line {n}: ")) from None


def import_message(obj: Any, n: int, *, allow_system: bool, latest: str) -> Message:
    """The message line `n` of an import file holds (`obj`: the line parsed); ImportError_ naming what is wrong."""
    if not isinstance(obj, dict):
        raise ImportError_(n, "must be a JSON object with role and text")
    if not obj.keys() <= IMPORT_FIELDS:
        raise ImportError_(n, f"unknown fields {sorted(set(obj) - IMPORT_FIELDS)}")
    role, text, meta = obj.get("role"), obj.get("text"), obj.get("meta", {})
    if role in ROLES and type(text) is str and type(meta) is dict:
        problem = record_problem(str(role), text, meta)
        if problem is not None:
            raise record_refusal(n, problem)
    if role == "system" and not allow_system:
        raise ImportError_(n, 'role "system" is refused: it would reach the model as an instruction (--allow-system imports it)')
    try:
        m = validate_message(role, text, meta, obj.get("ts"), parsed_json=True)
    except EventError as exc:
        raise ImportError_(n, str(exc)) from None
    if not m.text.strip():
        raise ImportError_(n, "text is empty or only whitespace: there is nothing to remember")
    if m.ts is not None and m.ts > latest:
        raise ImportError_(n, f"ts {m.ts} is more than 1 day in the future (latest accepted: {latest})")
    return m


def parse_import(
    lines: Iterable[bytes], progress: Any = None, *, allow_system: bool = False, now: datetime | None = None
) -> list[Message]:
    """Parse and validate an import file; raise ImportError_ naming the first bad line (docs/FORMAT.md §7).

    A UTF-8 byte order mark before the first line and blank lines at the end are skipped; a blank line
    before another line, empty or whitespace-only text, role "system" (unless `allow_system`) and a `ts`
    more than a day after `now` (default: the clock) are refused.
    """
    messages = []
    latest = latest_ts(now)
    blank = 0  # the first blank line no message has followed yet
    for n, raw in enumerate(lines, start=1):
        if progress is not None:
            progress.update(1)
        if n == 1 and raw.startswith(UTF8_BOM):
            raw = raw[len(UTF8_BOM) :]
        stripped = raw.strip()
        if not stripped:
            blank = blank or n
            continue
        if blank:
            raise ImportError_(blank, "empty line (blank lines are accepted only at the end of the file)")
        obj = parse_import_line(stripped, n)
        messages.append(import_message(obj, n, allow_system=allow_system, latest=latest))
    return messages


__all__ = [
    "IMPORT_FUTURE_LIMIT",
    "UTF8_BOM",
    "ImportError_",
    "Message",
    "import_message",
    "latest_ts",
    "parse_import",
    "parse_import_line",
    "record_problem",
    "validate_message",
]
