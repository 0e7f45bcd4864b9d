"""Private file modes: every file the project creates is 0600, every folder 0700, whatever the umask.

Memories are personal: a ledger, an index or a receipt readable by every local
user leaks them. The umask can only remove bits from the mode given at creation,
so creating with 0600/0700 already keeps group and other out; the explicit
fchmod/chmod after creation makes the result exactly 0600/0700 even under a
umask that strips owner bits (0o277 would leave an unwritable file).

Existing files and folders are never chmodded here: changing a person's modes
silently is their call, not ours (the app warns instead; see `looser_than_private`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
_LOOSE_BITS = stat.S_IRWXG | stat.S_IRWXO


def private_dir(path: str | os.PathLike[str]) -> Path:
    """mkdir -p `path`; every folder this call creates is 0700. Existing folders are left as they are."""
    p = Path(path)
    missing: list[Path] = []
    cur = p
    while not cur.exists():
        missing.append(cur)
        parent = cur.parent
        if parent == cur:
            break
        cur = parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=PRIVATE_DIR)
        except FileExistsError:
            if not d.is_dir():
                raise
            continue  # another process made it first: its mode is its creator's business
        os.chmod(d, PRIVATE_DIR)
    return p


def open_private(path: str | os.PathLike[str], flags: int) -> int:
    """os.open with mode 0600; when this call created the file, fchmod it to exactly 0600.

    With O_CREAT but without O_EXCL, "created by this call" is detected by the
    file not existing just before (a race only means an extra harmless fchmod
    of a file we own, or none on one another process created as 0600 itself).
    """
    creating = bool(flags & os.O_CREAT) and (bool(flags & os.O_EXCL) or not os.path.lexists(path))
    fd = os.open(path, flags | os.O_CLOEXEC, PRIVATE_FILE)
    if creating:
        try:
            os.fchmod(fd, PRIVATE_FILE)
        except BaseException:
            os.close(fd)
            raise
    return fd


def write_private(path: str | os.PathLike[str], data: bytes) -> None:
    """Create or truncate `path` (0600 when created) and write `data` to it; no fsync."""
    fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def looser_than_private(root: str | os.PathLike[str], *, limit: int = 100_000) -> Iterator[tuple[Path, int]]:
    """(path, mode) of each file or folder under `root` (root included) with group or other bits set.

    Symlinks are not followed. Stops after `limit` entries walked, so a huge
    data directory cannot stall a start-up check.
    """
    base = Path(root)
    seen = 0
    try:
        st = os.lstat(base)
    except OSError:
        return
    if stat.S_ISDIR(st.st_mode) and st.st_mode & _LOOSE_BITS:
        yield base, stat.S_IMODE(st.st_mode)
    for dirpath, dirnames, filenames in os.walk(base):
        for name in dirnames + filenames:
            seen += 1
            if seen > limit:
                return
            p = Path(dirpath) / name
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                continue
            if st.st_mode & _LOOSE_BITS:
                yield p, stat.S_IMODE(st.st_mode)


def write_all(fd: int, data: bytes | bytearray) -> None:
    """os.write until every byte of `data` is written (a write may take fewer)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a folder, so a rename or unlink inside it survives a power cut."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_durable(path: str | os.PathLike[str], data: bytes, *, sync_dir: bool = True) -> None:
    """Replace `path` with `data` so that a crash leaves the old file or the new one, never a mix: a temp file of
    this call's own (`.<name>.<random>.tmp`, 0600, O_EXCL: two writers never share one) in the same folder,
    fsync, rename over `path`, fsync of the folder. The folder must exist; a failed write removes its temp file.
    `sync_dir=False` leaves out the folder's fsync: the rename may then be lost to a power cut (the old file stays,
    whole) until a later fsync of the folder, e.g. the next durable replace of the same file."""
    p = Path(path)
    tmp = p.with_name(f".{p.name}.{os.urandom(8).hex()}.tmp")
    fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if sync_dir:
        fsync_dir(p.parent)
