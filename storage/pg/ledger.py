"""The ledger on PostgreSQL: `PgLedger`, the same public interface as ledger.Ledger, the same bytes.

Each event is one row of `events` holding its exact JSONL line (without the newline: the bytes that
are hashed) plus query columns; `sessions` holds each session's tail (size, head). Events are
encoded by the file backend's pure functions (ledger/bulk.py), verified by its walker
(ledger/verify.py), erased by its planner (ledger/erasing.py `plan_erasure`): only the I/O is here.

An append locks the session's `sessions` row (SELECT … FOR UPDATE) inside its transaction, so
writers in other threads, processes or replicas queue instead of forking the chain; it returns
only after COMMIT. Reads take no lock.

Erasure rewrites the lines and appends the records in one transaction, then runs VACUUM on
`events` (outside a transaction) so the old row versions are no longer reachable. What PostgreSQL
still retains and this code cannot remove: the bytes of the old row versions in the table's free
space until overwritten (VACUUM FULL rewrites the table), the WAL segments written before the
erasure until they are recycled or archived, and every base backup, archived WAL and replica.
Those are the operator's to expire (docs/BACKENDS.md).
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import orjson
import psycopg

from ledger import importer
from ledger.appending import Appended, append_messages
from ledger.bulk import Block, chain
from ledger.canonical import member_bytes
from ledger.erasing import EraseError, Erasure, check_erase_args, plan_erasure
from ledger.erasures import ErasureState
from ledger.event import (
    GENESIS,
    ROLES,
    Event,
    SessionMoved,
    event_from_dict,
    is_erasure_record,
    now_ts,
    validate_session_id,
)
from ledger.importer import Imported
from ledger.imports import ImportRecord
from ledger.messages import Message, validate_message
from ledger.verify import SEQ_GAP, Break, SessionReport, StoredLinesChanged, verify_stream
from storage.pg import sql
from storage.pg.connect import Database

if TYPE_CHECKING:
    from storage.pg.imports import PgImports

log = logging.getLogger("ledger")
PAGE_ROWS = 2000  # rows one `events` page reads (a generator holds no connection between pages)
CURSOR_ROWS = 5000  # rows a server-side cursor fetches at a time
FUNCTION_MAX_ROWS = 1000  # appends up to this many events go through sql.LEDGER_APPEND; larger ones through COPY
FUNCTION_TRIES = 3  # optimistic tries before an append locks first (another writer kept moving the tail)
MAX_REMEMBERED = 4096  # sessions whose tail is remembered
_ROLE_AT = 64 + len(b'","role":"')  # from where a line's prev starts to where its role starts (ledger/bulk.py _LINE)
_ROLE_BYTES = {r.encode(): r for r in ROLES}


def _no_session(session: str) -> FileNotFoundError:
    return FileNotFoundError(f"session {session}: no such session")


def block_rows(session: str, block: Block) -> Iterator[tuple[str, int, bytes, str, str, str]]:
    """The `events` rows of a chained block: (session, seq, line without newline, role, digest, chain) (pure)."""
    data = block.data
    n = block.count
    for i in range(n):
        start = block.starts[i]
        end = block.starts[i + 1] if i + 1 < n else len(data)
        role_at = block.prevs[i] + _ROLE_AT
        role = _ROLE_BYTES[bytes(data[role_at : data.index(b'"', role_at)])]
        yield (
            session,
            block.seq + i,
            bytes(data[start : end - 1]),
            role,
            block.digests[32 * i : 32 * i + 32].hex(),
            block.heads[32 * i : 32 * i + 32].hex(),
        )


def _line_row(line: bytes, obj: dict[str, Any]) -> tuple[str, int, bytes, str, str, str]:
    """The `events` row of one line (with its newline) and its parsed fields."""
    return (obj["session"], obj["seq"], line.rstrip(b"\n"), obj["role"], obj["digest"], obj["chain"])


class PgLedger:
    """All sessions in one PostgreSQL database. Safe for many threads, processes and replicas.

    `database_or_url`: a storage.pg.connect.Database (shared with the index and receipts) or a
    URL (this object then owns the pool and `close` closes it). `data_dir`: the folder of keys
    and caches, when there is one; no ledger byte is kept there.
    """

    def __init__(self, database_or_url: Database | str, data_dir: str | Path | None = None) -> None:
        self._owns = isinstance(database_or_url, str)
        self.db = Database(database_or_url) if isinstance(database_or_url, str) else database_or_url
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.quarantined: list[Any] = []  # the file backend's torn tails: none here (a row is committed whole)
        self._tails: dict[str, tuple[int, bytes]] = {}  # (size, head) this object last wrote, per session: a guess
        self._guard = threading.Lock()

    def __repr__(self) -> str:
        return f"<PgLedger {self.db.shown}>"

    # -- sessions ----------------------------------------------------------
    def exists(self, session: str) -> bool:
        validate_session_id(session)
        with self.db.connection() as conn:
            return conn.execute(sql.LEDGER_TAIL, (session,)).fetchone() is not None

    def sessions(self) -> list[str]:
        with self.db.connection() as conn:
            return [str(r[0]) for r in conn.execute(sql.LEDGER_SESSIONS)]

    def head(self, session: str) -> tuple[int, str]:
        """(number of events, chain hash of the last one) — GENESIS for an empty or unknown session."""
        validate_session_id(session)
        with self.db.connection() as conn:
            row = conn.execute(sql.LEDGER_TAIL, (session,)).fetchone()
        return (0, GENESIS.hex()) if row is None else (int(row[0]), str(row[1]))

    def open_session(self, session: str) -> tuple[int, str]:
        """The session's (size, head); FileNotFoundError when it has none (no recovery to do here)."""
        if not self.exists(session):
            raise _no_session(session)
        return self.head(session)

    def forget(self, session: str) -> None:
        """Nothing is cached per session here; validates the id like the file backend."""
        validate_session_id(session)

    def close(self) -> None:
        """Close the pool when this object opened it (a shared Database is its owner's to close)."""
        if self._owns:
            self.db.close()

    # -- writing -----------------------------------------------------------
    def append(self, session: str, role: str, text: str, meta: dict[str, Any] | None = None, ts: str | None = None) -> Event:
        """Append one event; committed before it returns."""
        return self.append_many(session, [validate_message(role, text, meta, ts)], _validated=True)[0]

    def append_many(self, session: str, messages: Sequence[Message], *, _validated: bool = False) -> list[Event]:
        """Append a batch in one transaction; one bad message refuses the whole batch."""
        return append_messages(self.append_blocks, session, messages, validated=_validated)

    def append_blocks(self, session: str, encode: Callable[[int], list[Block]], seq: int, head: bytes) -> Appended:
        """Append encoded blocks (ledger/bulk.py) under the session's row lock, acknowledged after COMMIT.

        As Ledger.append_blocks: `encode(seq)` is called with the session's next seq, and the blocks
        are chained again unless they were chained from the head the session has. A small append
        is one statement (sql.LEDGER_APPEND, from the tail this object last saw: when another writer
        moved it, it is encoded again from the tail the statement returns); a large one, or one
        that lost that race FUNCTION_TRIES times, is a transaction that locks first (COPY).
        """
        validate_session_id(session)
        size, cur = self._tails.get(session, (seq, head))
        for _ in range(FUNCTION_TRIES):
            blocks = self._chained(encode, size, cur, seq, head)
            if not 0 < sum(b.count for b in blocks) <= FUNCTION_MAX_ROWS:
                break
            columns = [list(col) for col in zip(*(r for b in blocks for r in block_rows(session, b)), strict=True)][1:]
            new_head = blocks[-1].head(blocks[-1].count - 1)
            with self.db.connection() as conn:
                conn.autocommit = True  # the statement is the transaction: one round trip
                try:
                    got = conn.execute(sql.LEDGER_APPEND, (session, size, cur.hex(), new_head.hex(), *columns)).fetchone()
                finally:
                    conn.autocommit = False
            assert got is not None
            if got[2]:
                self._remember(session, int(got[0]), new_head)
                return Appended(blocks, cur)
            size, cur = int(got[0]), bytes.fromhex(got[1])  # another writer came first: encode again from its tail
        with self.db.transaction() as conn:
            size, cur = self._lock(conn, session)
            blocks = self._chained(encode, size, cur, seq, head)
            count = sum(b.count for b in blocks)
            if count:
                with conn.cursor().copy(sql.LEDGER_COPY_EVENTS) as copy:
                    copy.set_types(sql.LEDGER_COPY_TYPES)
                    for b in blocks:
                        for row in block_rows(session, b):
                            copy.write_row(row)
                last = blocks[-1]
                new_head = last.head(last.count - 1)
                conn.execute(sql.LEDGER_ADVANCE, (size + count, new_head.hex(), session))
        if count:
            self._remember(session, size + count, new_head)
        return Appended(blocks, cur)

    @staticmethod
    def _chained(encode: Callable[[int], list[Block]], size: int, cur: bytes, seq: int, head: bytes) -> list[Block]:
        """encode(size), chained from `cur` unless the blocks already are (they were encoded for (seq, head))."""
        blocks = encode(size)
        if size != seq or cur != head or any(len(b.heads) != 32 * b.count for b in blocks):
            prev = cur
            for b in blocks:
                prev = chain(b, prev)
        return blocks

    def _remember(self, session: str, size: int, head: bytes) -> None:
        """The tail this object last wrote: the next small append's guess (a few thousand sessions at most)."""
        with self._guard:
            if len(self._tails) >= MAX_REMEMBERED and session not in self._tails:
                self._tails.pop(next(iter(self._tails)))
            self._tails[session] = (size, head)

    @staticmethod
    def _lock(conn: psycopg.Connection[Any], session: str, *, create: bool = True) -> tuple[int, bytes]:
        """Lock the session's row for this transaction (creating it first if asked); its (size, head)."""
        row = conn.execute(sql.LEDGER_LOCK_SESSION, (session,)).fetchone()
        if row is None:
            if not create:
                raise _no_session(session)
            conn.execute(sql.LEDGER_NEW_SESSION, (session, GENESIS.hex()))
            row = conn.execute(sql.LEDGER_LOCK_SESSION, (session,)).fetchone()
            assert row is not None
        return int(row[0]), bytes.fromhex(row[1])

    def import_jsonl(
        self, session: str, lines: Iterable[bytes], progress: Any = None, *, allow_system: bool = False, workers: int | None = None
    ) -> Imported:
        """Validate every line of an import file (ledger/importer.py), then append them in one transaction (COPY)."""
        staged = self.stage_import(session, lines, progress, allow_system=allow_system, workers=workers)
        return importer.commit(self, staged)

    def stage_import(
        self, session: str, lines: Iterable[bytes], progress: Any = None, *, allow_system: bool = False, content: bool = False,
        workers: int | None = None,
    ) -> importer.Staged:
        """ledger/importer.py's stage, from the session's tail as the database has it now (commit checks it)."""
        validate_session_id(session)
        size, head = self.head(session)
        return importer.stage(
            None, session, lines, progress, allow_system=allow_system, content=content, workers=workers, tail=(size, bytes.fromhex(head))
        )

    def copy_lines(self, session: str, lines: Iterable[tuple[bytes, dict[str, Any]]], first_seq: int, prev_head: bytes, new_head: bytes) -> int:
        """Append already-verified lines (with their newlines, parsed) exactly as they are; how many (ledger migrate).

        Refused (ValueError, nothing written) unless the session's tail is (first_seq, prev_head):
        a migration resumes only where the database stands.
        """
        validate_session_id(session)
        n = 0
        with self.db.transaction() as conn:
            size, head = self._lock(conn, session)
            if (size, head) != (first_seq, prev_head):
                raise ValueError(
                    f"session {session}: the database holds {size} events (head {head.hex()[:16]}), not {first_seq} (head {prev_head.hex()[:16]})"
                )
            with conn.cursor().copy(sql.LEDGER_COPY_EVENTS) as copy:
                copy.set_types(sql.LEDGER_COPY_TYPES)
                for line, obj in lines:
                    copy.write_row(_line_row(line, obj))
                    n += 1
            conn.execute(sql.LEDGER_ADVANCE, (first_seq + n, new_head.hex(), session))
        return n

    # -- import records (ledger/imports.py's, in a table) -------------------
    def previous_import(self, session: str, digest: str) -> ImportRecord | None:
        """The earlier import of the same content into this session that the ledger still holds, if any."""
        validate_session_id(session)
        with self.db.connection() as conn:
            row = conn.execute(sql.IMPORTS_PREVIOUS, (session, digest)).fetchone()
        return None if row is None else ImportRecord(row[0], int(row[1]), int(row[2]), int(row[3]), row[4], row[5], row[6])

    def record_import(self, session: str, digest: str, events: Sequence[Event], file: str) -> ImportRecord:
        """Record an import after its events committed; none when an erasure reached them first."""
        record = ImportRecord(digest, len(events), events[0].seq, events[-1].seq, events[-1].chain, file, now_ts())
        with self.db.transaction() as conn:
            self._lock(conn, session, create=False)  # an erasure of the session waits, or came before
            for (line,) in conn.execute(sql.LEDGER_SYSTEM_LINES_AFTER, (session, record.last_seq)):
                ev = event_from_dict(orjson.loads(line))
                if is_erasure_record(ev) and any(record.first_seq <= e["seq"] <= record.last_seq for e in ev.meta["erasure"]["erased"]):
                    return record
            r = record
            conn.execute(sql.IMPORTS_ADD, (session, r.sha256, r.messages, r.first_seq, r.last_seq, r.last_chain, r.file, r.imported_at))
        return record

    # -- reading -----------------------------------------------------------
    def events(self, session: str, start_seq: int = 0) -> Iterator[Event]:
        """The session's events in order, from `start_seq`, up to its size when the call began.

        Read a page at a time, each its own statement (no connection held between pages); the
        lines as stored: use verify() to check them.
        """
        size, _ = self.open_session(session)
        at = max(start_seq, 0)
        while at < size:
            with self.db.connection() as conn:
                rows = conn.execute(sql.LEDGER_LINES_FROM, (session, at, size, PAGE_ROWS)).fetchall()
            if not rows:
                return
            for seq, line in rows:
                yield event_from_dict(orjson.loads(line), int(seq) + 1)
            at = int(rows[-1][0]) + 1

    def read_events(self, session: str, seqs: Iterable[int]) -> list[Event]:
        """The events at the given seqs (in the order asked); IndexError for a seq the session does not hold."""
        wanted = list(seqs)
        validate_session_id(session)
        asked = sorted({seq for seq in wanted if type(seq) is int and 0 <= seq < 1 << 62})  # the others: IndexError below
        with self.db.transaction() as conn:  # the size and the rows in one statement, so from one snapshot
            rows = conn.execute(sql.LEDGER_SIZE_AND_LINES_AT, (asked, session)).fetchall()
        if not rows:
            raise _no_session(session)
        size = int(rows[0][0])
        for seq in wanted:
            if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq < size:
                raise IndexError(f"session {session}: no event at seq {seq!r} (it holds {size})")
        found = {int(s): bytes(line) for _size, s, line in rows if s is not None}
        out = []
        for seq in wanted:
            line = found.get(seq)
            if line is None:
                raise IndexError(f"session {session}: no row for seq {seq} although it holds {size} (verify the session)")
            out.append(event_from_dict(orjson.loads(line), seq + 1))
        return out

    @contextmanager
    def snapshot_lines(self, session: str) -> Iterator[Iterator[bytes]]:
        """Every stored line of the session in seq order, each with its newline, from one snapshot of the database.

        One REPEATABLE READ transaction and a server-side cursor: constant memory, and what an
        erasure or append commits meanwhile is not seen half.
        """
        with self._snapshot(session) as (_tail, lines):
            yield lines

    @contextmanager
    def _snapshot(self, session: str) -> Iterator[tuple[tuple[int, str], Iterator[bytes]]]:
        """snapshot_lines, with the session's (size, head) as the `sessions` row says in the same snapshot."""
        validate_session_id(session)
        with self.db.transaction() as conn:
            conn.execute(sql.LEDGER_SNAPSHOT)
            row = conn.execute(sql.LEDGER_TAIL, (session,)).fetchone()
            if row is None:
                raise _no_session(session)
            with conn.cursor(name=f"mre_lines_{uuid.uuid4().hex}") as cur:
                cur.itersize = CURSOR_ROWS
                cur.execute(sql.LEDGER_ALL_LINES, (session,))
                yield (int(row[0]), str(row[1])), (bytes(line) + b"\n" for (line,) in cur)

    def export(self, session: str, out: BinaryIO) -> int:
        """Write the session's JSONL, byte for byte what the file backend holds; the bytes written."""
        n = 0
        with self.snapshot_lines(session) as lines:
            for line in lines:
                out.write(line)
                n += len(line)
        return n

    def size_bytes(self, session: str) -> int:
        """The bytes the session's JSONL has (for a progress bar)."""
        validate_session_id(session)
        with self.db.connection() as conn:
            row = conn.execute(sql.LEDGER_BYTES, (session,)).fetchone()
        return int(row[0]) if row else 0

    def last_line(self, session: str) -> tuple[int, bytes | None]:
        """(events, the last stored line without its newline or None): what `ledger list` shows."""
        size, _ = self.open_session(session)
        with self.db.connection() as conn:
            row = conn.execute(sql.LEDGER_LAST_LINE, (session,)).fetchone()
        return size, None if row is None else bytes(row[0])

    def verify(self, session: str, *, parallel: bool = True, progress: Any = None) -> SessionReport:
        """Verify one session from genesis with the file backend's walker, over one snapshot, streaming.

        `parallel` is accepted for the file backend's signature (the walk is serial here);
        `progress` (tqdm-like) is updated with the bytes read.
        The chain's end must also be the tail the `sessions` row records: rows missing at the end
        (which a walk alone cannot see) are a seq_gap at the first missing seq.
        """
        del parallel
        with self._snapshot(session) as ((size, head), lines):
            report = verify_stream(session, _chunks(lines, progress))
        return against_tail(report, size, head)

    # -- erasure -----------------------------------------------------------
    def erase(
        self, session: str, seqs: Iterable[int], *, reason: str | None = None, pending: tuple[str, bytes] | None = None
    ) -> Erasure:
        """Erase events: lines rewritten in erased form and erasure records appended in one transaction, then VACUUM.

        The same erased lines and records as the file backend (ledger/erasing.py plan_erasure).
        After the commit `VACUUM events` makes the old row versions unreachable; see the module
        docstring for what PostgreSQL still retains (free space, WAL, backups, replicas).
        `pending` (token, journal): the erasure's journal (control.forget), kept in `erasures_pending` in the same
        transaction, so every replica sees the erasure pending from the moment the ledger changed until
        `erasure_done(token)`.
        """
        wanted = check_erase_args(session, seqs, reason)
        with self.db.transaction() as conn:
            try:
                size, head = self._lock(conn, session, create=False)
            except FileNotFoundError:
                raise EraseError(f"session {session}: no such session") from None
            for seq in wanted:
                if not seq < size:
                    raise EraseError(f"session {session}: no event at seq {seq} (it holds {size})")
            lines = {int(s): bytes(line) for s, line in conn.execute(sql.LEDGER_LINES_AT, (session, wanted))}
            missing = [s for s in wanted if s not in lines]
            if missing:
                raise EraseError(f"session {session}: no row for seq {missing[0]} (verify the session); nothing was changed")
            old = [event_from_dict(orjson.loads(lines[s]), s + 1) for s in wanted]
            gone, records, appended = plan_erasure(session, old, head, size, reason, ErasureState())
            with conn.cursor() as cur:
                cur.executemany(sql.LEDGER_REWRITE_LINE, [(e.to_line().rstrip(b"\n"), session, e.seq) for e in gone])
            with conn.cursor().copy(sql.LEDGER_COPY_EVENTS) as copy:
                copy.set_types(sql.LEDGER_COPY_TYPES)
                for r in records:
                    copy.write_row(_line_row(r.to_line(), r.to_dict()))
            conn.execute(sql.LEDGER_ADVANCE, (size + len(records), appended[-1][1].hex(), session))
            conn.execute(sql.IMPORTS_FORGET, (session, wanted))  # unsalted hashes of what was erased: gone with it
            if pending is not None:
                conn.execute(sql.ERASURE_PENDING_ADD, (pending[0], session, pending[1], None))
        self._remember(session, size + len(records), appended[-1][1])
        self.vacuum()
        log.info(
            "session %s: erased %d event(s) (seqs %s), erasure record(s) at seq %d-%d",
            session, len(gone), wanted, records[0].seq, records[-1].seq,
        )
        return Erasure(gone, records[-1], records)

    # -- erasures stopped half way (control.forget; sql.ERASURES_PENDING_SCHEMA) ---------------------
    def keep_pending(self, token: str, session: str, journal: bytes, certificate: bytes | None = None) -> None:
        """Record an erasure in progress (a whole session's, before anything of it is deleted): see `erase`'s `pending`."""
        validate_session_id(session)
        with self.db.transaction() as conn:
            conn.execute(sql.ERASURE_PENDING_ADD, (token, session, journal, certificate))

    def pending_erasures(self, session: str | None = None) -> list[tuple[str, str]]:
        """(token, session) of every erasure in progress or stopped half way (of `session` only, when given), oldest first."""
        with self.db.connection() as conn:
            if session is None:
                rows = conn.execute(sql.ERASURES_PENDING).fetchall()
            else:
                validate_session_id(session)
                rows = conn.execute(sql.ERASURES_PENDING_OF, (session,)).fetchall()
        return [(str(t), str(s)) for t, s in rows]

    def pending_journal(self, token: str) -> tuple[bytes, bytes | None]:
        """The erasure's journal and certificate (None: an erasure of events); FileNotFoundError once it finished."""
        with self.db.connection() as conn:
            row = conn.execute(sql.ERASURE_PENDING_READ, (token,)).fetchone()
        if row is None:
            raise FileNotFoundError(f"erasure {token}: finished")
        return bytes(row[0]), None if row[1] is None else bytes(row[1])

    def erasure_pending(self, session: str) -> bool:
        """Whether an erasure of `session` is in progress or stopped half way (on any replica)."""
        validate_session_id(session)
        with self.db.connection() as conn:
            row = conn.execute(sql.ERASURE_PENDING_ANY, (session,)).fetchone()
        return bool(row and row[0])

    def erasure_done(self, token: str) -> None:
        """The erasure's steps have all run: it is no longer pending."""
        with self.db.transaction() as conn:
            conn.execute(sql.ERASURE_PENDING_DONE, (token,))

    def delete_session(self, session: str, expect: tuple[int, str] | None = None, written_before: float | None = None) -> bool:
        """Delete a session whole (its events, import records and tail) in one transaction, then VACUUM the
        events table. False when there was no such session. The caller holds the session's turn lock.

        `expect` (size, head): delete only that history; `written_before` (Unix seconds): only if last written before
        then (retention). Both are read under the session's row lock in the same transaction, so a writer that takes
        no turn lock (an import) cannot slip in between: SessionMoved, nothing deleted, when either does not hold."""
        validate_session_id(session)
        with self.db.transaction() as conn:
            row = conn.execute(sql.LEDGER_LOCK_SESSION_WRITTEN, (session,)).fetchone()
            if row is None:
                return False
            size, head, written = int(row[0]), str(row[1]), float(row[2])
            if expect is not None and (size, head) != (expect[0], expect[1]):
                raise SessionMoved(
                    f"session {session}: it holds {size} events now, not the {expect[0]} this deletion was planned for "
                    "(another writer appended); nothing was deleted"
                )
            if written_before is not None and written >= written_before:
                raise SessionMoved(f"session {session}: written again after the idle check; nothing was deleted")
            for statement in sql.LEDGER_DELETE_SESSION:
                conn.execute(statement, (session,))
        with self._guard:
            self._tails.pop(session, None)
        self.vacuum()
        return True

    def last_written(self, session: str) -> float | None:
        """When the session was last written (Unix seconds, the server's clock: not an event's `ts`, which an import
        keeps from its file), or None when there is no such session."""
        validate_session_id(session)
        with self.db.connection() as conn:
            row = conn.execute(sql.LEDGER_WRITTEN, (session,)).fetchone()
        return None if row is None else float(row[0])

    def idle_sessions(self, before: float) -> list[str]:
        """The sessions last written before `before` (Unix time, by last_written)."""
        idle = []
        for session in self.sessions():
            written = self.last_written(session)
            if written is not None and written < before:
                idle.append(session)
        return idle

    @contextmanager
    def stored_lines(self, session: str, count: int) -> Iterator[tuple[int, Iterator[bytes]]]:
        """(bytes, the session's first `count` lines exactly as stored, joined into pieces of about STORED_CHUNK
        bytes), for a bundle (bundle.export): the lines from one snapshot (snapshot_lines, held while this is open),
        the bytes the session's when asked (a `remember` after its head was read adds lines beyond `count`, which are
        left out). StoredLinesChanged when the snapshot holds fewer."""
        size = self.size_bytes(session)
        with self.snapshot_lines(session) as lines:
            yield size, _counted(lines, count, session)

    def imports(self) -> PgImports:
        """The sessions imported from bundles into this database, each in a schema of its own (storage.pg.imports)."""
        from storage.pg.imports import PgImports

        return PgImports(self)

    def kept_elsewhere(self) -> str | None:
        """Where the record is kept, DATA_DIR holding only the key and caches: "PostgreSQL at <its shown name>"."""
        return f"PostgreSQL at {self.db.shown}"

    def vacuum(self) -> list[str]:
        """VACUUM the events table and the cut tails repairs kept (old row versions made unreachable); the tables
        PostgreSQL skipped (a role that does not own them: logged, see Database.vacuum)."""
        return self.db.vacuum([sql.LEDGER_VACUUM, sql.LEDGER_CUTS_VACUUM])


    # -- the storage contract (storage.api.LedgerStore), beside erase / delete_session / last_written / vacuum ----
    @property
    def location(self) -> str:
        """What tells this ledger's sessions from another deployment's (a process-wide cache's key)."""
        return f"postgresql:{self.db.shown}"

    def system_events(self, session: str, start: int, stop: int) -> list[Event]:
        """The session's role 'system' events with start <= seq < stop, in seq order, selected by the server."""
        from storage.pg.control_rows import system_events  # it imports this module

        return system_events(self, session, start, stop)

    def events_with_meta(self, session: str, key: str, value: str, start: int, stop: int) -> list[Event]:
        """The events with start <= seq < stop whose meta holds `key` == `value`, in seq order (issue 30): one statement
        returns the rows whose line holds the member's canonical bytes (ledger.canonical.member_bytes; no meta column:
        the line is the record), each parsed and kept when its meta has the member, as on files."""
        validate_session_id(session)
        start, stop = max(start, 0), min(stop, 1 << 62)
        if start >= stop:
            return []
        with self.db.connection() as conn:
            rows = conn.execute(sql.LEDGER_LINES_WITH_BYTES, (session, start, stop, member_bytes(key, value))).fetchall()
        out = []
        for seq, line in rows:
            obj = orjson.loads(bytes(line))
            meta = obj.get("meta")
            if type(meta) is dict and meta.get(key) == value:
                out.append(event_from_dict(obj, int(seq) + 1))
        return out

    def quarantined_with(self, session: str, wanted: Sequence[bytes]) -> list[str]:
        """Nothing is quarantined here: a row is committed whole."""
        return []

    def drop_erased_leftovers(self, session: str, seqs: Sequence[int], quarantine: Sequence[str]) -> tuple[int, tuple[str, ...]]:
        """Nothing: `erase` dropped the import records in its transaction, and nothing is quarantined."""
        return 0, ()

    def keep_journal(self, session: str, journal: bytes, certificate: bytes | None = None) -> Callable[[], None]:
        """Keep an erasure's journal as a row of `erasures_pending` (every replica sees it), with the certificate
        (hashes only) for the replica that finishes it; returns what marks it done."""
        token = os.urandom(16).hex()
        self.keep_pending(token, session, journal, certificate)
        return partial(self.erasure_done, token)

    def erase_journaled(
        self, session: str, seqs: Sequence[int], *, reason: str | None, journal: bytes, landed: Callable[[], bool]
    ) -> tuple[Erasure, Callable[[], None]]:
        """`erase` with its journal a row written in the erase's own transaction: there exactly when the ledger
        changed (`landed` is not needed). Returns the erasure and what marks the journal done."""
        token = os.urandom(16).hex()
        erasure = self.erase(session, list(seqs), reason=reason, pending=(token, journal))
        return erasure, partial(self.erasure_done, token)


