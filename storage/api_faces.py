"""The storage contract's methods the faces and services needed to stop asking which backend they have (issue 29:
no `kind`, no cast to a backend class, no `storage.pg` import in chat/, bundle/, webui/, app.py).

The Protocol fragments here (LedgerFaces, ReceiptRowsFaces, ReceiptBackendFaces, BundleImportsFaces) are bases of
storage/api.py's LedgerStore, ReceiptRowStore and ReceiptStore; both backends implement every method, the file side
in storage/files/, the PostgreSQL side in storage/pg/. The functions below open what a caller given a folder and no
Stores needs (imports_at, ledger_and_receipts_at, reader_ledger, proposals_at).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from receipts.stores import ProposalStore
    from storage.files.ledger.store import Ledger
    from storage.files.receipts.file_backend import FileBackend, FileImports
    from storage.pg.imports import PgImports
    BundleImports: TypeAlias = FileImports | PgImports  # the BundleImportsFaces Protocol once merged


from storage.contract import BundleImportsFaces, LedgerFaces, ReceiptBackendFaces, ReceiptRowsFaces


def imports_at(data_dir: str | os.PathLike[str]) -> BundleImports:
    """The file backend's imports of `data_dir`, with nothing else opened or made (bundle's default, no `stores`)."""
    from storage.files.receipts.file_backend import FileImports

    return FileImports(data_dir)


def ledger_and_receipts_at(data_dir: str | os.PathLike[str]) -> tuple[Ledger, FileBackend]:
    """The file ledger and receipt files of `data_dir`, nothing else opened (no index): bundle's default, no `stores`.
    Close the ledger after."""
    from storage.files.ledger.store import Ledger
    from storage.files.receipts.file_backend import FileBackend

    return Ledger(data_dir), FileBackend(data_dir)


def reader_ledger(folder: str | os.PathLike[str]) -> Ledger:
    """A reader's file ledger over `folder` (it writes no tail record): a staged bundle's ledger, which bundle.importer
    hands to BundleImports.add (PostgreSQL copies it through the contract: storage.pg.copy_in). Close it after."""
    from storage.files.ledger.store import Ledger

    return Ledger(folder, record_tails=False)


def proposals_at(data_dir: str | os.PathLike[str], ttl: int) -> ProposalStore:
    """The file backend's proposal store of `data_dir`, with nothing else opened or made: for a command line that
    checks a token before it opens the stores (cli.prog_chat, no DATABASE_URL)."""
    from storage.files.receipts.file_backend import FileBackend

    return FileBackend(Path(data_dir)).proposals(ttl)


__all__ = [
    "BundleImportsFaces",
    "LedgerFaces",
    "ReceiptBackendFaces",
    "ReceiptRowsFaces",
    "imports_at",
    "ledger_and_receipts_at",
    "proposals_at",
    "reader_ledger",
]
