"""The storage contract's types, below both backends: the Protocols every backend implements (LedgerStore,
SearchIndex, ReceiptStore, ReceiptRowStore, SessionState and their fragments), the value types they exchange
(Suggestion, SettingsError) and Stores, the four stores of one deployment. Nothing here names a backend: the
openers (open_stores, file_stores, pg_stores) are in storage/api.py, which re-exports every name here; the
backends import their types from this module, never from the openers' (docs/ARCHITECTURE.md, rule 3).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol

if TYPE_CHECKING:
    from ledger.erasing import Erasure
    from ledger.event import Event
    from ledger.messages import Message
    from ledger.verify import SessionReport
    from receipts.keys import PublicKey, SigningKey
    from receipts.stores import MerkleTree, Origin, PendingCites, ProposalStore, TreeSource
    from retrieval.config import IndexConfig
    from retrieval.model import SearchResponse
    from retrieval.semantic import TextEmbedder
    from storage.pg.connect import Database


class SemanticUnavailable(Exception):
    """The semantic extra cannot run here: not installed, or a file is not the one pinned (one line, no traceback)."""


class LineMark(NamedTuple):
    """Where line `seq` of a log was: its byte span [start, end) (its newline included) and the chain hash it ends on."""

    seq: int
    chain: str
    start: int
    end: int


class SystemLines(NamedTuple):
    """What a search of a file ledger's log found (control.revocation, storage.files.ledger.control_scan): the lines that may be system records (seq, the line without its newline), in seq
    order, and the mark of the last line searched."""

    lines: list[tuple[int, bytes]]
    last: LineMark


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

    def audited(self, local: str) -> AbstractContextManager[tuple[Path, LedgerStore | None]]:
        """Where a receipt of the imported session `local` is checked (storage.offline.verify_imported_receipt):
        (the folder the verifier reads, None) on files — the import's own folder —; (DATA_DIR/imported, the import's
        ledger, whose stored lines the auditor copies) on PostgreSQL. Held open while the check runs."""
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

    def add(self, folder: Path, origin: Origin, keys: Sequence[PublicKey], staged: LedgerStore) -> tuple[Origin, bool, int]:
        """The verified bundle extracted in `folder` (a staging folder under DATA_DIR/imported/) becomes the import
        `origin` (local id checked free): (the origin recorded, duplicate — another import of the same ledger won a
        race —, events indexed). `staged`: a reader's ledger over `folder` (storage.api_faces.reader_ledger), which
        a backend that copies the ledger reads through the contract; the caller closes it."""
        ...



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

    # the events with start <= seq < stop whose meta holds `key` == `value` (a string), in seq order: found by the
    # member's canonical bytes (ledger.canonical.member_bytes) among the stored lines, each candidate parsed and checked
    # (issue 30: only those lines are parsed; exact for canonical lines, the only ones a verified ledger holds); [] for
    # no such session
    def events_with_meta(self, session: str, key: str, value: str, start: int, stop: int) -> list[Event]: ...

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
    # the settings it indexes and ranks with (a receipt commits to their hash, docs/FORMAT.md §24)
    config: IndexConfig

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

    # -- the semantic extra (issue 35; retrieval/semantic.py): vectors stored beside the rows, gone with them ----------
    # search in hybrid mode with this model (None: lexical, exactly as without the extra)
    def use_semantic(self, embedder: TextEmbedder | None) -> None: ...

    # the method, model and model sha256 searches run with; None when lexical
    @property
    def semantic(self) -> dict[str, str] | None: ...

    # embed the session's indexed events that have no vector (at most `limit`, newest first; all, oldest first); how many
    def embed_pending(
        self, session: str, *, limit: int | None = None, progress: Callable[[int], None] | None = None
    ) -> int: ...

    # the seqs of the session that have a stored vector, ascending
    def vector_seqs(self, session: str) -> list[int]: ...

    # embed from now on in a thread of this process (`sessions` now, then each session index_session brings up to
    # date): a hybrid search embeds only its query, and events not embedded yet answer lexically
    def embed_in_background(self, sessions: Iterable[str] = ()) -> None: ...

    # whether the background embedding has nothing queued or running (waiting up to `timeout` seconds)
    def embedding_idle(self, timeout: float | None = None) -> bool: ...

    # stop the background embedding (a hybrid search embeds the newest pending events itself again)
    def stop_embedding(self) -> None: ...

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
    def keep_checkpoint(self, session: str, checkpoint: Mapping[str, Any], *, allow_shrink: bool = False, durable: bool = True) -> bool: ...
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

    def issue_checkpoint(
        self, ledger: TreeSource, session: str, key: SigningKey, *, allow_shrink: bool = False, durable: bool = True
    ) -> dict[str, Any]:
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
        if self.state is None:  # every opener hands its backend's SessionState (storage.api, the backends' imports)
            raise TypeError("Stores: give the SessionState of these stores (state=)")

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