def against_tail(report: SessionReport, size: int, head: str) -> SessionReport:
    """A walk's report held against the session's tail, (size, head) as its `sessions` row records them (pure):
    rows that end short of it (which a walk alone cannot see) are a seq_gap at the first missing seq."""
    if report.ok and (report.events, report.head) != (size, head):
        n = report.events
        brk = Break(
            n + 1, n, SEQ_GAP, f"{size} events, head {head}", f"{n} events, head {report.head}",
            f"line {n + 1}: the rows end at seq {n - 1} but the session's tail records {size} events",
        )
        return SessionReport(report.session, False, n, report.head, brk, erased=report.erased)
    return report


def _chunks(lines: Iterator[bytes], progress: Any, size: int = 1 << 20) -> Iterator[bytes]:
    """Lines joined into pieces of about `size` bytes, counted on `progress`."""
    buf: list[bytes] = []
    n = 0
    for line in lines:
        buf.append(line)
        n += len(line)
        if n >= size:
            if progress is not None:
                progress.update(n)
            yield b"".join(buf)
            buf, n = [], 0
    if buf:
        if progress is not None:
            progress.update(n)
        yield b"".join(buf)


STORED_CHUNK = 1024 * 1024  # bytes per piece of stored_lines


def _counted(lines: Iterator[bytes], count: int, session: str) -> Iterator[bytes]:
    """The first `count` lines, joined into pieces of about STORED_CHUNK bytes; StoredLinesChanged when there are fewer."""
    n = 0
    buf: list[bytes] = []
    held = 0
    for line in islice(lines, count):
        n += 1
        buf.append(line)
        held += len(line)
        if held >= STORED_CHUNK:
            yield b"".join(buf)
            buf, held = [], 0
    if n != count:
        raise StoredLinesChanged(f"session {session}: the database holds {n} lines, the ledger reports {count}")
    if buf:
        yield b"".join(buf)


__all__ = ["PgLedger", "against_tail", "block_rows"]
