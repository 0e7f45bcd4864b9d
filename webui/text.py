"""Making untrusted text safe to show (pure).

Memories, answers and upload contents are visitor-controlled: in Markdown they
could inject links, images, HTML or table breaks. Everything shown in a
Markdown component goes through `md`, every hash through `short`.
"""

from __future__ import annotations

import html
import re

from chat.offline import one_line, snippet

__all__ = ["md", "md_code", "one_line", "short", "snippet"]

# Every ASCII punctuation character may be backslash-escaped in CommonMark;
# these are the ones that can start or end markup (| breaks a GFM table cell).
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>=$])")
HASH_PREFIX = 12


def md(text: str, limit: int | None = None) -> str:
    """`text` on one line (cut to `limit` characters), HTML-escaped and with Markdown punctuation escaped."""
    flat = snippet(text, limit) if limit is not None else one_line(text)
    return _MD_SPECIAL.sub(r"\\\1", html.escape(flat, quote=False))


def md_code(text: str) -> str:
    """An inline code span for text that may itself hold backticks (CommonMark: a longer fence)."""
    flat = one_line(text)
    longest = max((len(m) for m in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def short(hex_value: str, n: int = HASH_PREFIX) -> str:
    """A hash prefix for display: enough to compare by eye, marked as cut."""
    return hex_value if len(hex_value) <= n else hex_value[:n] + "…"
