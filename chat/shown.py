"""What a person reads when a turn fails: the same words at every edge (the CLI, the page, an MCP client).

A TurnError that wraps an unexpected exception carries that exception's class and message in parentheses
(`the turn failed (ValueError: …); no answer was given`, chat.engine): the class is an internal name and
the message may quote the question or a memory. Both are dropped here; the server log keeps the class.
"""

from __future__ import annotations

from chat.engine import TurnError

TURN_FAILED = "the turn failed; no answer was given"


def turn_error_text(exc: BaseException) -> str:
    """`str(exc)` without the ` (Class: message)` of the exception a TurnError wraps; any other text as it is."""
    text = str(exc)
    cause = exc.__cause__
    if not isinstance(exc, TurnError) or cause is None:
        return text
    name = type(cause).__name__
    text = text.replace(f" ({name}: {cause})", "")
    return TURN_FAILED if name in text else text  # worded some other way: a fixed sentence, never the class


__all__ = ["TURN_FAILED", "turn_error_text"]
