"""Files offered for download (I/O): copies in a private temp folder, never paths into DATA_DIR.

Gradio serves only files a handler returns, after copying them into its cache;
returning a path inside DATA_DIR would also need DATA_DIR in `allowed_paths`,
which would let anyone fetch any ledger by path. So a download is a copy,
written under the system temp dir (which Gradio accepts), in a folder of its
own with an unguessable name, and swept once Gradio has taken its copy.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import tempfile
import time
from pathlib import Path

NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,100}")
MAX_AGE_SECONDS = 15 * 60
STATIC = "static"


class Downloads:
    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        base = Path(root) if root is not None else Path(tempfile.gettempdir()) / "mre-downloads"
        base.mkdir(parents=True, exist_ok=True)
        self.root = Path(tempfile.mkdtemp(prefix="run-", dir=base))

    def put(self, name: str, data: bytes) -> str:
        """Write `data` as a file called `name` in a fresh folder; return its path."""
        if not NAME_RE.fullmatch(name) or name.startswith("."):
            raise ValueError(f"download name {name!r} is not a plain file name")
        folder = self.root / secrets.token_hex(16)
        folder.mkdir(mode=0o700)
        path = folder / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        return str(path)

    def put_static(self, name: str, data: bytes) -> str:
        """Like put, for a file that lives as long as the app (never swept): the public key."""
        if not NAME_RE.fullmatch(name) or name.startswith("."):
            raise ValueError(f"download name {name!r} is not a plain file name")
        path = self.root / STATIC / name
        path.parent.mkdir(mode=0o700, exist_ok=True)
        path.write_bytes(data)
        return str(path)

    def sweep(self, max_age: float = MAX_AGE_SECONDS, now: float | None = None) -> int:
        """Remove copies older than `max_age` seconds; return how many folders went."""
        cutoff = (time.time() if now is None else now) - max_age
        removed = 0
        for folder in self.root.iterdir():
            if folder.name == STATIC:
                continue
            try:
                if folder.stat().st_mtime < cutoff:
                    shutil.rmtree(folder, ignore_errors=True)
                    removed += 1
            except FileNotFoundError:
                continue
        return removed

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
