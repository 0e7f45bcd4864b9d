"""The storage contract: what the services (chat, control, bundle, the web app) may ask of a deployment's stores,
and `open_stores`, the one place that names a backend.

`Stores` holds one deployment's four stores — a `LedgerStore`, a `SearchIndex`, a `ReceiptStore` (with the producer's
trees and checkpoints) and its `ReceiptRowStore` — plus its `SessionState` (what a session keeps beside its ledger).
Each is a Protocol implemented by both backends: the files in DATA_DIR (ledger.Ledger, retrieval.Index,
receipts.file_backend.FileBackend / IndexRows, storage.file_state) and PostgreSQL (storage.pg.*). An operation
that differs between them (deleting a session, when it was last written, VACUUM, the erasure journal, quarantined
tails, index copies moved aside) is a method here, so the code above never asks which backend it has.

The Protocols are grouped per store; each method carries a comment saying what it promises. On PostgreSQL DATA_DIR
keeps only the signing key and the erasure certificates (and, for `python -m chat`, the receipt copies its visitor
keeps: `receipt-copies/`), nothing that is the record.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from storage import ENV_VAR, BackendError, database_url, is_database_url, redact
from storage import database_url as _database_url  # open_ledger's parameter has the same name
from storage.contract import (
    RECEIPT_COPIES,
    Kind,
    LedgerStore,
    LineMark,
    ReceiptRowStore,
    ReceiptStore,
    SearchIndex,
    SemanticUnavailable,
    SessionState,
    SettingsError,
    SettingsStore,
    Stores,
    Suggestion,
    SuggestionStore,
    SystemLines,
)

if TYPE_CHECKING:
    from retrieval.config import IndexConfig
    from retrieval.semantic import TextEmbedder
    from storage.files.retrieval.db import Index


def file_session_state(data_dir: str | os.PathLike[str]) -> SessionState:
    """The session state kept in a data directory (for a caller that names a folder, not a Stores)."""
    from storage.files.state import FileSessionState

    return FileSessionState(Path(data_dir))


def file_stores(
    data_dir: str | os.PathLike[str],
    *,
    index: SearchIndex | None = None,
    config: IndexConfig | None = None,
    ledger: LedgerStore | None = None,
    lazy: bool = False,
) -> Stores:
    """The embedded default: JSONL ledgers, index.sqlite and receipt files under `data_dir` (`index`: one already
    open over it, whose ledger is used; `ledger`: a file ledger already open; `lazy`: the index opened on first use,
    over that ledger, and closed by `close` / `close_index`)."""
    from storage.files.ledger.store import Ledger
    from storage.files.receipts import files
    from storage.files.receipts.file_backend import FileBackend, IndexRows
    from storage.files.retrieval.db import Index
    from storage.files.state import FileSessionState

    data = Path(data_dir)
    if index is not None and not isinstance(index, Index):
        raise TypeError(f"file_stores: index must be the file backend's Index, not {type(index).__name__}")
    if ledger is not None and not isinstance(ledger, Ledger):
        raise ValueError("a PostgreSQL ledger comes with its stores: pass stores= (storage.stores.open_stores)")
    led = index.ledger if index is not None else (ledger if ledger is not None else Ledger(data))

    def rows_over(idx: Index) -> IndexRows:
        idx.ensure_schema("receipts", files.RECEIPTS_DDL)  # an index no engine opened since receipt_cites was added
        return IndexRows(idx)

    def open_index() -> tuple[SearchIndex, ReceiptRowStore]:
        idx = Index(data, led, config=config)
        return idx, rows_over(idx)

    state = FileSessionState(data)
    if index is None and lazy:
        return Stores("files", data, led, None, FileBackend(data), None, state=state, open_index=open_index)
    if index is None:
        index = Index(data, led, config=config)
    return Stores("files", data, index.ledger, index, FileBackend(data), rows_over(index), state=state)


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
    from functools import partial

    from storage.files.state import drop_file_copy
    from storage.pg.connect import Database
    from storage.pg.consent import PgSessionState
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
    # a `ledger migrate` leaves the files it copied: a forget or deletion here drops the session's (storage.file_state)
    return Stores(
        "postgresql", data, ledger, index, backend, backend, db, PgSessionState(db, data), partial(drop_file_copy, data)
    )


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


__all__ = [
    "SemanticUnavailable",
    "semantic_installed",
    "semantic_model",
    "RECEIPT_COPIES",
    "Kind",
    "SettingsError",
    "SettingsStore",
    "Suggestion",
    "SuggestionStore",
    "file_ledger",
    "file_receipts",
    "file_session_state",
    "open_ledger",
    "LedgerStore",
    "LineMark",
    "ReceiptRowStore",
    "ReceiptStore",
    "SearchIndex",
    "SessionState",
    "Stores",
    "file_stores",
    "open_stores",
    "pg_stores",
    "SystemLines",
]


def open_ledger(data_dir: str | os.PathLike[str], database_url: str | None = None) -> LedgerStore:
    """The ledger alone: PostgreSQL's when `database_url` (or $DATABASE_URL) names it, else the files in `data_dir`.

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


def file_ledger(data_dir: str | os.PathLike[str]) -> LedgerStore:
    """The ledger of the files in `data_dir` alone (a command given neither stores nor a ledger)."""
    from storage.files.ledger.store import Ledger

    return Ledger(data_dir)


def file_receipts(data_dir: str | os.PathLike[str]) -> ReceiptStore:
    """The receipt files in `data_dir` alone (a step given no receipt backend)."""
    from storage.files.receipts.file_backend import FileBackend

    return FileBackend(data_dir)


# -- the semantic extra (issue 35): its model, loaded from the installed wheel with its sha256 checked -----------------
def semantic_model(*, threads: int = 1) -> TextEmbedder:
    """The semantic extra's model for `stores.index.use_semantic(...)`; SemanticUnavailable (one line) when it is not
    installed or a file is not the pinned one (storage/common/semantic.py). Nothing is downloaded. `threads`: 1 for
    the app (a query at a time), 0 for bulk embedding (import, rebuild: one a core)."""
    from storage.common import semantic

    return semantic.load(threads=threads)


def semantic_installed() -> bool:
    """Whether the semantic extra's packages are installed (nothing imported or loaded)."""
    from storage.common import semantic

    return semantic.installed()


