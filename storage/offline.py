"""Checking what was signed against a data directory or a bundle's staged folder, read-only: the receipt and
certificate verifiers with their ledger audit, checkpoint proofs, and the trust files a person names.

Part of storage's public face (beside storage.stores and storage.local): a receipt's ledger checks read a
ledger laid out as files — DATA_DIR's own, a private copy of PostgreSQL's, or a bundle staged into a folder —
so the services and faces that verify take these names from here, never from storage.files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from storage.files.receipts.api import data_dir_key, load_trust, verify_bytes
from storage.files.receipts.audit import Auditor, LedgerAt, forget_cache
from storage.files.receipts.certificate_io import _leftovers as leftovers
from storage.files.receipts.certificate_io import _receipt_problems as receipt_problems
from storage.files.receipts.certificate_io import _view as certificate_view
from storage.files.receipts.certificate_io import verify_certificate_bytes
from storage.files.receipts.checkpoint_files import checkpoint_path, latest, prove_since
from storage.files.receipts.ledger_copy import CACHE, LineSource, owned_folder

if TYPE_CHECKING:
    from receipts.keys import PublicKey
    from receipts.verify import Report
    from storage.contract import BundleImportsFaces


def verify_imported_receipt(imports: BundleImportsFaces, raw: bytes, local: str, keys: Sequence[PublicKey]) -> Report:
    """Receipt bytes checked against the imported session `local` under `keys` (bundle.importer): against its folder
    on files, from its stored lines on PostgreSQL (BundleImports.audited says which)."""
    with imports.audited(local) as (data_dir, source):
        return verify_bytes(raw, trusted=keys, data_dir=data_dir, source=cast("LineSource | None", source))

__all__ = [
    "CACHE",
    "Auditor",
    "LedgerAt",
    "certificate_view",
    "checkpoint_path",
    "data_dir_key",
    "forget_cache",
    "latest",
    "leftovers",
    "load_trust",
    "owned_folder",
    "prove_since",
    "receipt_problems",
    "verify_bytes",
    "verify_certificate_bytes",
    "verify_imported_receipt",
]
