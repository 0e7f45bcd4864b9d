"""The storage contract's methods the faces and services needed to stop asking which backend they have (issue 29:
no `kind`, no cast to a backend class, no `storage.pg` import in chat/, bundle/, webui/, app.py).

The Protocol fragments here (LedgerFaces, ReceiptRowsFaces, ReceiptBackendFaces, BundleImportsFaces) are bases of
storage/api.py's LedgerStore, ReceiptRowStore and ReceiptStore; both backends implement every method, the file side
in storage/files/, the PostgreSQL side in storage/pg/. The functions below open what a caller given a folder and no
Stores needs (imports_at, ledger_and_receipts_at, reader_ledger, proposals_at).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeAlias

if TYPE_CHECKING:
    from receipts.keys import PublicKey
    from receipts.stores import Origin, ProposalStore
    from receipts.verify import Report
    from storage.files.ledger.store import Ledger
    from storage.files.receipts.file_backend import FileBackend, FileImports
    from storage.pg.imports import PgImports
    from storage.stores import Stores
    BundleImports: TypeAlias = FileImports | PgImports  # the BundleImportsFaces Protocol once merged


class LedgerFaces(Protocol):
    """Added to LedgerStore (storage.files.ledger.store.Ledger; storage.pg.ledger.PgLedger)."""

    def last_written(self, session: str) -> float | None:
        """When the session was last written (Unix time; files: its events file's mtime, or its folder's), or None
        when there is no such session. (PgLedger had it; chat.engine.Engine.last_written asks it on both.)"""
        ...

    def idle_sessions(self, before: float) -> list[str]:
        """The sessions last written before `before` (webui.retention: RETENTION_HOURS). Files: every folder under
        DATA_DIR/sessions, also one with no events file yet."""
        ...

    def kept_elsewhere(self) -> str | None:
        """Where the record is kept when DATA_DIR's files are not it ("PostgreSQL at <shown name>"), else None: the
        app's start-up line, and whether an auditor reads DATA_DIR's files or through the stores (webui.service)."""
        ...

    def stored_lines(self, session: str, count: int) -> AbstractContextManager[tuple[int, Iterator[bytes]]]:
        """(bytes, the first `count` lines exactly as stored, in pieces of about 1 MiB), held open while read: a
        bundle's ledger member (bundle.export). Files: the events file (a torn tail left out); PostgreSQL: one
        snapshot of the rows. ledger.verify.StoredLinesChanged (a ValueError) when fewer lines are there."""
        ...

    def imports(self) -> BundleImportsFaces:
        """The imported sessions of this deployment (bundle.importer): DATA_DIR/imported/<LOCAL>/ on files, one
        schema each on PostgreSQL (storage.pg.imports)."""
        ...


class ReceiptRowsFaces(Protocol):
    """Added to ReceiptStore's rows (receipts.stores.ReceiptRows: storage.files.receipts.file_backend.IndexRows;
    storage.pg.receipts.PgReceipts)."""

    def derived_generation(self) -> int | None:
        """The derived tables' generation, which changes when they start empty again (files: the index file opened
        anew); None when the rows are the record (PostgreSQL). chat.citing refills per generation."""
        ...

    def restore_derived(self) -> int | None:
        """Refill the receipts / receipt_cites rows from the receipt files when they were never filled (files; was
        chat.engine.Engine._restore_receipt_rows and its raw SQL); the generation at which they are whole, None when
        the rows are the record (PostgreSQL: nothing to do)."""
        ...


class ReceiptBackendFaces(Protocol):
    """Added to ReceiptStore's backend (receipts.stores.ReceiptBackend: storage.files.receipts.file_backend.FileBackend;
    storage.pg.receipts.PgReceipts). Belongs with SessionState (consent proposals) once that is merged."""

    def stored_receipts(self, session: str) -> list[tuple[str, Callable[[], bytes]]]:
        """(`<receipt id>.json`, read its exact bytes) of every stored receipt of the session, by name: a bundle's
        receipt members (bundle.export). PostgreSQL: receipts.stores.ReceiptUnreadable when a read fails."""
        ...

    def proposals(self, ttl: int) -> ProposalStore:
        """Where consent proposals wait (chat.consent.proposal_store): storage.files.receipts.file_backend.FileProposals
        (DATA_DIR/proposals/, was chat.consent.Store) or storage.pg.consent.PgProposals."""
        ...


class BundleImportsFaces(Protocol):
    """The imported sessions of one deployment (bundle.importer), reached as `stores.ledger.imports()`, or by
    `imports_at(data_dir)` before any store is open. Files: storage.files.receipts.file_backend.FileImports (DATA_DIR/imported/
    <LOCAL>/, was bundle.importer's); PostgreSQL: storage.pg.imports.PgImports (a schema each, was
    bundle/pg_import.py). A refusal is receipts.stores.ImportFailed, which bundle.importer says as a BundleError.
    `Origin` (was bundle.importer's) and `IMPORTED` are in receipts.stores, where both backends reach them."""

    def origins(self) -> list[Origin]:
        """Every imported session, by local id."""
        ...

    def open(self, local: str) -> AbstractContextManager[Stores]:
        """The imported session's stores (ledger, index, receipts, checkpoint), closed after; ImportFailed when there
        is no such import (PostgreSQL)."""
        ...

    def keys(self, local: str) -> list[PublicKey]:
        """The keys its bundle carried, trusted for it."""
        ...

    def certificates(self, local: str) -> list[tuple[str, bytes]]:
        """(file name, bytes) of the erasure certificates its bundle carried."""
        ...

    def verify_receipt(self, raw: bytes, local: str, keys: Sequence[PublicKey]) -> Report:
        """A receipt checked against the imported session `local` under `keys` (files: its folder; PostgreSQL: the
        schema's stored lines)."""
        ...

    def same_ledger(self, session: str, signer: str, events: int, chain_head: str) -> Origin | None:
        """The import of the same ledger, if there is one (an import again is a duplicate)."""
        ...

    def taken(self, local: str) -> bool:
        """An import or a session already has the id `local`."""
        ...

    def sweep(self) -> list[str]:
        """Remove what crashed imports left (PostgreSQL: their schemas, once stale); what was removed."""
        ...

    def add(self, folder: Path, origin: Origin, keys: Sequence[PublicKey]) -> tuple[Origin, bool, int]:
        """The verified bundle extracted in `folder` (a staging folder under DATA_DIR/imported/) becomes the import
        `origin` (local id checked free): (the origin recorded, duplicate — another import of the same ledger won a
        race —, events indexed)."""
        ...


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
    """A reader's file ledger over `folder` (it writes no tail record): how another backend reads a staged bundle's
    ledger, through the contract rather than by importing the file backend (storage.pg.imports). Close it after."""
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
