"""Maintenance of a deployment's stores: what the `ledger`, `search` (`python -m retrieval`) and `db` commands do
that the services never need — import a JSONL file, list, verify and repair sessions, rebuild the search index,
export a session, migrate a data directory into PostgreSQL.

Part of storage's public face (beside storage.stores, storage.local, storage.offline): the command lines take these
names from here and never from storage.files, storage.pg or storage.common. Where the two backends differ, the
function below takes the ledger (or the Stores) a command opened and dispatches inside storage, so that the command
line never asks which backend it has. storage.pg is imported only when a PostgreSQL ledger is handed in (or a
database opened), so that a command on files pays nothing for it at start-up.

Two kinds of names:

- contract-shaped ones, on either backend: `stage_import`, `previous_import`, `record_import`, `signing`,
  `session_bytes`, `diagnose`, `repair`, `list_sessions`, `events_to_index`, `prove_since`;
- the data directory's own (the commands that are given DATA_DIR and no database): `file_ledger`, `file_index`,
  `has_file_index`, `index_totals`, `file_index_bytes`, `INDEX_FILE`; and the database's own (`database_ledger`,
  `migrate_extras`) for `ledger export|migrate`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from ledger import importer
from retrieval.sql import INDEX_FILE
from storage.files.ledger.store import Ledger

if TYPE_CHECKING:
    from ledger.event import Event
    from ledger.imports import ImportRecord
    from ledger.listing import SessionSummary
    from ledger.repair import Cut, Diagnosis
    from receipts.checkpoints import SinceReport
    from receipts.keys import PublicKey, SigningKey
    from retrieval.config import IndexConfig
    from storage.files.retrieval.db import Index  # imported where used: it loads sqlite_utils (and pandas), ~0.5 s
    from storage.pg.index import PgIndex
    from storage.pg.ledger import PgLedger
    from storage.stores import Stores

    LedgerStore: TypeAlias = Ledger | PgLedger  # either backend's ledger (storage.api_faces.LedgerStore)
    SearchIndex: TypeAlias = Index | PgIndex  # either backend's search index

FileLedger: TypeAlias = Ledger  # the ledger in DATA_DIR's files (file_ledger)
FileIndex: TypeAlias = "Index"  # DATA_DIR's index.sqlite, or a throwaway one (file_index)
DatabaseLedger: TypeAlias = "PgLedger"  # a PostgreSQL database's ledger (database_ledger)

Signer: TypeAlias = Callable[["SigningKey"], dict[str, Any]]


# --- the data directory's own -------------------------------------------------------------------------------------


def file_ledger(data_dir: str | os.PathLike[str], *, record_tails: bool = True) -> Ledger:
    """The ledger kept as files in `data_dir` (`record_tails=False`: a reader that writes no tail record back)."""
    return Ledger(data_dir, record_tails=record_tails)


def file_index(folder: str | os.PathLike[str], ledger: Ledger, *, config: IndexConfig | None = None) -> Index:
    """The SQLite search index in `folder` (made there when missing) over `ledger`; close it after."""
    from storage.files.retrieval.db import Index

    return Index(folder, ledger, config=config)


def has_file_index(data_dir: str | os.PathLike[str]) -> bool:
    """Whether `data_dir` holds an index (INDEX_FILE, even a dangling link): a reader never creates one."""
    return os.path.lexists(Path(data_dir) / INDEX_FILE)


def can_keep_file_index(data_dir: str | os.PathLike[str]) -> bool:
    """Whether a search may make DATA_DIR's index and keep it: this process can write the directory (and the index
    file, when one is there). Only a data directory it cannot write is searched through a temporary index."""
    data = Path(data_dir)
    index = data / INDEX_FILE
    return _writable(data) and (not os.path.lexists(index) or _writable(index))


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK)


def index_totals(index: Index) -> tuple[int, int]:
    """(sessions, events) the file index has indexed (its watermarks)."""
    with index.read() as conn:
        sessions, events = conn.execute("SELECT count(*), coalesce(sum(last_seq + 1), 0) FROM watermarks").fetchone()
    return int(sessions), int(events)


def file_index_bytes(data_dir: str | os.PathLike[str]) -> int:
    """The bytes of `data_dir`'s index files (the database and its journal; corrupt copies set aside left out)."""
    return sum(p.stat().st_size for p in Path(data_dir).glob("index.sqlite*") if "corrupt" not in p.name)


