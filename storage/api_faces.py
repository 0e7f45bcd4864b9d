"""The storage contract's methods the faces and services needed to stop asking which backend they have (issue 29:
no `kind`, no cast to a backend class, no `storage.pg` import in chat/, bundle/, webui/, app.py).

To be merged into storage/api.py (LedgerStore, SearchIndex, ReceiptStore, SessionState): each fragment below lists
the methods added, with signature and meaning; both backends implement every one of them, the file side on the
file classes (ledger.store.Ledger, retrieval.db.Index, receipts.file_backend.FileBackend / IndexRows), the
PostgreSQL side in storage/pg/*. Until then `LedgerStore` and `SearchIndex` here are the union of the two
backends' classes (as `Stores.ledger` / `Stores.index` are typed), so the upper layers name no backend class.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeAlias

if TYPE_CHECKING:
    from ledger import Ledger
    from receipts.keys import PublicKey
    from receipts.stores import ProposalStore
    from receipts.verify import Report
    from retrieval import Index
    from storage.pg.index import PgIndex
    from storage.pg.ledger import PgLedger

    LedgerStore: TypeAlias = Ledger | PgLedger  # storage.api.LedgerStore once merged
    SearchIndex: TypeAlias = Index | PgIndex  # storage.api.SearchIndex once merged


class LedgerFaces(Protocol):
    """Added to LedgerStore (ledger.store.Ledger; storage.pg.ledger.PgLedger)."""

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

    def export_lines(self, session: str, count: int) -> AbstractContextManager[tuple[int, Sequence[bytes] | object]]:
        """(bytes, the first `count` ledger lines as stored, in pieces) for a bundle (bundle.export): files read
        the events file itself, PostgreSQL one snapshot of the rows. See bundle.export._ledger_chunks."""
        ...

    def control_state(self, session: str) -> object:
        """The session's control state now (control.revocation.current on either backend)."""
        ...

    def imports(self) -> BundleImports:
        """The imported sessions of this deployment (bundle.importer): DATA_DIR/imported/<LOCAL>/ on files, one
        schema each on PostgreSQL (storage.pg.imports)."""
        ...


class ReceiptRowsFaces(Protocol):
    """Added to ReceiptStore's rows (receipts.stores.ReceiptRows: receipts.file_backend.IndexRows;
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
    """Added to ReceiptStore's backend (receipts.stores.ReceiptBackend: receipts.file_backend.FileBackend;
    storage.pg.receipts.PgReceipts). Belongs with SessionState (consent proposals) once that is merged."""

    def proposals(self, ttl: int) -> ProposalStore:
        """Where consent proposals wait (chat.consent.proposal_store): receipts.file_backend.FileProposals
        (DATA_DIR/proposals/, was chat.consent.Store) or storage.pg.consent.PgProposals."""
        ...


class BundleImports(Protocol):
    """The imported sessions of one deployment (bundle.importer), reached as `stores.ledger.imports()`, or by
    `imports_at(data_dir)` before any store is open. Files: ledger.store.FileImports; PostgreSQL:
    storage.pg.imports.PgImports (was bundle/pg_import.py)."""

    def origins(self) -> list[object]:
        """Every imported session (bundle.importer.Origin), by local id."""
        ...

    def keys(self, local: str) -> list[PublicKey]:
        """The keys its bundle carried, trusted for it."""
        ...

    def verify_receipt(self, raw: bytes, local: str, keys: Sequence[PublicKey]) -> Report:
        """A receipt checked against the imported session `local` under `keys`."""
        ...


def proposals_at(data_dir: str | os.PathLike[str], ttl: int) -> ProposalStore:
    """The file backend's proposal store of `data_dir`, with nothing else opened or made: for a command line that
    checks a token before it opens the stores (chat.__main__, no DATABASE_URL)."""
    from receipts.file_backend import FileBackend

    return FileBackend(Path(data_dir)).proposals(ttl)


__all__ = ["BundleImports", "LedgerFaces", "ReceiptBackendFaces", "ReceiptRowsFaces", "proposals_at"]
