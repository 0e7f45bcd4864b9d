"""Overwriting and removing the file backend's stray copies of words (I/O): torn and cut tails quarantined beside
a log, index copies moved aside, receipt temp files a crash left. An erasure (control.steps.finish) and a session's
deletion reach them through the stores' contract methods (Ledger.quarantined_with / drop_erased_leftovers,
retrieval.Index.scrub_copies, receipts.file_backend.FileBackend.scrub_temps); these are the shared mechanics.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from ledger.event import EVENTS_FILE
from storage.common.fsmode import fsync_dir

CUT_PREFIX = (
    f"{EVENTS_FILE}.cut-"  # ledger.repair.CUT_PREFIX (imported from there, repair would import the store first)
)
QUARANTINE_PREFIXES = (f"{EVENTS_FILE}.torn-", CUT_PREFIX)  # torn tails (store.py) and tails a repair cut (repair.py)
TORN_PREFIX_MIN = 8  # a torn write that stopped inside the text: its file ends with this many bytes of it, or more


def _holds(raw: bytes, wanted: Sequence[bytes]) -> bool:
    return any(n in raw or _ends_inside(raw, n) for n in wanted)


def _ends_inside(raw: bytes, n: bytes) -> bool:
    """Whether `raw` ends with at least TORN_PREFIX_MIN bytes of the start of `n` (a torn write stopped inside it)."""
    if len(n) <= TORN_PREFIX_MIN:
        return False
    tail = raw[-(len(n) - 1) :]
    head = n[:TORN_PREFIX_MIN]
    at = tail.find(head)
    while at != -1:
        if n.startswith(tail[at:]):
            return True
        at = tail.find(head, at + 1)
    return False


def quarantined_with(session_dir: Path, wanted: Sequence[bytes]) -> list[str]:
    """The names of the session's quarantine files (events.jsonl.torn-*, events.jsonl.cut-*) holding an erased text."""
    if not wanted or not session_dir.is_dir():
        return []
    hits = []
    for path in sorted(session_dir.iterdir()):
        if path.name.startswith(QUARANTINE_PREFIXES) and path.is_file() and not path.is_symlink():
            if _holds(path.read_bytes(), wanted):
                hits.append(path.name)
    return hits


def scrub(folder: Path, names: Iterable[str], prefixes: tuple[str, ...] = QUARANTINE_PREFIXES) -> tuple[str, ...]:
    """Overwrite each named file with zeros (fsynced), then remove it; return the names removed."""
    removed = []
    for name in names:
        if not name.startswith(prefixes) or "/" in name:
            continue  # the journal names only such files; anything else is not ours to remove
        path = folder / name
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            removed.append(name)  # removed before a crash: recover finishes the list
            continue
        try:
            left = os.fstat(fd).st_size
            block = bytes(min(left, 1 << 16))
            while left > 0:
                left -= os.write(fd, block[:left])
            os.fsync(fd)
        finally:
            os.close(fd)
        path.unlink()
        removed.append(name)
    if removed and folder.is_dir():
        fsync_dir(folder)
    return tuple(removed)


def scrub_prefixed(folder: Path, prefix: str, *, suffix: str = "") -> tuple[str, ...]:
    """Every regular file in `folder` named `prefix…suffix`, overwritten and removed (scrub); their names."""
    if not folder.is_dir():
        return ()
    names = sorted(
        p.name
        for p in folder.iterdir()
        if p.name.startswith(prefix) and p.name.endswith(suffix) and p.is_file() and not p.is_symlink()
    )
    return scrub(folder, names, (prefix,))


__all__ = ["QUARANTINE_PREFIXES", "TORN_PREFIX_MIN", "quarantined_with", "scrub", "scrub_prefixed"]
