"""How an error message names a JSON value read from outside: in JSON's words (`null`, `true`, `array`),
never Python's (`None`, `True`, `list`, `NoneType`) — the person reading it wrote JSON, not Python.

Pure; used by the parsers of receipts, certificates, checkpoints and trust files.
"""

from __future__ import annotations

import json

SHOWN_CHARS = 80


def json_type(value: object) -> str:
    """The JSON type of a parsed value: null, boolean, number, string, array or object."""
    if value is None:
        return "null"
    if isinstance(value, bool):  # before int: a bool is an int in Python, not in JSON
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "not a JSON value"


def json_shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """`value` as JSON text (`null`, `true`, `"abc"`, `[1,2]`), at most `limit` characters (`…` says it was cut).

    Non-ASCII and control characters are escaped (`\\u202e`), so a value quoted from a file cannot
    rearrange the terminal line that shows it.
    """
    if isinstance(value, str) and len(value) > limit:
        value = value[:limit]  # the rest would be cut anyway: never encode a megabyte for an error line
    try:
        text = json.dumps(value, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return json_type(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def field_shown(obj: dict[str, object], key: str) -> str:
    """`obj[key]` as `json_shown` does, or `nothing` when the field is missing (a missing field is not `null`)."""
    return json_shown(obj[key]) if key in obj else "nothing"


__all__ = ["field_shown", "json_shown", "json_type"]
