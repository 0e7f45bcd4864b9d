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
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from storage import ENV_VAR, BackendError, database_url, is_database_url, redact
from storage import database_url as _database_url  # open_ledger's parameter has the same name
from storage.api_faces import LedgerFaces, ReceiptBackendFaces, ReceiptRowsFaces

if TYPE_CHECKING:
    from ledger.erasing import Erasure
    from ledger.event import Event
    from ledger.messages import Message
    from ledger.verify import SessionReport
    from receipts.keys import SigningKey
    from receipts.stores import MerkleTree, PendingCites, TreeSource
    from retrieval.config import IndexConfig
    from retrieval.model import SearchResponse
    from storage.files.retrieval.db import Index
    from storage.pg.connect import Database

RECEIPT_COPIES = "receipt-copies"  # DATA_DIR/receipt-copies/<session>/<id>.json on PostgreSQL: a copy, not the record

Kind = Literal["files", "postgresql"]


class LedgerStore(LedgerFaces, Protocol):
    """The sessions' hash-chained logs (ledger.Ledger on files, storage.pg.ledger.PgLedger)."""

    # -- reading --
    # whether the session holds any event
    def exists(self, session: str) -> bool: ...

    # every session, sorted
    def sessions(self) -> list[str]: ...

    # (event count, chain head) now
    def head(self, session: str) -> tuple[int, str]: ...

    # the events from `start_seq` on, in order
    def events(self, session: str, start_seq: int = 0) -> Iterator[Event]: ...

    # the events at `seqs` (those that exist), in seq order
    def read_events(self, session: str, seqs: Iterable[int]) -> list[Event]: ...

    # the role 'system' events with start <= seq < stop (control records, supersessions, erasure records)
    def system_events(self, session: str, start: int, stop: int) -> list[Event]: ...

    # what tells this ledger from another deployment's (a process-wide cache's key)
    @property
    def location(self) -> str: ...

    # check the session's chain; a report
    def verify(self, session: str, *, parallel: bool = True, progress: Any = None) -> SessionReport: ...

    # -- writing --
    # append one event
    def append(
        self, session: str, role: str, text: str, meta: dict[str, Any] | None = None, ts: str | None = None
    ) -> Event: ...

    # append several in one durable write
    def append_many(self, session: str, messages: Sequence[Message], *, _validated: bool = False) -> list[Event]: ...

    # release what this object holds open (it stays usable)
    def close(self) -> None: ...

    # -- erasing and deleting --
    # erase `seqs`, the erasure journal kept so that a crash after the ledger changed is finished by recover; returns
    # the erasure and what marks the journal done. EraseError: nothing changed, no journal left.
    def erase_journaled(
        self, session: str, seqs: Sequence[int], *, reason: str | None, journal: bytes, landed: Callable[[], bool]
    ) -> tuple[Erasure, Callable[[], None]]: ...

    # keep a session deletion's journal (and its certificate, where the backend keeps it); returns what marks it done
    def keep_journal(self, session: str, journal: bytes, certificate: bytes | None = None) -> Callable[[], None]: ...

    # (token, session) of the erasure journals kept as rows (none on files: DATA_DIR/erasures/ is read by control)
    def pending_erasures(self, session: str | None = None) -> list[tuple[str, str]]: ...

    # a row-kept journal's (journal bytes, certificate bytes or None); FileNotFoundError once it finished
    def pending_journal(self, token: str) -> tuple[bytes, bytes | None]: ...

    # a row-kept journal is done
    def erasure_done(self, token: str) -> None: ...

    # whether a row-kept journal names the session (an erasure stopped half way on any replica)
    def erasure_pending(self, session: str) -> bool: ...

    # quarantined copies of lines (torn / cut tails) holding one of `wanted` (none where a line is committed whole)
    def quarantined_with(self, session: str, wanted: Sequence[bytes]) -> list[str]: ...

    # after an erasure: import records naming an erased seq dropped, the named quarantine files scrubbed;
    # (records dropped, files removed)
    def drop_erased_leftovers(
        self, session: str, seqs: Sequence[int], quarantine: Sequence[str]
    ) -> tuple[int, tuple[str, ...]]: ...

    # delete a session whole; `expect` (size, head) and `written_before` guard against a writer that takes no turn
    # lock (SessionMoved, nothing deleted) where one can exist. Whether there was such a session.
    def delete_session(
        self, session: str, expect: tuple[int, str] | None = None, written_before: float | None = None
    ) -> bool: ...

    # when the session was last written (Unix seconds), None when there is no such session
    def last_written(self, session: str) -> float | None: ...

    # reclaim what erased or deleted rows left (the tables skipped; nothing on files)
    def vacuum(self) -> list[str]: ...


