"""The file backend's side of storage.api that is not one of its stores' own methods (I/O):
`FileSessionState` (a session's state kept beside the ledger: consent proposals, settings, suggestions), and
`drop_file_copy`, what a PostgreSQL deployment runs on the files a `ledger migrate` left in DATA_DIR
(storage.api.pg_stores wires it in: the two backends never import each other).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from ledger.event import validate_session_id


class FileSessionState:
    """storage.api.SessionState on files: the consent proposals in DATA_DIR/proposals/ (chat.consent.Store); the
    settings and suggestions live in the session's folder, which the ledger's delete_session removes whole."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    def __repr__(self) -> str:
        return f"FileSessionState({str(self.data_dir)!r})"

    def forget_session(self, session: str) -> None:
        for path in (self.data_dir / "proposals").glob(f"{session}.*"):  # waiting with the question (chat.consent)
            path.unlink(missing_ok=True)


def drop_file_copy(data: Path, session: str) -> tuple[str, ...]:
    """On PostgreSQL: delete what a file-backed past of the session left in DATA_DIR — `python -m ledger migrate`
    copies a data directory into the database (verifying every line and receipt it copies) and leaves the files: the
    session's folder (events.jsonl, receipts, `.cites` records, import records), its Merkle tree and audit cache,
    and its rows in index.sqlite (purged: the WAL emptied, the freed pages zeroed), with any index copies moved aside.
    The database is the record; a forget there (and a session's deletion) must leave no older copy of the words
    in DATA_DIR. Idempotent (recover runs it again); returns the names of index copies overwritten and removed."""
    from ledger import Ledger
    from ledger.scrub import scrub_prefixed
    from receipts import files
    from receipts.audit import forget_cache
    from receipts.file_backend import IndexRows
    from retrieval import INDEX_FILE, Index
    from retrieval.db import INDEX_COPY_PREFIX
    from retrieval.model import PurgeIncomplete

    validate_session_id(session)
    for path in (data / "sessions" / session, data / "merkle" / session):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        elif path.is_symlink():
            path.unlink(missing_ok=True)
    (data / "merkle" / f"{session}.lock").unlink(missing_ok=True)
    forget_cache(data, session)
    if not (data / INDEX_FILE).is_file():
        return ()
    scrubbed = scrub_prefixed(data, INDEX_COPY_PREFIX)  # before the index opens (it may move one aside itself)
    idx = Index(data, Ledger(data))
    try:
        idx.ensure_schema("receipts", files.RECEIPTS_DDL)
        IndexRows(idx).forget_rows(session)
        for n in range(2):  # as control.steps.purged: a reader that kept SQLite from emptying its WAL is waited out
            try:
                idx.purge_session(session)
                break
            except PurgeIncomplete:
                if n == 1:
                    raise
                time.sleep(0.05)
    finally:
        idx.close()
    return scrubbed


__all__ = ["FileSessionState", "drop_file_copy"]
