"""Helpers for the erasure tests: a session whose answers cite a marked memory, and a byte-level grep."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from pathlib import Path

from chat.engine import Engine, Turn
from chat.llm import LLM

# A word no text of ours holds: its stem and its last letters are what the grep looks for (FTS5 stores terms
# lowercased and stemmed, and may store a term as the suffix after a prefix it shares with the term before it).
MARKER = "Vorquzqxvjian"
NEEDLES = (b"vorquzqxvji", b"zqxvjian", b"qxvji")
_B64_RUN = re.compile(rb"[A-Za-z0-9+/]{24,}={0,2}")


def engine(data: Path) -> Engine:
    return Engine(data, llm=LLM(api_key=""))


def marked_session(eng: Engine, session: str = "alice") -> tuple[int, list[Turn]]:
    """A memory holding the marker (in two forms), other memories, and three turns whose receipts cite it."""
    eng.remember(session, "I adopted a grey cat named Miso")
    mem = eng.remember(session, f"My locker code word is {MARKER}, and VORQUZQXVJIANS is its plural")
    eng.remember(session, "I moved to Lisbon in March")
    turns = [
        eng.turn(session, "What is my locker code word?"),
        eng.turn(session, "Tell me the locker code word again"),
        eng.turn(session, "Which code word opens my locker?"),
    ]
    for t in turns:
        assert mem.seq in [h.seq for h in t.hits], "each turn must cite the marked memory"
    return mem.seq, turns


def _blobs(raw: bytes) -> Iterable[bytes]:
    yield raw.lower()
    for run in _B64_RUN.findall(raw):  # receipts and certificates carry base64 payloads
        try:
            yield base64.b64decode(run + b"=" * (-len(run) % 4)).lower()
        except ValueError:
            continue


def files_with_marker(*roots: Path) -> list[str]:
    """Every file under `roots` whose raw bytes (or a base64 payload in them) hold the marker in any case or form."""
    hits = []
    for root in roots:
        for path in sorted(root.rglob("*")):
            if not path.is_file() or path.is_symlink():
                continue
            raw = path.read_bytes()
            if any(needle in blob for blob in _blobs(raw) for needle in NEEDLES):
                hits.append(str(path))
    return hits
