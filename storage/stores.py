"""One deployment's stores, opened together: the ledger, the search index, receipts (with the producer's trees
and checkpoints) and the derived receipt rows — on files in DATA_DIR, or on PostgreSQL when DATABASE_URL says so.

Every entry point (the app, MCP, the chat / retrieval / receipts / control / bundle commands) opens its stores here
and hands them on; the code below them never asks which backend it has, except through `Stores.kind` where a
backend really differs (what erasure can promise, where a receipt copy is kept). On PostgreSQL, DATA_DIR keeps only
the signing key (and, for `python -m chat`, the receipt copies its visitor keeps: `receipt-copies/`), nothing that is
the record.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from storage import ENV_VAR, BackendError, database_url, is_database_url, redact
from storage import database_url as _database_url  # open_ledger's parameter has the same name

if TYPE_CHECKING:
    from receipts.stores import ReceiptBackend, ReceiptRows
    from retrieval.config import IndexConfig
    from storage.files.ledger.store import Ledger
    from storage.files.retrieval.db import Index
    from storage.pg.connect import Database
    from storage.pg.index import PgIndex
    from storage.pg.ledger import PgLedger

RECEIPT_COPIES = "receipt-copies"  # DATA_DIR/receipt-copies/<session>/<id>.json on PostgreSQL: a copy, not the record

Kind = Literal["files", "postgresql"]


@dataclass
class Stores:
    """The four stores of one deployment. `close` releases a PostgreSQL pool (nothing to do for files)."""

    kind: Kind
    data_dir: Path
    ledger: Ledger | PgLedger
    index: Index | PgIndex
    receipts: ReceiptBackend
    rows: ReceiptRows
    database: Database | None = None
    _closed: bool = field(default=False, repr=False)

    @property
    def where(self) -> str:
        """What a message names: the data folder, or the database (never its password)."""
        return str(self.data_dir) if self.database is None else self.database.shown

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.database is not None:
            close = getattr(self.receipts, "close", None)
            if close is not None:
                close()
            self.database.close()

    def __enter__(self) -> Stores:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def file_stores(data_dir: str | os.PathLike[str], *, index: Index | PgIndex | None = None, config: IndexConfig | None = None) -> Stores:
    """The embedded default: JSONL ledgers, index.sqlite and receipt files under `data_dir` (`index`: one already
    open over it, whose ledger is used)."""
    from storage.files.ledger.store import Ledger
    from storage.files.receipts import files
    from storage.files.receipts.file_backend import FileBackend, IndexRows
    from storage.files.retrieval.db import Index

    data = Path(data_dir)
    if index is None:
        ledger = Ledger(data)
        index = Index(data, ledger, config=config)
    elif not isinstance(index, Index):
        raise TypeError(f"file_stores: index must be the file backend's Index, not {type(index).__name__}")
    index.ensure_schema("receipts", files.RECEIPTS_DDL)
    return Stores("files", data, index.ledger, index, FileBackend(data), IndexRows(index))


def pg_stores(
    url: str,
    data_dir: str | os.PathLike[str],
    *,
    config: IndexConfig | None = None,
    pool_size: int = 8,
    timeout: float | None = None,
    receipt_copies: bool = False,
) -> Stores:
    """Everything in the PostgreSQL database at `url`; `data_dir` keeps the signing key.
    `timeout`: seconds to wait for the server before BackendError (storage.pg.connect's default when None).
    `receipt_copies`: also write each receipt this process issues to DATA_DIR/receipt-copies/<session>/<id>.json, for
    a command line that prints `receipt: <path>` to its one visitor. The app does not: a copy on one replica's disk is
    out of reach of a forget that runs on another (its visitors download receipts from the rows)."""
    if not is_database_url(url):
        raise BackendError(f"DATABASE_URL: must start with postgresql:// (got {redact(url)!r})")
    from storage.pg.connect import Database
    from storage.pg.index import PgIndex
    from storage.pg.ledger import PgLedger
    from storage.pg.receipts import PgReceipts

    data = Path(data_dir)
    db = Database(url, max_size=pool_size) if timeout is None else Database(url, max_size=pool_size, timeout=timeout)
    try:
        ledger = PgLedger(db, data)
        index = PgIndex(db, ledger, config=config)
        backend = PgReceipts(db, copies=data / RECEIPT_COPIES, write_copies=receipt_copies)
    except BaseException:
        db.close()
        raise
    return Stores("postgresql", data, ledger, index, backend, backend, db)


def open_stores(
    data_dir: str | os.PathLike[str],
    url: str | None = None,
    *,
    config: IndexConfig | None = None,
    environ: dict[str, str] | None = None,
    timeout: float | None = None,
    receipt_copies: bool = False,
) -> Stores:
    """PostgreSQL when `url` (or $DATABASE_URL) names it, else the files in `data_dir`. BackendError when the URL is
    not a PostgreSQL one or the server cannot be reached (the message names it without the password)."""
    chosen = url if url is not None else database_url(environ)
    if chosen:
        return pg_stores(chosen, data_dir, config=config, timeout=timeout, receipt_copies=receipt_copies)
    return file_stores(data_dir, config=config)



def open_ledger(data_dir: str | os.PathLike[str], database_url: str | None = None) -> Ledger | PgLedger:
    """The ledger to use: PgLedger when `database_url` (or $DATABASE_URL) names PostgreSQL, else Ledger(data_dir).

    BackendError when the URL is not a PostgreSQL one or the server cannot be reached.
    """
    url = database_url if database_url is not None else _database_url()
    if url:
        if not is_database_url(url):
            raise BackendError(f"{ENV_VAR}: must start with postgresql:// (got {redact(url)!r})")
        from storage.pg.ledger import PgLedger

        return PgLedger(url, Path(data_dir))
    from storage.files.ledger.store import Ledger

    return Ledger(data_dir)

__all__ = ["RECEIPT_COPIES", "Stores", "file_stores", "open_ledger", "open_stores", "pg_stores"]
