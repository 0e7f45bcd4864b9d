"""What a deployment keeps on its own disk whatever its backend, as the services may use it: the signing key in
DATA_DIR (or $RECEIPT_KEYS_DIR), private folders, and durable file writes (a bundle, a state file, a receipt copy).

This is part of storage's public face (beside storage.stores): the services and faces import these names from here,
never from storage.common, so that what they may touch on disk is written down in one place.
"""

from __future__ import annotations

from storage.common.fsmode import (
    fsync_dir,
    looser_than_private,
    open_private,
    private_dir,
    replace_durable,
    write_private,
)
from storage.common.keyfiles import keys_dir, legacy_keys_dir, load_existing, load_or_create, new_key_note
from storage.files.receipts.checkpoint_files import (
    issue as issue_file_checkpoint,  # `ledger import|repair` on DATA_DIR's files
)

__all__ = [
    "fsync_dir",
    "issue_file_checkpoint",
    "keys_dir",
    "legacy_keys_dir",
    "load_existing",
    "load_or_create",
    "looser_than_private",
    "new_key_note",
    "open_private",
    "private_dir",
    "replace_durable",
    "write_private",
]
