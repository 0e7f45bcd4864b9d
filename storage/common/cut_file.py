"""A repair's cut copy, written the same way by both backends: exclusive, 0600, fsynced, its folder fsynced."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from storage.common.fsmode import fsync_dir, open_private, write_all


def write_cut(dest: Path, chunks: Iterable[bytes]) -> tuple[int, int, str]:
    """Write `chunks` to a new file `dest` (exclusive, 0600, fsynced, folder fsynced); (lines, bytes, sha256 hex).

    The cut's copy on either backend: the file backend's tail of events.jsonl, PostgreSQL's cut rows as JSONL."""
    h = hashlib.sha256()
    nbytes = newlines = 0
    last = b""
    fd = open_private(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        for chunk in chunks:
            write_all(fd, chunk)
            h.update(chunk)
            nbytes += len(chunk)
            newlines += chunk.count(b"\n")
            last = chunk[-1:] if chunk else last
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(dest.parent)
    lines = newlines + (1 if nbytes and last != b"\n" else 0)
    return lines, nbytes, h.hexdigest()