# --- either backend -----------------------------------------------------------------------------------------------


def ledger_of(stores: Stores) -> LedgerStore:
    """The stores' ledger as the maintenance functions here take it (either backend's own class)."""
    return cast("LedgerStore", stores.ledger)


def session_bytes(ledger: LedgerStore, sessions: Iterable[str]) -> int:
    """The bytes the named sessions' ledgers hold (what a verifying progress bar counts); on files a log that
    cannot be read counts nothing."""
    if isinstance(ledger, Ledger):
        total = 0
        for name in sessions:
            try:
                total += ledger.log_path(name).stat().st_size
            except OSError:
                pass
        return total
    return sum(ledger.size_bytes(name) for name in sessions)


def list_sessions(ledger: LedgerStore, progress: Any = None) -> list[SessionSummary]:
    """One summary per session (events, last activity, verified from genesis or its first break); `progress`
    (tqdm-like) is updated with the bytes verified."""
    if isinstance(ledger, Ledger):
        from storage.files.ledger.listing_files import list_sessions as list_files

        return list_files(ledger, progress)
    from ledger.listing import SessionSummary, last_ts

    rows = []
    for name in ledger.sessions():
        report = ledger.verify(name, progress=progress)
        size, last = ledger.last_line(name)
        rows.append(SessionSummary(name, size, last_ts(last), report))
    return rows


def stage_import(
    ledger: LedgerStore, session: str, lines: Iterable[bytes], progress: Any = None, *, allow_system: bool = False, content: bool = False
) -> importer.Staged:
    """Validate and encode every line of an import before anything is written (ledger.importer.stage), from the
    session's tail as the ledger holds it now; importer.commit(ledger, staged) appends them."""
    if isinstance(ledger, Ledger):
        return importer.stage(ledger, session, lines, progress, allow_system=allow_system, content=content)
    return ledger.stage_import(session, lines, progress, allow_system=allow_system, content=content)


def previous_import(ledger: LedgerStore, session: str, digest: str) -> ImportRecord | None:
    """The earlier import of the file whose sha256 is `digest` into `session`, if the session still holds it."""
    if isinstance(ledger, Ledger):
        from storage.files.ledger.import_records import previous_import as previous_file_import

        return previous_file_import(ledger, session, digest)
    return ledger.previous_import(session, digest)


def record_import(ledger: LedgerStore, session: str, digest: str, events: Sequence[Event], file: str) -> ImportRecord:
    """Remember that `file` (sha256 `digest`) was imported into `session` as `events` (previous_import finds it)."""
    if isinstance(ledger, Ledger):
        from storage.files.ledger.import_records import record_import as record_file_import

        return record_file_import(ledger, session, digest, events, file)
    return ledger.record_import(session, digest, events, file)


@contextmanager
def signing(ledger: LedgerStore, session: str) -> Iterator[Signer]:
    """Hold the session's turn lock (the engine's: no turn signs in between) and yield `sign(key)`, which signs a
    checkpoint over the session as it is now, keeps it as the latest and returns it. On files the checkpoint and
    the producer's tree are kept in the ledger's data directory; on PostgreSQL in the database."""
    if isinstance(ledger, Ledger):
        from storage.files.receipts import files
        from storage.files.receipts.checkpoint_files import issue as issue_file

        data = ledger.data_dir
        with files.session_turn_lock(data, session):
            yield lambda key: issue_file(data, ledger, session, key)
        return
    from storage.common.checkpoint_issue import issue
    from storage.pg.receipts import PgReceipts

    with PgReceipts(ledger.db) as backend, backend.turn_lock(session):
        yield lambda key: issue(backend, ledger, session, key)


