"""One deployment's stores, opened together: moved to storage.api (the contract); the names stay importable here."""

from __future__ import annotations

from storage.api import RECEIPT_COPIES, Kind, Stores, file_stores, open_ledger, open_stores, pg_stores

__all__ = ["RECEIPT_COPIES", "Kind", "Stores", "file_stores", "open_ledger", "open_stores", "pg_stores"]
