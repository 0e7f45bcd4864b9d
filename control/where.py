"""Where a control command finds a session: a `Stores` (storage.api), the stores it was handed or the files in
DATA_DIR.

Every control command (forget, revoke, restore, supersede, correct, history) takes an optional `stores=`
(storage.api.Stores): the ledger, the search index, the receipt store (the turn lock, receipts, `.cites` records,
the producer's tree, checkpoints), the derived receipt rows and the session state. `where` is the thin entry for the
callers that still pass a data directory (and perhaps a ledger and an index) instead: it opens the files there with
the index opened only when a step needs it (opening one may write to DATA_DIR, and a refused command must leave it
as it found it). Below it, control asks the stores' contract and never which backend it has.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from storage.api import Stores, file_stores

if TYPE_CHECKING:
    from storage.api import LedgerStore, SearchIndex

Where = Stores  # the handles a command uses: one deployment's stores


def where(
    data_dir: str | os.PathLike[str],
    stores: Stores | None = None,
    *,
    ledger: LedgerStore | None = None,
    index: SearchIndex | None = None,
) -> Stores:
    """`stores` when given (a `ledger` or `index` passed as well must be the stores' own), else the files in
    `data_dir` with the `ledger` and `index` given (each opened there when not; an index opened here is closed by
    the caller's `close_index()`)."""
    if stores is not None:
        if ledger is not None and ledger is not stores.ledger:
            raise ValueError("control: pass either stores= or ledger=, not a ledger other than the stores' own")
        if index is not None and index is not stores.index:
            raise ValueError("control: pass either stores= or index=, not an index other than the stores' own")
        return stores
    led = ledger  # with an index and no ledger, file_stores takes the index's own
    try:
        return file_stores(data_dir, index=index, ledger=led, lazy=True)
    except ValueError:
        raise ValueError("control: a PostgreSQL ledger comes with its stores: pass stores= (storage.stores.open_stores)") from None


__all__ = ["Where", "where"]
