"""Listing a data directory's sessions from their files: line count and last line of each events.jsonl.
The summary a listing prints (SessionSummary, last_ts) is pure, in ledger/listing.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ledger.listing import READ_BYTES, SessionSummary, last_ts
from storage.files.ledger.store import Ledger


def count_and_last_line(path: Path) -> tuple[int, bytes | None]:
    """(complete lines, the last complete line without its newline), in one streaming pass."""
    count, carry, last = 0, b"", None
    with open(path, "rb") as f:
        while chunk := f.read(READ_BYTES):
            count += chunk.count(b"\n")
            data = carry + chunk
            end = data.rfind(b"\n")
            if end < 0:
                carry = data
                continue
            last = data[data.rfind(b"\n", 0, end) + 1 : end]
            carry = data[end + 1 :]
    return count, last

def summarize(ledger: Ledger, session: str, progress: Any = None) -> SessionSummary:
    report = ledger.verify(session, progress=progress)
    lines, last = count_and_last_line(ledger.log_path(session))
    return SessionSummary(session, lines, last_ts(last), report)

def list_sessions(ledger: Ledger, progress: Any = None) -> list[SessionSummary]:
    """`progress` (tqdm-like) is updated with the bytes verified."""
    return [summarize(ledger, s, progress) for s in ledger.sessions()]
