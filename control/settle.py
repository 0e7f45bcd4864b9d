"""No copy of a forgotten word after the person asked (issue 28): the one check every copy of a session's content
makes before it leaves — the bundle export (`python -m bundle export`, the app's Ledger tab, MCP's export_session),
the Markdown export (CLI and app) and the app's receipt downloads (the Chat tab's, the copy with memories withheld).

An erasure that stopped half way — an I/O error after Ledger.erase, a SIGKILL — leaves its journal
(DATA_DIR/erasures/.pending-<session>.json on files; on PostgreSQL a row of `erasures_pending`, written in the erase's
transaction, so every replica sees it, not only the one whose forget stopped): the ledger has forgotten, but the
stored receipts may still disclose the words until the steps after it run. `settle` runs them first
(control.forget.recover, for that session only, with the caller's handles and download folders); when they cannot be
finished now (the disk still fails, the journal cannot be read) it refuses with one line, ErasureUnfinished, and the
caller copies nothing. With nothing pending it costs one stat of the journal's path (and on PostgreSQL one query).

`settled` is the same for a caller that copies under the session's turn lock (the bundle export, the app's receipt
reads and downloads): it settles first (recover takes that lock itself), then takes the lock; an erasure that began
and stopped in between is settled too and the lock taken again, or the copy refused.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from control.forget import recover
from ledger.erasing import journal_path

if TYPE_CHECKING:
    from receipts.keys import SigningKey
    from storage.api import Stores

log = logging.getLogger("control")


class ErasureUnfinished(Exception):
    """An erasure of the session stopped half way and cannot be finished now: nothing of the session is copied out."""


def refusal(session: str) -> str:
    return (
        f"session {session}: an erasure of it stopped half way and cannot be finished just now, so nothing of the session "
        "is copied out; it is finished by the next forget or when the app starts — try again then"
    )


def unfinished(data_dir: str | os.PathLike[str], session: str, stores: Stores | None = None) -> bool:
    """Whether an erasure of `session` stopped half way (or is running): its journal is in `data_dir`, or, on
    PostgreSQL (`stores`), in the database — whichever replica began it (control.forget: `erasures_pending`)."""
    if journal_path(Path(data_dir), session).exists():
        return True
    return stores is not None and stores.ledger.erasure_pending(session)


def settle(
    data_dir: str | os.PathLike[str],
    session: str,
    *,
    stores: Stores | None = None,
    key: SigningKey | None = None,
    copies: Iterable[str | os.PathLike[str]] = (),
) -> list[Path]:
    """Before a copy of `session`'s content is made: finish the erasure of it that stopped half way, if any (the
    certificates written; [] when none was pending). ErasureUnfinished (one line) when it cannot be finished now.

    `stores`, `key`, `copies`: as for control.forget.recover — the caller's handles (the app passes its engine's
    stores and key, and its download folders, whose stale copies of the redacted receipts go too)."""
    if not unfinished(data_dir, session, stores):
        return []
    try:
        written = recover(data_dir, stores=stores, key=key, copies=copies, session=session)
    except Exception as exc:  # noqa: BLE001 - whatever stopped the erasure still stops it: refuse, never copy
        # the class and where only: a message could quote a path or a word
        log.warning("session %s: an interrupted erasure could not be finished before a copy (%s); the copy is refused", session, type(exc).__name__)
        raise ErasureUnfinished(refusal(session)) from None
    if unfinished(data_dir, session, stores):  # a journal recover could not read: left for a person, and still refused
        raise ErasureUnfinished(refusal(session))
    for path in written:
        log.warning("session %s: an interrupted erasure was finished before a copy was made: certificate %s", session, path.name)
    return written


@contextmanager
def settled(
    data_dir: str | os.PathLike[str],
    session: str,
    lock: Callable[[str], AbstractContextManager[object]],
    *,
    stores: Stores | None = None,
    key: SigningKey | None = None,
    copies: Iterable[str | os.PathLike[str]] = (),
    settle_now: Callable[[], object] | None = None,
) -> Iterator[None]:
    """`settle`, then hold the session's turn lock (`lock`, e.g. ReceiptBackend.turn_lock) with no erasure of it
    pending, for the copy to be made in. An erasure that began between the settle and the lock (another request,
    process or replica) and stopped half way is finished too: settled once more, outside the lock (recover takes it
    itself), and the lock taken again; ErasureUnfinished when it cannot be finished now, or when yet another began
    and stopped in between. `settle_now`: the caller's own settle (the app's, which raises its own one-line error),
    else `settle` with `stores`, `key` and `copies`."""

    def settle_once() -> object:
        return settle_now() if settle_now is not None else settle(data_dir, session, stores=stores, key=key, copies=copies)

    for _attempt in range(2):
        settle_once()
        with lock(session):
            if not unfinished(data_dir, session, stores):
                yield
                return
    raise ErasureUnfinished(refusal(session))


__all__ = ["ErasureUnfinished", "refusal", "settle", "settled", "unfinished"]
