"""`DATABASE_URL=… python -m ledger migrate DATA_DIR`: a file-backed data directory's ledgers moved into PostgreSQL.

Per session (storage/pg/copy_in.py, which reads the file through the storage contract): the file's chain is verified from genesis first (a broken one is refused with its
break named, and nothing of that session is written); then what the database already holds of it
must be, byte for byte, a prefix of the file (a session already complete is checked equal and
skipped); the rest is copied in batches of BATCH_LINES lines, each its own transaction, so a
migration stopped anywhere continues where it stood when run again. The file is only read.

Receipts, checkpoints and Merkle trees are other stores: each registers a step in EXTRA_STEPS
(name, function(data_dir, database) -> one line saying what it did), run after the ledgers.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from storage.files.ledger.store import Ledger
from storage.pg.connect import Database
from storage.pg.copy_in import BATCH_LINES, Migrated, MigrationRefused, copy_session
from storage.pg.ledger import PgLedger

EXTRA_STEPS: list[tuple[str, Callable[[Path, Database], str]]] = []  # receipts, checkpoints, Merkle: registered by their stores
migrate_session = copy_session  # the name `ledger migrate` has always used (storage/pg/copy_in.py)


def migrate(data_dir: Path, pg: PgLedger, progress: Any = None, sessions: list[str] | None = None) -> list[Migrated]:
    """Every session of `data_dir` (or those named): one Migrated each; a refused one does not stop the others."""
    files = Ledger(data_dir, record_tails=False)
    out = []
    for session in sessions if sessions is not None else files.sessions():
        try:
            out.append(migrate_session(files, pg, session, progress))
        except MigrationRefused as exc:
            out.append(Migrated(session, "refused", pg.head(session)[0], 0, str(exc), exc.brk))
    return out


def run_extra_steps(data_dir: Path, database: Database) -> list[tuple[bool, str]]:
    """The other stores' migrations (EXTRA_STEPS): (done, one line) each; a step that raises is (False, why), the next still runs."""
    out = []
    for name, step in EXTRA_STEPS:
        try:
            out.append((True, f"{name}: {step(data_dir, database)}"))
        except Exception as exc:  # one line for the operator; the ledgers' results stand
            out.append((False, f"{name}: {exc or type(exc).__name__}"))
    return out


__all__ = ["BATCH_LINES", "EXTRA_STEPS", "Migrated", "MigrationRefused", "migrate", "migrate_session", "run_extra_steps"]