class SearchIndex(Protocol):
    """The search index (retrieval.Index on files, storage.pg.index.PgIndex)."""

    # warnings from opening (an unreadable index moved aside and rebuilt, ...)
    warnings: list[str]

    # the top min(k, matches) events of one session for a free-text query, best first
    def search(
        self, session: str, query: str, k: int = 8, exclude_seqs: Iterable[int] = (), *, explain: bool = False
    ) -> SearchResponse: ...

    # the seqs after `after_seq` whose role is not 'user' (what a turn leaves out of its memories)
    def non_user_seqs(self, session: str, after_seq: int) -> list[int]: ...

    # bring every session up to date with its ledger; warnings
    def catch_up(self, progress: Callable[[str, int], None] | None = None) -> list[str]: ...

    # empty the index and index every ledger from scratch; warnings
    def rebuild(self, progress: Callable[[str, int], None] | None = None) -> list[str]: ...

    # index what the session's ledger holds beyond the watermark (`new_events`: what an append just returned); warnings
    def index_session(
        self, session: str, new_events: Sequence[Event] | None = None, *, progress: Any = None
    ) -> list[str]: ...

    # the session's erased events forgotten (rows, neighbours' context) and purged; PurgeIncomplete: retry
    def forget_events(self, session: str, seqs: Iterable[int]) -> Any: ...

    # a deleted session's rows dropped; run before and after the ledger's deletion (files purge only once the ledger
    # no longer holds it); PurgeIncomplete: retry
    def drop_session(self, session: str) -> None: ...

    # copies of the index moved aside as unreadable, overwritten and removed; their names (none on PostgreSQL)
    def scrub_copies(self) -> tuple[str, ...]: ...

    def close(self) -> None: ...


class ReceiptStore(ReceiptBackendFaces, Protocol):
    """Receipts, `.cites` records, the producer's Merkle trees and checkpoints, the turn lock
    (receipts.file_backend.FileBackend, storage.pg.receipts.PgReceipts); receipts.stores.ReceiptBackend plus the
    methods below."""

    def turn_lock(self, session: str) -> AbstractContextManager[None]: ...
    def synced_tree(self, ledger: TreeSource, session: str) -> MerkleTree: ...
    def drop_tree(self, session: str) -> None: ...
    def write_receipt(self, session: str, receipt_id: str, envelope: Mapping[str, Any]) -> str: ...
    def replace_receipt(self, session: str, receipt_id: str, data: bytes) -> None: ...
    def read_receipt(self, session: str, receipt_id: str) -> bytes: ...
    def receipt_ids(self, session: str) -> list[str]: ...
    def delete_receipt(self, session: str, receipt_id: str) -> None: ...
    def write_cites(self, session: str, receipt_id: str, question_seq: int, memory_seqs: Sequence[int]) -> None: ...
    def drop_cites(self, session: str, receipt_id: str) -> None: ...
    def pending_cites(self, session: str) -> list[PendingCites]: ...
    def keep_checkpoint(self, session: str, checkpoint: Mapping[str, Any], *, allow_shrink: bool = False) -> bool: ...
    def latest_checkpoint(self, session: str) -> dict[str, Any] | None: ...
    def forget_session(self, session: str) -> None: ...

    # the receipts deleted so far made durable before a certificate says they went (a folder fsync on files)
    def sync_deletes(self, session: str) -> None: ...

    # receipt temp files a crash left, scrubbed; their names (none on PostgreSQL)
    def scrub_temps(self, session: str) -> tuple[str, ...]: ...

    # the turn lock's leftovers once its session is deleted (the lock file on files; the caller holds the lock)
    def unlink_lock(self, session: str) -> None: ...

    # reclaim what deleted or rewritten receipts left (the tables skipped; nothing on files)
    def vacuum(self) -> list[str]: ...

    def issue_checkpoint(self, ledger: TreeSource, session: str, key: SigningKey, *, allow_shrink: bool = False) -> dict[str, Any]:
        """Sign a checkpoint over the session as the ledger has it now and keep it as the latest (the caller holds
        turn_lock(session)); `allow_shrink`: a repair cut the ledger, so a smaller tree's replaces a larger one."""
        ...


class ReceiptRowStore(ReceiptRowsFaces, Protocol):
    """The receipt rows derived from the receipts (receipts.stores.ReceiptRows)."""

    def record_row(self, session: str, receipt_id: str, where: str, body: Mapping[str, Any]) -> None: ...
    def record_cites(self, session: str, receipt_id: str, answer_seq: int, cited: Iterable[int]) -> None: ...
    def citing_answers(self, session: str, seqs: Collection[int]) -> list[tuple[int, int]]: ...
    def answered(self, session: str, after_seq: int) -> set[int]: ...
    def forget_rows(self, session: str, receipt_ids: Sequence[str] | None = None) -> None: ...


class SettingsError(ValueError):
    """A session's settings could not be read or written (one line, naming the session or the file)."""


