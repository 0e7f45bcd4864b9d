"""Where a control command finds a session (I/O): the stores it was handed, or the files in DATA_DIR.

Every control command (forget, revoke, restore, supersede, correct, history) takes an optional `stores=`
(storage.stores.Stores): the ledger, the search index, the receipt backend (receipts.stores.ReceiptBackend:
the turn lock, receipts, `.cites` records, the producer's tree, checkpoints) and the derived receipt rows —
on files in DATA_DIR or on PostgreSQL. Without it a command works on the files in DATA_DIR as it always did,
with the ledger and index its caller passes; the index is then opened only when a step needs it (opening one
may write to DATA_DIR, and a refused command must leave it as it found it).

What only the file backend has — torn tails and cut tails quarantined beside the log, index copies moved
aside, receipt temp files, import records in the session's folder, a log file's mtime — is reached through
`Where.files_ledger()` and only when `kind == "files"`; on PostgreSQL a row is committed whole (nothing is
quarantined), PgLedger.erase drops the import records in its transaction, and the last event's `ts` says
when the session was last written.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

from receipts.stores import ReceiptBackend, ReceiptRows
from storage.files.ledger.store import Ledger
from storage.files.receipts import files
from storage.files.receipts.file_backend import FileBackend, IndexRows
from storage.files.retrieval.db import Index

if TYPE_CHECKING:
    from storage.pg.index import PgIndex
    from storage.pg.ledger import PgLedger
    from storage.stores import Stores

    AnyLedger = Ledger | PgLedger
    AnyIndex = Index | PgIndex


@dataclass
class Where:
    """One command's handles on the session's stores. `close()` closes the index when this object opened it."""

    data: Path
    kind: Literal["files", "postgresql"]
    ledger: AnyLedger
    backend: ReceiptBackend
    _index: AnyIndex | None = None
    _rows: ReceiptRows | None = None
    _opened: bool = field(default=False, repr=False)
    stores: Stores | None = None  # the stores given (None: the files in `data`, opened here)

    @property
    def on_files(self) -> bool:
        return self.kind == "files"

    @property
    def shown(self) -> str:
        """What a message names as where the sessions are: the data folder, or the database (no password)."""
        if self.on_files:
            return str(self.data)
        db = getattr(self.ledger, "db", None)
        return str(getattr(db, "shown", "the database"))

    def index(self) -> AnyIndex:
        """The search index (on files opened here on first use, over this ledger)."""
        if self._index is None:
            self._index = Index(self.data, self.files_ledger())
            self._opened = True
        return self._index

    def rows(self) -> ReceiptRows:
        """The derived receipt rows (on files: index.sqlite's tables, created if an older index lacks them)."""
        if self._rows is None:
            idx = cast(Index, self.index())
            idx.ensure_schema("receipts", files.RECEIPTS_DDL)  # an index no engine opened since receipt_cites was added
            self._rows = IndexRows(idx)
        return self._rows

    def files_ledger(self) -> Ledger:
        """The file ledger, for what only the file backend has (the caller checked `on_files`)."""
        assert isinstance(self.ledger, Ledger), "a file-backend step on a PostgreSQL ledger"
        return self.ledger

    def vacuum_receipts(self) -> None:
        """On PostgreSQL: VACUUM the receipt tables after an erasure (the old row versions hold the words until
        then). Nothing to do on files (a receipt file is replaced by rename)."""
        vacuum = getattr(self.backend, "vacuum", None)
        if not self.on_files and vacuum is not None:
            vacuum()

    def close(self) -> None:
        if self._opened and self._index is not None:
            self._index.close()
            self._index, self._rows, self._opened = None, None, False


def where(
    data_dir: str | os.PathLike[str],
    stores: Stores | None = None,
    *,
    ledger: AnyLedger | None = None,
    index: AnyIndex | None = None,
) -> Where:
    """The handles a command uses: `stores`' when given (its ledger, index, receipts and rows; a `ledger` or
    `index` passed as well must be the stores' own), else the files in `data_dir` with the `ledger` and `index`
    given (each opened there when not)."""
    data = Path(data_dir)
    if stores is not None:
        if ledger is not None and ledger is not stores.ledger:
            raise ValueError("control: pass either stores= or ledger=, not a ledger other than the stores' own")
        if index is not None and index is not stores.index:
            raise ValueError("control: pass either stores= or index=, not an index other than the stores' own")
        return Where(data, stores.kind, stores.ledger, stores.receipts, stores.index, stores.rows, stores=stores)
    led: object = ledger if ledger is not None else (index.ledger if index is not None else Ledger(data))
    if not isinstance(led, Ledger):
        raise ValueError("control: a PostgreSQL ledger comes with its stores: pass stores= (storage.stores.open_stores)")
    return Where(data, "files", led, FileBackend(data), index)


__all__ = ["Where", "where"]
