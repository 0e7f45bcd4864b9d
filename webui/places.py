"""What a visitor reads names no place on the server (issue 28 §7).

The library's messages name where they looked — `session s: no such session in /srv/mre/data`, the database's
address — which is right on the command line, where the operator typed it, and wrong in the app or an MCP tool,
where a visitor reads it. Each Service registers its places here (the data directory, the keys folder, the
database); every message leaving the edge (webui.handlers.to_gr_error, so the page and every MCP tool) goes
through `scrub`, which writes them as DATA_DIR, the keys folder, the database.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

_PLACES: dict[str, str] = {}
_LOCK = threading.Lock()


def keep_private(place: str | os.PathLike[str], label: str) -> None:
    """Never show `place` (a folder: as given when absolute, and resolved) to a visitor: write `label` instead."""
    forms = set()
    if isinstance(place, str) and "://" in place:
        forms.add(place)
    else:
        p = Path(place)
        if p.is_absolute():
            forms.add(str(p))
        try:
            forms.add(str(p.resolve()))
        except OSError:
            pass
    with _LOCK:
        for form in forms:
            if len(form) > 1:  # never "/" (it would eat every slash)
                _PLACES[form] = label


def scrub(text: str) -> str:
    """`text` with every registered place replaced by its label, the longest first (a keys folder inside DATA_DIR)."""
    with _LOCK:
        places = sorted(_PLACES.items(), key=lambda kv: len(kv[0]), reverse=True)
    for place, label in places:
        if place in text:
            text = text.replace(place, label)
    return text