def diagnose(ledger: LedgerStore, session: str, progress: Any = None) -> Diagnosis:
    """A session's first break and what a repair would cut (ledger.repair.Diagnosis); reads only."""
    if isinstance(ledger, Ledger):
        from storage.files.ledger.repair_files import diagnose as diagnose_files

        return diagnose_files(ledger, session, progress)
    from storage.pg import repair as pg_repair

    return pg_repair.diagnose(ledger, session, progress)


def repair(
    where: Stores | Ledger, session: str, seq: int, key: SigningKey | None, unsigned: str, *, copy_dir: Path | None = None
) -> tuple[Cut, list[str]]:
    """Cut the session's ledger from `seq` on (the tail kept, never deleted; a system event records the cut) under
    the session's turn lock, then refresh what derives from the ledger; (the cut, one phrase per refresh).

    `where`: the Stores a command opened, or DATA_DIR's file ledger alone (nothing else opened: the index there is
    re-indexed only when it exists). `key` signs a checkpoint of what is left (`unsigned` says why not when None).
    On PostgreSQL the cut rows go to the database's ledger_cuts, with a copy in `copy_dir` when given.
    RepairRefused (nothing changed) when the cut is not one the ledger allows."""
    if not isinstance(where, Ledger):
        if not isinstance(where.ledger, Ledger):
            from storage.pg import repair as pg_repair

            return pg_repair.repair(where, session, seq, key, unsigned, copy_dir=copy_dir)
        where = where.ledger
    return _repair_files(where, session, seq, key, unsigned)


def _repair_files(ledger: Ledger, session: str, seq: int, key: SigningKey | None, unsigned: str) -> tuple[Cut, list[str]]:
    """repair on files: cut, drop the Merkle tree, sign, drop the audit cache, re-index when DATA_DIR has an index."""
    from storage.files.ledger.repair_files import truncate_at
    from storage.files.receipts.audit import forget_cache

    data = ledger.data_dir
    refreshed = []
    with signing(ledger, session) as sign:
        cut = truncate_at(ledger, session, seq)
        shutil.rmtree(data / "merkle" / session, ignore_errors=True)  # the producer's tree: rebuilt from the ledger
        refreshed.append("dropped the Merkle tree")
        if key is None:
            refreshed.append(unsigned)
        else:
            try:
                cp = sign(key)
                refreshed.append(f"signed a checkpoint of {cp['body']['tree_size']} events by {cp['key_id']}")
            except (OSError, ValueError) as exc:
                refreshed.append(f"the checkpoint could not be signed ({exc})")
    forget_cache(data, session)  # this verifier's audit cache: the next check re-walks
    refreshed.append("dropped the audit cache")
    if (data / INDEX_FILE).exists():  # the index is derived: re-indexed from the ledger (never created here)
        from storage.files.retrieval.db import Index

        index = Index(data, ledger)
        try:
            index.index_session(session)
        finally:
            index.close()
        refreshed.append("re-indexed the session")
    return cut, refreshed


def index_imported(
    ledger: LedgerStore, session: str, events: Sequence[Event], progress: Callable[[int], object] | None = None
) -> list[str]:
    """Bring `session`'s search index up to its ledger right after an import, so that no search has to: on files
    DATA_DIR's index.sqlite (made when missing), on PostgreSQL the database's. `events` (what importer.commit
    returned) are indexed as they are when they end the ledger, without reading it again; `progress(n)` after each
    chunk of n events. The index's warnings (as index_session's); an index that cannot be written is one more
    warning, never an error: the import stands (the index is derived data) and the first search indexes."""
    import sqlite3

    from retrieval.model import IndexUnavailable
    from storage import BackendError

    tick: Callable[[str, int], None] | None = None
    if progress is not None:
        step = progress

        def tick(_session: str, n: int) -> None:
            step(n)

    try:
        if isinstance(ledger, Ledger):
            index = file_index(ledger.data_dir, ledger)
            try:
                return index.index_session(session, events, progress=tick)
            finally:
                index.close()
        import psycopg

        from storage.pg.index import PgIndex

        try:
            return PgIndex(ledger.db, ledger).index_session(session, events, progress=tick)
        except psycopg.Error as exc:
            raise BackendError(str(exc)) from None
    except (IndexUnavailable, BackendError, OSError, sqlite3.Error) as exc:
        return [f"session {session}: imported but not indexed ({exc}); the first search indexes it"]


