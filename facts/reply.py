"""The model's reply to a supersession prompt, read strictly (issue 12): one JSON array and nothing else.

    parse_reply(reply) -> list   (ReplyRefused otherwise)

Tolerated: surrounding whitespace and one code fence (```json … ```) around the array. Refused: prose before
or after, two blocks, an object or any other top level, NaN/Infinity, a repeated key (json.loads would keep
the last one silently), an integer too long to read, nesting too deep, more than MAX_REPLY_CHARS. A
refusal's message gives a JSON type or a position, never the reply's words: a model can echo memory text.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_REPLY_CHARS = 16_000

_FENCE = re.compile(r"\A```(?:json)?[ \t]*\n(?P<body>.*)\n[ \t]*```\Z", re.DOTALL | re.IGNORECASE)


class ReplyRefused(ValueError):
    """The whole reply is refused; the message is the Refusal's reason."""


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ReplyRefused("an object repeats a key")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise ReplyRefused(f"not JSON ({name} is not a JSON number)")


def parse_reply(reply: object) -> list[Any]:
    """The reply's JSON array; ReplyRefused for anything else (prose, an object, two blocks, NaN, …)."""
    if not isinstance(reply, str):
        raise ReplyRefused("not text")
    if len(reply) > MAX_REPLY_CHARS:
        raise ReplyRefused(f"{len(reply)} characters, over the limit of {MAX_REPLY_CHARS}")
    body = reply.strip()
    if body.startswith("```"):
        fenced = _FENCE.match(body)
        if fenced is None or "```" in fenced["body"]:
            raise ReplyRefused("a code fence that does not hold exactly one JSON block")
        body = fenced["body"]
    try:
        value = json.loads(body, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constant)
    except ReplyRefused:
        raise
    except json.JSONDecodeError as exc:  # its message gives a position, never the text
        raise ReplyRefused(f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:  # an integer too long to read, nesting too deep
        raise ReplyRefused(f"not usable JSON ({type(exc).__name__})") from None
    if not isinstance(value, list):
        raise ReplyRefused(f"a JSON {json_type(value)}, not an array")
    return value


def json_type(value: object) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number" if isinstance(value, int | float) else "array"


def one_line(value: object, what: str, limit: int) -> str:
    if not isinstance(value, str):
        raise ReplyRefused(f"{what} is a JSON {json_type(value)}, not a string")
    line = " ".join(value.split())
    if not line:
        raise ReplyRefused(f"{what} is empty")
    if len(line) > limit:
        raise ReplyRefused(f"{what} is over {limit} characters")
    if not line.isprintable():
        raise ReplyRefused(f"{what} holds control characters")
    return line