class SettingsStore(Protocol):
    """Where the sessions' settings are kept (control.settings). The session id is checked before these run."""

    # whether "ask me first" is on (off when never set); SettingsError for a stored value that cannot be read
    def get_consent(self, session: str) -> bool: ...

    # the value stored; None when the session is unknown and `create` is off
    def set_consent(self, session: str, on: bool, *, create: bool) -> bool | None: ...

    # the session's settings gone (idempotent)
    def forget_session(self, session: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Suggestion:
    """The statement at `new_seq` may supersede the one at `older_seq`, as `suggested_by` proposed at `at`."""

    new_seq: int
    new_id: str
    older_seq: int
    older_id: str
    suggested_by: str  # "model:<id>"
    at: str  # ledger ts form, UTC

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        return (
            f"seq {self.new_seq} may supersede seq {self.older_seq} (suggested by {self.suggested_by} at {self.at}; "
            "the rules did not read them as the same fact, so nothing was recorded)"
        )


class SuggestionStore(Protocol):
    """Where the supersessions a model suggested are kept (control.suggestions)."""

    # keep these (a pair already kept is not kept twice)
    def add(self, session: str, items: list[Suggestion]) -> None: ...

    # every kept suggestion, oldest first
    def all(self, session: str) -> list[Suggestion]: ...

    # the pair's suggestion gone
    def drop(self, session: str, new_seq: int, older_seq: int) -> None: ...

    # every suggestion of the session gone
    def forget_session(self, session: str) -> None: ...


class SessionState(Protocol):
    """What a session keeps beside its ledger: consent proposals, settings, suggestions (storage.file_state.
    FileSessionState, storage.pg.consent.PgSessionState). The cached control state is not here yet: control.revocation
    keeps it (control-state.json on files, derived from LedgerStore.system_events elsewhere)."""

    # the sessions' settings ("ask me first")
    def settings(self) -> SettingsStore: ...

    # the supersessions a model suggested and the rules did not confirm
    def suggestions(self) -> SuggestionStore: ...

    # all of the session's state gone (a deleted session leaves no question, setting or suggestion behind)
    def forget_session(self, session: str) -> None: ...


def file_session_state(data_dir: str | os.PathLike[str]) -> SessionState:
    """The session state kept in a data directory (for a caller that names a folder, not a Stores)."""
    from storage.files.state import FileSessionState

    return FileSessionState(Path(data_dir))


def _no_leftovers(session: str) -> tuple[str, ...]:
    return ()


@dataclass
class Stores:
    """The stores of one deployment. `close` releases a PostgreSQL pool, and an index opened here on first use.

    `index` (and `rows`, over it on files) may be opened only when first used (`open_index`): opening one may
    write to DATA_DIR, and a command that is refused must leave it as it found it. `leftovers(session)`: what another
    backend's past left of the session, deleted (on PostgreSQL: the files a `ledger migrate` left in DATA_DIR);
    the names of index copies scrubbed."""

    kind: Kind
    data_dir: Path
    ledger: LedgerStore
    _index: SearchIndex | None
    receipts: ReceiptStore
    _rows: ReceiptRowStore | None
    database: Database | None = None
    state: SessionState | None = None
    leftovers: Callable[[str], tuple[str, ...]] = _no_leftovers
    open_index: Callable[[], tuple[SearchIndex, ReceiptRowStore]] | None = field(default=None, repr=False)
    _opened: bool = field(default=False, repr=False)
    _closed: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        if self.state is None and self.database is not None:  # a Stores built by hand (bundle.pg_import)
            from storage.pg.consent import PgSessionState

            self.state = PgSessionState(self.database, self.data_dir)
        elif self.state is None:
            self.state = file_session_state(self.data_dir)

    @property
    def index(self) -> SearchIndex:
        self.open_now()
        assert self._index is not None
        return self._index

    @property
    def rows(self) -> ReceiptRowStore:
        if self._rows is None:
            self.open_now()
        assert self._rows is not None
        return self._rows

    def open_now(self) -> None:
        """Open the index now if it is opened on first use: before a step changes anything, so that an index that
        cannot open stops nothing half-way."""
        if self._index is None:
            assert self.open_index is not None, "Stores: no index and no way to open one"
            self._index, self._rows = self.open_index()
            self._opened = True

    @property
    def session_state(self) -> SessionState:
        assert self.state is not None
        return self.state

    @property
    def where(self) -> str:
        """What a message names: the data folder, or the database (never its password)."""
        return str(self.data_dir) if self.database is None else self.database.shown

    def close_index(self) -> None:
        """Close the index when this object opened it on first use (it opens again when next used)."""
        if self._opened and self._index is not None:
            self._index.close()
            self._index, self._rows, self._opened = None, None, False

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.close_index()
        if self.database is not None:
            close = getattr(self.receipts, "close", None)
            if close is not None:
                close()
            self.database.close()

    def __enter__(self) -> Stores:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
    "RECEIPT_COPIES",
    "LedgerStore",
    "ReceiptRowStore",
    "ReceiptStore",
    "SearchIndex",
    "SessionState",
    "Stores",
    "file_stores",
    "open_stores",
    "pg_stores",
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
