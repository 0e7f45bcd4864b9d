"""A session's search as it stood at a ledger size (issue 34; docs/FORMAT.md §24): an index of its first events only.

Part of storage's public face. `prefix_index(ledger, session, size, config)` copies the session's first `size` lines,
byte for byte as stored, from either backend's ledger (LedgerStore.stored_lines) into a private temporary folder,
opens the SQLite index of the file backend over that copy and indexes it: the index a search saw when the ledger held
those events (an event's context and novelty come only from the events around and before it that it holds). The
folder is removed when the context ends. A replay of a receipt (chat.replay) and `retrieval search --as-of` search it.

When the ledger holds exactly `size` events now, the deployment's own index (caught up) is that index, and the
caller searches it instead: no copy (docs/FORMAT.md §24, "Cost").
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from storage.files.ledger.store import Ledger
from storage.files.retrieval.db import Index

if TYPE_CHECKING:
    from retrieval.config import IndexConfig
    from storage.contract import LedgerStore, SearchIndex


class PrefixUnavailable(RuntimeError):
    """The ledger does not hold the lines asked for (fewer events than `size`, or it changed while read)."""


@contextmanager
def prefix_index(ledger: LedgerStore, session: str, size: int, config: IndexConfig) -> Iterator[SearchIndex]:
    """The search index of `session`'s first `size` events (see the module), open for the context. PrefixUnavailable
    (one line, no path) when it cannot be made; the folder is gone when the context ends, however it ends."""
    with ExitStack() as stack:
        try:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="mre-asof-"))
            copy = Ledger(Path(tmp), record_tails=False)
            stack.callback(copy.close)
            path = copy.log_path(session)
            path.parent.mkdir(parents=True, exist_ok=True)
        except Exception as exc:  # no temporary folder to be had (TMPDIR full or unwritable)
            raise PrefixUnavailable(f"session {session}: no temporary folder for an index of its first {size} events ({type(exc).__name__})") from None
        try:
            with open(path, "wb") as out:
                if size:  # none is an empty file (stored_lines wants a line to count to): a session's first turn
                    with ledger.stored_lines(session, size) as (_n, chunks):
                        for chunk in chunks:
                            out.write(chunk)
                out.flush()
                os.fsync(out.fileno())  # not durability: the index opens the file anew and must see every byte
        except Exception as exc:  # StoredLinesChanged, a torn line, an unreadable file: one line, no path
            raise PrefixUnavailable(f"session {session}: its first {size} events could not be read ({type(exc).__name__})") from None
        try:
            index = Index(tmp, copy, config=config)
            stack.callback(index.close)
            index.index_session(session)
        except Exception as exc:  # a full disk, an SQLite error: one line, no path (the caller's own errors pass as they are)
            raise PrefixUnavailable(f"session {session}: its first {size} events could not be indexed ({type(exc).__name__})") from None
        yield index


__all__ = ["PrefixUnavailable", "prefix_index"]