def embed_imported(ledger: LedgerStore, session: str, embedder: Any, progress: Callable[[int], object] | None = None) -> int:
    """The semantic extra's vectors for an imported session, right after index_imported (in batches, newest first;
    `progress(n)` after each batch of n): how many events were embedded. The import stands whatever happens here
    (vectors are derived data): a model or index that fails raises, and the caller says so in one line."""
    tick: Callable[[int], None] | None = None
    if progress is not None:
        step = progress

        def tick(n: int) -> None:
            step(n)

    if isinstance(ledger, Ledger):
        index = file_index(ledger.data_dir, ledger)
        try:
            index.use_semantic(embedder)
            return index.embed_pending(session, progress=tick)
        finally:
            index.close()
    from storage.pg.index import PgIndex

    pg = PgIndex(ledger.db, ledger)
    pg.use_semantic(embedder)
    return pg.embed_pending(session, progress=tick)


def events_to_index(index: SearchIndex, session: str) -> int | None:
    """How many of the session's events the index has still to index before a search (for a progress bar); None
    when the index does not say (PostgreSQL's)."""
    from storage.files.retrieval.db import Index

    if not isinstance(index, Index):
        return None
    count = index.ledger.head(session)[0]
    with index.read() as conn:
        row = conn.execute("SELECT last_seq FROM watermarks WHERE session = ?", (session,)).fetchone()
    return int(count - (int(row[0]) + 1 if row is not None else 0))


def prove_since(stores: Stores, session: str, kept: Mapping[str, Any], trusted: Sequence[PublicKey], *, full: bool = False) -> SinceReport:
    """storage.offline.prove_since over the stores' own ledger and latest checkpoint: on PostgreSQL the database's
    rows (audited from a private copy) and the checkpoint it keeps; `stores.data_dir` gives the own key."""
    from storage.files.receipts.checkpoint_files import prove_since as prove

    ledger = stores.ledger
    if isinstance(ledger, Ledger):
        return prove(stores.data_dir, session, kept, trusted, full=full)
    return prove(stores.data_dir, session, kept, trusted, full=full, source=cast("PgLedger", ledger), read_latest=stores.receipts.latest_checkpoint)


# --- the database's own -------------------------------------------------------------------------------------------


@contextmanager
def database_ledger(url: str, *, timeout: float) -> Iterator[PgLedger]:
    """The ledger of the PostgreSQL database at `url` over a small pool of its own (closed after); BackendError when
    the server cannot be used (`timeout`: seconds to wait for it)."""
    from storage.pg.connect import Database
    from storage.pg.ledger import PgLedger

    db = Database(url, max_size=2, timeout=timeout)
    try:
        yield PgLedger(db)
    finally:
        db.close()


def migrate_extras(data_dir: Path, ledger: PgLedger) -> list[tuple[bool, str]]:
    """After `storage.migrate.migrate` into `ledger`'s database: the other stores' steps (storage.migrate.EXTRA_STEPS:
    receipts, checkpoints, Merkle trees), (done, one line) each."""
    from storage.migrate import run_extra_steps

    return run_extra_steps(data_dir, ledger.db)


__all__ = [
    "INDEX_FILE",
    "DatabaseLedger",
    "FileIndex",
    "FileLedger",
    "Signer",
    "database_ledger",
    "diagnose",
    "events_to_index",
    "file_index",
    "file_index_bytes",
    "file_ledger",
    "can_keep_file_index",
    "has_file_index",
    "index_imported",
    "index_totals",
    "list_sessions",
    "prove_since",
    "migrate_extras",
    "previous_import",
    "record_import",
    "repair",
    "session_bytes",
    "signing",
    "stage_import",
]
