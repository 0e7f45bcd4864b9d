"""Files offered for download (I/O): copies in a private temp folder, never paths into DATA_DIR.

Gradio serves only files a handler returns, after copying them into its cache;
returning a path inside DATA_DIR would also need DATA_DIR in `allowed_paths`,
which would let anyone fetch any ledger by path. So a download is a copy,
written under the system temp dir (which Gradio accepts), in a folder of its
own with an unguessable name, and swept once Gradio has taken its copy.

Each process writes under its own `run-<pid>-<random>` folder and holds an
exclusive flock on the `.lock` file in it for as long as it lives: the kernel
drops that lock when the process dies, however it dies. A new Downloads (and
every sweep) overwrites and removes the sibling `run-*` folders of processes
that are gone — they may hold receipts of a memory forgotten since (an erasure
killed half-way), and nothing else would ever walk them: Gradio's cache cleanup
knows only the files its own process made. Gone means the pid in the name is not
running and the lock is free; a live process's folder is never touched. An older
folder without a pid (`run-<random>`, written before this scheme) is left alone.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import secrets
import shutil
import stat
import tempfile
import time
from pathlib import Path

NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,100}")
MAX_AGE_SECONDS = 15 * 60
STATIC = "static"
RUN_PREFIX = "run-"
LOCK = ".lock"
RUN_PID = re.compile(r"run-([0-9]+)-")
log = logging.getLogger("webui")


class Downloads:
    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        base = Path(root) if root is not None else Path(tempfile.gettempdir()) / "mre-downloads"
        base.mkdir(parents=True, exist_ok=True)
        self.base = base
        self.root = Path(tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{os.getpid()}-", dir=base))
        # held until close(), a plain fd so that dropping this object does not release it; blocking, since a
        # sweeper may hold it for a moment before it sees this pid alive and lets go
        self._lock: int | None = os.open(self.root / LOCK, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        self.sweep_dead()

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

    def reserve(self, name: str) -> Path:
        """A path called `name` in a fresh folder, for a writer that makes the file itself (a bundle written as it
        streams, bundle.export_session): swept like a copy from `put`. Nothing is created at the path."""
        if not NAME_RE.fullmatch(name) or name.startswith("."):
            raise ValueError(f"download name {name!r} is not a plain file name")
        folder = self.root / secrets.token_hex(16)
        folder.mkdir(mode=0o700)
        return folder / name

    def put_static(self, name: str, data: bytes) -> str:
        """Like put, for a file that lives as long as the app (never swept): the public key."""
        if not NAME_RE.fullmatch(name) or name.startswith("."):
            raise ValueError(f"download name {name!r} is not a plain file name")
        path = self.root / STATIC / name
        path.parent.mkdir(mode=0o700, exist_ok=True)
        path.write_bytes(data)
        return str(path)

    def sweep(self, max_age: float = MAX_AGE_SECONDS, now: float | None = None) -> int:
        """Remove copies older than `max_age` seconds, and the folders of processes that are gone (sweep_dead);
        return how many folders went."""
        cutoff = (time.time() if now is None else now) - max_age
        removed = self.sweep_dead()
        for folder in self.root.iterdir():
            if folder.name in (STATIC, LOCK):
                continue
            try:
                if folder.stat().st_mtime < cutoff:
                    shutil.rmtree(folder, ignore_errors=True)
                    removed += 1
            except FileNotFoundError:
                continue
        return removed

    def sweep_dead(self) -> int:
        """Overwrite and remove every sibling `run-*` folder left by a process that is gone; return how many went.
        A crashed app's copies of receipts are found by nothing else, and they may quote a forgotten memory."""
        removed = 0
        for folder in sorted(self.base.iterdir()):
            if (
                folder == self.root
                or not folder.name.startswith(RUN_PREFIX)
                or folder.is_symlink()
                or not folder.is_dir()
            ):
                continue
            try:
                removed += _remove_if_dead(folder)
            except OSError as exc:  # another process removing it too, or not ours to remove: left as it is
                log.warning("downloads: a stale folder could not be removed (%s)", type(exc).__name__)
        return removed

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        if self._lock is not None:
            os.close(self._lock)  # after the folder went: a sweep never sees it unlocked and still there
            self._lock = None


def _remove_if_dead(folder: Path) -> int:
    """1 if `folder` belonged to a process that is gone and was removed, 0 if it was left. Gone means both: its
    lock is free (or it never made one) and the pid in its name is not running. A free lock alone is not enough —
    a process between creating its folder and locking it is alive — and a pid alone could be another pid
    namespace's; a pid reused since only keeps a folder a while longer."""
    m = RUN_PID.match(folder.name)
    if m is None or _alive(int(m.group(1))):
        return 0
    try:
        fd = os.open(folder / LOCK, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:  # killed before it made its lock file
        shred_tree(folder)
        return 1
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0  # a live process holds it (one whose pid this namespace does not see)
        shred_tree(folder)  # under its lock: a second sweeper gets it only once the folder is gone
        return 1
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return True  # not a pid we can ask about: keep the folder
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


def shred_tree(folder: Path) -> None:
    """Overwrite every regular file under `folder` with zeros (fsynced), unlink it, then remove the folders.
    Symlinks are unlinked, never followed."""
    for dirpath, dirnames, filenames in os.walk(folder, topdown=False, followlinks=False):
        here = Path(dirpath)
        for name in filenames:
            _shred(here / name)
        for name in dirnames:
            sub = here / name
            if sub.is_symlink():
                sub.unlink(missing_ok=True)
            else:
                _rmdir(sub)
    _rmdir(folder)


def _rmdir(path: Path) -> None:
    try:
        path.rmdir()
    except FileNotFoundError:
        pass  # another sweeper got there first


def _shred(path: Path) -> None:
    try:
        regular = stat.S_ISREG(os.lstat(path).st_mode)  # a symlink is unlinked, its target never opened
    except FileNotFoundError:
        return
    if regular:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            left = os.fstat(fd).st_size
            block = bytes(min(left, 1 << 16))
            while left > 0:
                left -= os.write(fd, block[:left])
            os.fsync(fd)
        finally:
            os.close(fd)
    path.unlink(missing_ok=True)
