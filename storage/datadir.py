"""The data-directory rules both faces apply to the DATA_DIR they are handed (`mre`/`python -m ...` and `python app.py`):
checked before anything is opened, nothing printed here (the face says what was created).

A reading command needs the directory to exist and creates nothing in it or beside it. A writing one (import, chat,
the app) creates at most the last component of the path — the whole path only with `create` (`--create`) — so a typo
cannot silently start a second, empty history.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from storage.common.fsmode import private_dir

EXPECTED_DATA_DIR = "expected a data directory (the DATA_DIR the app, `python -m chat` or `ledger import` writes)"


class DataDirError(ValueError):
    """A path that cannot be the data directory (or file) asked for; the message is one line for the user."""


def given_path(raw: str, *, what: str, expected: str) -> Path:
    """`raw` as a path, refusing a blank one as `WHAT: an empty path; EXPECTED`.

    `Path("")` is `.`: without this, an empty argument quietly means the current folder
    (`retrieval rebuild ""` built ./index.sqlite; `ledger import D S ""` said ".: a directory").
    """
    if not raw.strip():
        raise DataDirError(f"{what}: an empty path; {expected}")
    return Path(raw)


_URL_LIKE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:/")  # a scheme; Path() folds its '//' to '/'


def shown_arg(raw: str) -> str:
    """A command-line argument as messages may show it: a URL (or a URL folded by Path) without its password."""
    if not _URL_LIKE.match(raw):
        return raw
    from storage import redact  # light: no database driver is imported

    return redact(raw if "://" in raw else raw.replace(":/", "://", 1))


def refuse_url(raw: str) -> None:
    """Refuse a URL given where a data directory is expected, naming it without its password."""
    if _URL_LIKE.match(raw):
        raise DataDirError(
            f"{shown_arg(raw)}: a URL, not a data directory (a database is named by a postgresql:// URL in DATABASE_URL)"
        )


def existing_data_dir(raw: str) -> Path:
    """The data directory a reading command uses: it must exist. Nothing is created."""
    path = given_path(raw, what="DATA_DIR", expected=EXPECTED_DATA_DIR)
    if not path.exists():
        refuse_url(raw)
        raise DataDirError(f"{raw}: no such data directory (nothing was created)")
    if not path.is_dir():
        raise DataDirError(f"{raw}: not a directory; {EXPECTED_DATA_DIR}")
    return path


def writable_data_dir(raw: str, *, create: bool) -> Path:
    """Check the data directory a writing command will write into; creates nothing (see `make_data_dir`).

    A missing directory is fine when the folder it would go in exists (it will be created, and the
    command says so); a missing parent is refused unless `create` (`--create`: the whole path).
    """
    path = given_path(raw, what="DATA_DIR", expected=EXPECTED_DATA_DIR)
    if path.is_dir():
        return path
    if os.path.lexists(path):
        raise DataDirError(f"{raw}: not a directory; {EXPECTED_DATA_DIR}")
    refuse_url(raw)
    parent = path.parent
    if os.path.lexists(parent) and not parent.is_dir():
        raise DataDirError(f"{raw}: {parent} is not a directory; {EXPECTED_DATA_DIR}")
    if not create and not parent.is_dir():
        raise DataDirError(
            f"{raw}: no such data directory, and the folder it would go in ({parent}) does not exist either; "
            "nothing was created (check the path, or pass --create to create all of it)"
        )
    return path


def make_data_dir(path: Path) -> bool:
    """Create the data directory checked by `writable_data_dir` if it is missing (0700); True when it was created
    (the face says so: `created data directory PATH`)."""
    if path.is_dir():
        return False
    private_dir(path)
    return True


__all__ = [
    "EXPECTED_DATA_DIR",
    "DataDirError",
    "existing_data_dir",
    "given_path",
    "make_data_dir",
    "refuse_url",
    "shown_arg",
    "writable_data_dir",
]
