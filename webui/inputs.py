"""The app's input rules: K, messages, queries, uploads. Each refusal says what was wrong.

All pure except `read_upload`, which stats and reads the one uploaded file.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from chat.engine import MAX_MESSAGE_CHARS, InputError, check_message
from receipts.body import MAX_RECEIPT_BYTES
from receipts.cosignature import Policy, parse_policy
from receipts.note import MalformedNote
from retrieval.model import MAX_K as K_API_MAX

# The page's slider stops at K_MAX; the MCP tools (and their API endpoints) take what retrieval takes, K_API_MAX.
K_MIN, K_MAX, K_DEFAULT = 1, 20, 8
MAX_QUERY_CHARS = 1000

__all__ = [
    "K_API_MAX",
    "K_DEFAULT",
    "K_MAX",
    "K_MIN",
    "MAX_MESSAGE_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_RECEIPT_BYTES",
    "BadInput",
    "check_query",
    "message_or_error",
    "parse_k",
    "read_upload",
]


class BadInput(ValueError):
    """Input refused before anything was read from or written to a ledger."""


def parse_k(value: object, k_max: int = K_MAX) -> int:
    """K as an int in [K_MIN, k_max]. A slider may send 8.0: a whole float is accepted, nothing else is coerced."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadInput(f"K: must be a whole number from {K_MIN} to {k_max}")
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise BadInput(f"K {value!r}: must be a whole number from {K_MIN} to {k_max}")
        value = int(value)
    if not K_MIN <= value <= k_max:
        raise BadInput(f"K {value}: must be from {K_MIN} to {k_max}")
    return value


def message_or_error(message: object) -> str:
    """The chat message, or BadInput: empty, not text, or over MAX_MESSAGE_CHARS characters."""
    try:
        return check_message(message)
    except InputError as exc:
        raise BadInput(str(exc)) from None


def check_query(query: object) -> str:
    if not isinstance(query, str) or not query.strip():
        raise BadInput("search: type some words to search for")
    if len(query) > MAX_QUERY_CHARS:
        raise BadInput(f"search: {len(query)} characters is over the limit of {MAX_QUERY_CHARS}")
    return query


def read_upload(path: object) -> bytes:
    """An uploaded file's bytes, refusing a missing, empty or oversized file without reading it."""
    if path is None or path == "":
        raise BadInput("upload: choose a receipt file (.json) first")
    if not isinstance(path, (str, os.PathLike)):
        raise BadInput("upload: expected one file")
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError:
        raise BadInput("upload: the uploaded file is no longer available; upload it again") from None
    if size > MAX_RECEIPT_BYTES:
        raise BadInput(f"upload: {size} bytes is over the {MAX_RECEIPT_BYTES}-byte receipt limit")
    if size == 0:
        raise BadInput("upload: the file is empty")
    return p.read_bytes()


MAX_POLICY_CHARS = 64 * 1024


def read_policy(text: object) -> Policy | None:
    """A witness policy pasted on the Verify tab (c2sp.org/tlog-policy), or None when the box is empty; BadInput
    (one line naming the policy's line) when it is not one."""
    if not isinstance(text, str) or not text.strip():
        return None
    if len(text) > MAX_POLICY_CHARS:
        raise BadInput(f"witness policy: {len(text):,} characters is over the limit of {MAX_POLICY_CHARS:,}")
    try:
        return parse_policy(text)
    except MalformedNote as exc:
        raise BadInput(f"witness policy: {exc}") from None
