"""Receipts, the producer's tree and checkpoints on PostgreSQL: receipts.stores.ReceiptBackend and ReceiptRows.

Several app replicas sharing one database see the same receipts and the same latest checkpoint:

- a receipt is stored as the exact bytes the file backend writes (receipts.body.dump_file), in one committed
  row: it exists complete or not at all; `read_receipt` returns those bytes, so `receipts verify` and a
  visitor's download are byte-identical on both backends. Its derived columns (the file backend's
  index.sqlite `receipts` row) sit in the same row; `receipt_cites` is the same table as there;
- the `.cites` record a turn writes before its answer is appended is a `receipt_pending_cites` row;
- the tree is storage.pg.merkle.PgMerkleStore (row-locked appends);
- the latest checkpoint is one row per session holding checkpoint.json's exact bytes; the upsert compares
  tree sizes in its WHERE, so a slower replica's older checkpoint never replaces a newer one;
- the turn lock is a transaction-scoped advisory lock (released by rollback or a lost connection: a crashed
  replica never leaves a session locked), held on a pool of its own so that turns holding locks never starve
  their own writes of connections, behind a per-process lock per session so that threads of one process
  waiting for the same session hold no connection while they wait (ledger.locks.KeyedLocks: kept only while held or
  waited for).

`copies`: a folder (a cache) where each receipt written is also put as a file, for a CLI that prints
`receipt: <path>` and a visitor who keeps the file; the database row stays the record. A forget run on another
replica (another DATA_DIR) redacts or deletes the rows and cannot reach this folder, so the copies are checked
against the rows (`sweep_copies`: a copy whose bytes differ from its row's is rewritten from the row, one whose row
is gone is deleted) when the store opens (every copy), and before a receipt of a session is read, listed or
written here (that session's): the next start or read of this replica leaves no copy holding a word the record
no longer holds.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from ledger.event import validate_session_id
from ledger.locks import KeyedLocks
from receipts.body import MAX_RECEIPT_BYTES, RECEIPT_ID_RE, dump_file
from receipts.checkpoints import (
    MAX_CHECKPOINT_BYTES,
    MalformedCheckpoint,
    check_checkpoint_shape,
    checkpoint_file_bytes,
    parse_checkpoint,
)
from receipts.keys import SigningKey
from receipts.stores import PendingCites, ReceiptNotFound, ReceiptUnreadable, TreeSource, row_values
from storage import BackendError
from storage.common.checkpoint_issue import issue
from storage.common.fsmode import private_dir, replace_durable
from storage.common.tree_check import leaf_matches
from storage.pg import sql
from storage.pg.connect import CONNECT_TIMEOUT_S, Database
from storage.pg.consent import PgProposals
from storage.pg.merkle import PgMerkleStore, TreeMoved

log = logging.getLogger("storage.pg")
LOCK_CONNECTIONS = 32  # sessions whose turns may run at once in one process (each holds one lock connection)
# how long a turn waits for a lock connection: while other sessions' turns hold them all, or the server is down
LOCK_WAIT_S = 60.0
SYNC_CHUNK = 4096  # ledger events read per extend while a tree catches up
SYNC_ATTEMPTS = 5  # tries when another writer moved the tree while we read the ledger


def check_receipt_id(receipt_id: str) -> str:
    if not isinstance(receipt_id, str) or not RECEIPT_ID_RE.fullmatch(receipt_id):
        raise ValueError(f"receipt id {receipt_id!r} is not valid")
    return receipt_id


class PgReceipts:
    """Receipts, trees and checkpoints of every session in one PostgreSQL database. Safe for many threads."""

    def __init__(
        self, db: Database, *, copies: str | os.PathLike[str] | None = None, write_copies: bool = True, lock_connections: int = LOCK_CONNECTIONS, lock_wait: float = LOCK_WAIT_S
    ) -> None:
        self.db = db
        self.copies = None if copies is None else Path(copies)
        self.write_copies = write_copies  # False: only keep the copies already there in step (redact, delete)
        self.lock_connections = lock_connections
        self.lock_wait = lock_wait
        self._guard = threading.Lock()
        self._locks = KeyedLocks()  # this process's threads, per session
        self._lock_pool: ConnectionPool | None = None  # opened by the first turn_lock
        self._closed = False
        if self.copies is not None and self.copies.is_dir():
            self.sweep_copies()  # at start-up: a forget on another replica may have changed rows these copy

    def __repr__(self) -> str:
        return f"PgReceipts({self.db.shown!r})"

    def close(self) -> None:
        """Close the turn locks' own pool (the shared Database is its owner's to close)."""
        with self._guard:
            self._closed = True
            pool, self._lock_pool = self._lock_pool, None
        if pool is not None:
            pool.close()

    def __enter__(self) -> PgReceipts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the turn lock ----------------------------------------------------------------------------
    @contextmanager
    def turn_lock(self, session: str) -> Iterator[None]:
        """Serialise turns of one session across threads, processes and replicas.

        Held as an open transaction for the whole turn (a model call included), on a connection of the locks'
        own pool (at most `lock_connections` sessions' turns at once per process; more wait up to `lock_wait` s):
        a turn holding its lock always finds a connection for its own writes in the shared pool. Threads of this
        process waiting for the same session wait on a local lock and hold no connection. Released by rollback
        when the turn ends (it wrote nothing on that connection), or by the server when the connection is lost."""
        validate_session_id(session)
        with self._locks.held(session), ExitStack() as stack:
            try:
                conn = stack.enter_context(self._pool().connection())
                conn.execute(sql.TURN_LOCK_NO_IDLE_TIMEOUT)
                conn.execute(sql.TURN_LOCK, (session,))
            except PoolTimeout as exc:
                raise BackendError(f"PostgreSQL at {self.db.shown}: session {session}: no connection for its turn lock within {self.lock_wait:.0f} s") from exc
            except psycopg.OperationalError as exc:
                raise BackendError(f"PostgreSQL at {self.db.shown}: session {session}: turn lock: {self.db.said(exc)}") from exc
            try:
                yield
            finally:
                try:
                    conn.rollback()
                except psycopg.Error as exc:  # the connection died: the server released the lock with it
                    log.warning("session %s: the turn lock's connection was lost (%s)", session, type(exc).__name__)

    def _pool(self) -> ConnectionPool:
        with self._guard:
            if self._closed:
                raise BackendError(f"PostgreSQL at {self.db.shown}: the receipt store is closed")
            if self._lock_pool is None:
                pool: ConnectionPool = ConnectionPool(
                    self.db.url,
                    min_size=1,
                    max_size=self.lock_connections,
                    open=False,
                    timeout=self.lock_wait,
                    check=ConnectionPool.check_connection,
                    kwargs={"connect_timeout": CONNECT_TIMEOUT_S, "application_name": "memory-receipt-engine-locks"},
                    name="mre-turn-locks",
                )
                pool.open(wait=False)
                self._lock_pool = pool
            return self._lock_pool

    # -- the tree ---------------------------------------------------------------------------------
    def tree(self, session: str) -> PgMerkleStore:
        return PgMerkleStore(self.db, session)

    def synced_tree(self, ledger: TreeSource, session: str) -> PgMerkleStore:
        """The session's tree brought level with the ledger: leaves are the raw event digests. A tree ahead of
        the ledger, or whose last leaf disagrees with it, is rebuilt from the ledger (as storage.files.receipts.files does)."""
        store = PgMerkleStore(self.db, session)
        for _ in range(SYNC_ATTEMPTS):
            count, _head = ledger.head(session)
            size = store.size
            if size > count or (size and not leaf_matches(store, ledger, session, size - 1)):
                store.truncate(0)
                size = 0
            try:
                while size < count:
                    seqs = range(size, min(size + SYNC_CHUNK, count))
                    store.extend((bytes.fromhex(ev.digest) for ev in ledger.read_events(session, seqs)), at=size)
                    size = seqs.stop
                return store
            except TreeMoved:
                continue  # another writer appended the same digests meanwhile: look again
        raise TreeMoved(session, size, store.size)

    def drop_tree(self, session: str) -> None:
        PgMerkleStore(self.db, session).drop()

    # -- receipts ---------------------------------------------------------------------------------
    def write_receipt(self, session: str, receipt_id: str, envelope: Mapping[str, Any]) -> str:
        """Store the receipt (committed before this returns); where a copy was put, or the row's name."""
        validate_session_id(session)
        check_receipt_id(receipt_id)
        data = dump_file(envelope)
        with self.db.transaction() as conn:
            cur = conn.execute(sql.RECEIPT_INSERT, (receipt_id, session, data))
            if cur.rowcount != 1:
                raise ValueError(f"receipt id {receipt_id} is already used by another session")
        if self.copies is None or not self.write_copies:
            return f"postgresql:receipts/{session}/{receipt_id}"
        if (self.copies / session).is_dir():
            self.sweep_copies(session)  # this session's older copies: another replica may have forgotten since
        return str(self._copy(session, receipt_id, data))

    def _copy(self, session: str, receipt_id: str, data: bytes) -> Path:
        folder = self.copies / session if self.copies is not None else Path()
        private_dir(folder)
        path = folder / f"{receipt_id}.json"
        replace_durable(path, data)
        return path

    def _copy_paths(self, session: str | None) -> dict[str, dict[str, Path]]:
        """The copies kept here, per session and receipt id (only names that are a session and a receipt id)."""
        out: dict[str, dict[str, Path]] = {}
        if self.copies is None or not self.copies.is_dir():
            return out
        folders = [self.copies / session] if session is not None else sorted(p for p in self.copies.iterdir() if not p.is_symlink())
        for folder in folders:
            try:
                validate_session_id(folder.name)
            except ValueError:
                continue
            if not folder.is_dir() or folder.is_symlink():
                continue
            for path in folder.glob("*.json"):
                if RECEIPT_ID_RE.fullmatch(path.stem):
                    out.setdefault(folder.name, {})[path.stem] = path
        return out

    def sweep_copies(self, session: str | None = None) -> int:
        """Bring this folder's copies (of `session`, or of every session) in step with the rows: a copy whose bytes
        differ from its row's (a forget on another replica redacted it) is rewritten from the row, one whose row is
        gone (withdrawn, the session deleted) is deleted. Returns how many copies changed. A copy that cannot be
        read or written is logged (the error's type only) and deleted if it can be."""
        changed = 0
        for sess, paths in self._copy_paths(session).items():
            with self.db.connection() as conn:
                rows = conn.execute(sql.RECEIPT_DIGESTS, (sess, sorted(paths))).fetchall()
            digests = {str(r): bytes(d) for r, d in rows}
            for receipt_id, path in paths.items():
                try:
                    want = digests.get(receipt_id)
                    if want is not None and hashlib.sha256(path.read_bytes()).digest() == want:
                        continue
                    if want is not None:
                        try:
                            self._copy(sess, receipt_id, self.read_row(sess, receipt_id))
                            changed += 1
                            continue
                        except (ReceiptNotFound, ValueError):
                            pass  # gone meanwhile, or over the limit: no copy then
                    path.unlink(missing_ok=True)
                    changed += 1
                except OSError as exc:
                    log.warning("a receipt copy could not be checked against its row (%s); removing it", type(exc).__name__)
                    try:
                        path.unlink(missing_ok=True)
                    except OSError:
                        pass
        return changed

    def replace_receipt(self, session: str, receipt_id: str, data: bytes) -> None:
        validate_session_id(session)
        check_receipt_id(receipt_id)
        with self.db.transaction() as conn:
            if conn.execute(sql.RECEIPT_REPLACE, (data, session, receipt_id)).rowcount != 1:
                raise ReceiptNotFound(f"session {session}: no receipt {receipt_id}")
        if self.copies is not None and (self.copies / session / f"{receipt_id}.json").exists():
            self._copy(session, receipt_id, data)  # a cached copy must not keep the words a redaction removed

    def read_receipt(self, session: str, receipt_id: str) -> bytes:
        data = self.read_row(session, receipt_id)
        if self.copies is not None and (self.copies / session).is_dir():
            self.sweep_copies(session)
        return data

    def read_row(self, session: str, receipt_id: str) -> bytes:
        """The receipt's bytes as the row holds them (read_receipt without the copies' check)."""
        validate_session_id(session)
        check_receipt_id(receipt_id)
        with self.db.connection() as conn:
            row = conn.execute(sql.RECEIPT_READ, (MAX_RECEIPT_BYTES, session, receipt_id)).fetchone()
        if row is None:
            raise ReceiptNotFound(f"session {session}: no receipt {receipt_id}")
        size, data = row
        if data is None:
            raise ValueError(f"session {session}: receipt {receipt_id}: {size} bytes is over the {MAX_RECEIPT_BYTES}-byte receipt limit")
        return bytes(data)

    def receipt_ids(self, session: str) -> list[str]:
        validate_session_id(session)
        if self.copies is not None and (self.copies / session).is_dir():
            self.sweep_copies(session)
        with self.db.connection() as conn:
            return [str(r[0]) for r in conn.execute(sql.RECEIPT_IDS, (session,)).fetchall()]

    def delete_receipt(self, session: str, receipt_id: str) -> None:
        validate_session_id(session)
        check_receipt_id(receipt_id)
        with self.db.transaction() as conn:
            conn.execute(sql.RECEIPT_DELETE, (session, receipt_id))
            conn.execute(sql.CITES_DELETE_SOME, (session, [receipt_id]))
        if self.copies is not None:
            (self.copies / session / f"{receipt_id}.json").unlink(missing_ok=True)

    # -- what a turn handed the model, before its answer ------------------------------------------
    def write_cites(self, session: str, receipt_id: str, question_seq: int, memory_seqs: Sequence[int]) -> None:
        validate_session_id(session)
        check_receipt_id(receipt_id)
        seqs = [question_seq, *memory_seqs]
        if not all(type(s) is int and 0 <= s < 2**63 for s in seqs):
            raise ValueError(f"session {session}: receipt {receipt_id}: cited seqs must be non-negative integers")
        with self.db.transaction() as conn:
            conn.execute(sql.PENDING_WRITE, (session, receipt_id, question_seq, list(memory_seqs)))

    def drop_cites(self, session: str, receipt_id: str) -> None:
        validate_session_id(session)
        with self.db.transaction() as conn:
            conn.execute(sql.PENDING_DROP, (session, receipt_id))

    def pending_cites(self, session: str) -> list[PendingCites]:
        validate_session_id(session)
        with self.db.connection() as conn:
            rows = conn.execute(sql.PENDING_LIST, (session,)).fetchall()
        return [PendingCites(str(r), int(q), tuple(int(m) for m in mems)) for r, q, mems in rows]

    # -- checkpoints ------------------------------------------------------------------------------
    def issue_checkpoint(
        self, ledger: TreeSource, session: str, key: SigningKey, *, allow_shrink: bool = False, durable: bool = True
    ) -> dict[str, Any]:
        """Sign a checkpoint over the session as the ledger has it now and keep it (storage.common.checkpoint_issue;
        the caller holds turn_lock(session))."""
        return issue(self, ledger, session, key, allow_shrink=allow_shrink, durable=durable)

    def keep_checkpoint(self, session: str, checkpoint: Mapping[str, Any], *, allow_shrink: bool = False, durable: bool = True) -> bool:
        """Make it the latest unless a larger tree's checkpoint is kept already (False then). One statement:
        the comparison and the write are atomic, whatever other replicas do. `durable=False`: an asynchronous commit
        (a turn's first checkpoint, in place while the model runs; its answer's synchronous commit flushes it)."""
        validate_session_id(session)
        cp = check_checkpoint_shape(dict(checkpoint))
        if cp["body"]["session"] != session:
            raise ValueError(f"session {session}: the checkpoint names session {cp['body']['session']!r}")
        data = checkpoint_file_bytes(cp)
        statement = sql.CHECKPOINT_REPLACE if allow_shrink else sql.CHECKPOINT_KEEP
        with self.db.transaction() as conn:
            if not durable:
                # committed without waiting for its WAL flush: the WAL is one ordered log, so the turn's next
                # synchronous commit (the answer's) makes this one durable too, and a crash before it keeps the
                # previous checkpoint, never one ahead of the ledger rows committed before it
                conn.execute(sql.COMMIT_WITHOUT_FLUSH)
            return conn.execute(statement, (session, cp["body"]["tree_size"], data)).fetchone() is not None

    def latest_checkpoint(self, session: str) -> dict[str, Any] | None:
        """The latest signed checkpoint, parsed strictly; MalformedCheckpoint when the stored one is not one."""
        validate_session_id(session)
        with self.db.connection() as conn:
            row = conn.execute(sql.CHECKPOINT_READ, (MAX_CHECKPOINT_BYTES, session)).fetchone()
        if row is None:
            return None
        source = f"PostgreSQL {self.db.shown}: checkpoints row of session {session}"
        size, data = row
        if data is None:
            raise MalformedCheckpoint("$", f"{size} bytes is over the {MAX_CHECKPOINT_BYTES}-byte limit", source=source)
        cp = parse_checkpoint(bytes(data), source=source)
        if cp["body"]["session"] != session:
            raise MalformedCheckpoint("body.session", f"names session {cp['body']['session']!r}, not {session!r}", source=source)
        return cp

    def checkpoint_bytes(self, session: str) -> bytes | None:
        """The latest checkpoint's exact bytes (what checkpoint.json holds), for a download."""
        cp = self.latest_checkpoint(session)
        return None if cp is None else checkpoint_file_bytes(cp)

    # -- a deleted session ------------------------------------------------------------------------
    def forget_session(self, session: str) -> None:
        validate_session_id(session)
        with self.db.transaction() as conn:
            for statement in (
                sql.RECEIPT_DELETE_SESSION,
                sql.CITES_DELETE_SESSION,
                sql.PENDING_DELETE_SESSION,
                sql.MERKLE_DELETE_NODES,
                sql.MERKLE_DELETE_TREE,
                sql.CHECKPOINT_DELETE,
            ):
                conn.execute(statement, (session,))
        if self.copies is not None:
            import shutil

            shutil.rmtree(self.copies / session, ignore_errors=True)

    def sync_deletes(self, session: str) -> None:
        """Nothing: each delete committed in its own transaction (storage.api.ReceiptStore)."""

    def scrub_temps(self, session: str) -> tuple[str, ...]:
        """Nothing: no temp file is written for a row."""
        return ()

    def unlink_lock(self, session: str) -> None:
        """Nothing: the turn lock is an advisory lock, not a file."""

    def vacuum(self) -> list[str]:
        """VACUUM the receipt tables (after an erasure or a deletion: the old row versions hold the words until
        then); the tables PostgreSQL skipped (see Database.vacuum)."""
        return self.db.vacuum(sql.RECEIPTS_VACUUM)

    # -- the derived rows (receipts.stores.ReceiptRows) --------------------------------------------
    def record_row(self, session: str, receipt_id: str, where: str, body: Mapping[str, Any]) -> None:
        """Fill the receipt row's derived columns (`where` is implied: the row is the receipt)."""
        validate_session_id(session)
        with self.db.transaction() as conn:
            conn.execute(sql.RECEIPT_SET_ROW, {**row_values(body), "session": session, "receipt_id": check_receipt_id(receipt_id)})

    def record_cites(self, session: str, receipt_id: str, answer_seq: int, cited: Iterable[int]) -> None:
        validate_session_id(session)
        with self.db.transaction() as conn:
            conn.execute(sql.CITES_RECORD, (session, answer_seq, receipt_id, sorted(set(cited))))

    def citing_answers(self, session: str, seqs: Collection[int]) -> list[tuple[int, int]]:
        validate_session_id(session)
        with self.db.connection() as conn:
            rows = conn.execute(sql.CITES_ANSWERS, (session, sorted(set(seqs)))).fetchall()
        return [(int(c), int(a)) for c, a in rows]

    def answered(self, session: str, after_seq: int) -> set[int]:
        """The answers after `after_seq` whose turn's cites are recorded."""
        validate_session_id(session)
        with self.db.connection() as conn:
            rows = conn.execute(sql.CITES_ANSWERED, (session, after_seq)).fetchall()
        return {int(r[0]) for r in rows}

    def forget_rows(self, session: str, receipt_ids: Sequence[str] | None = None) -> None:
        """Drop the cited-seq rows of a session or of these receipts (the receipt rows go with the receipts)."""
        validate_session_id(session)
        with self.db.transaction() as conn:
            if receipt_ids is None:
                conn.execute(sql.CITES_DELETE_SESSION, (session,))
            else:
                conn.execute(sql.CITES_DELETE_SOME, (session, list(receipt_ids)))

    # -- the storage contract's (storage/api_faces.py), as the file backend's IndexRows / FileBackend answer them --
    def derived_generation(self) -> int | None:
        """None: these rows are the record, never derived from files, and never start over."""
        return None

    def restore_derived(self) -> int | None:
        """Nothing to restore: the rows are the record (None, as derived_generation)."""
        return None

    def stored_receipts(self, session: str) -> list[tuple[str, Callable[[], bytes]]]:
        """The session's receipt rows, by name, each read when asked (ReceiptUnreadable when it cannot be)."""

        def reader(receipt_id: str) -> Callable[[], bytes]:
            def read() -> bytes:
                try:
                    return self.read_receipt(session, receipt_id)
                except (OSError, ValueError) as exc:  # ReceiptNotFound is an OSError; over the size limit a ValueError
                    raise ReceiptUnreadable(f"session {session}: receipt {receipt_id}: {exc}") from None

            return read

        return [(f"{r}.json", reader(r)) for r in sorted(self.receipt_ids(session)) if RECEIPT_ID_RE.fullmatch(r)]

    def proposals(self, ttl: int) -> PgProposals:
        """The consent proposals every replica shares (storage.pg.consent.PgProposals; `ttl`: the tokens' lifetime)."""
        return PgProposals(self.db, ttl=ttl)


__all__ = ["PgReceipts", "check_receipt_id"]
