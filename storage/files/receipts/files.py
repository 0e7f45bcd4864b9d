"""Receipt files and the producer's Merkle tree on disk (I/O).

- DATA_DIR/sessions/<session>/receipts/<receipt_id>.json — the DSSE envelope,
  written durably (temp file, fsync, rename, fsync of the folder);
- a `receipts` row in index.sqlite per receipt (derived: the files are the truth), and `receipt_cites`
  rows: per answer, the seqs its turn handed the model (derived from the receipts and the `.cites` records);
- DATA_DIR/merkle/<session>/ — the producer's persisted tree over the session's
  event digests, kept in step with the ledger (derived data too).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from ledger.event import validate_session_id
from ledger.locks import KeyedLocks
from receipts.body import MAX_RECEIPT_BYTES, RECEIPT_ID_RE
from receipts.stores import TreeSource
from storage.common.fsmode import open_private, private_dir, replace_durable
from storage.common.tree_check import leaf_matches
from storage.files.receipts.merkle_store import MerkleStore

RECEIPTS_DDL = """
CREATE TABLE IF NOT EXISTS receipts (
    receipt_id TEXT PRIMARY KEY,
    session TEXT NOT NULL,
    issued_at TEXT NOT NULL,
    path TEXT NOT NULL,
    user_seq INTEGER NOT NULL,
    assistant_seq INTEGER NOT NULL,
    tree_size INTEGER NOT NULL,
    root TEXT NOT NULL,
    memories INTEGER NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS receipts_by_session ON receipts(session, assistant_seq);
CREATE TABLE IF NOT EXISTS receipt_cites (
    session TEXT NOT NULL,
    cited_seq INTEGER NOT NULL,     -- the question or a memory the turn handed the model
    answer_seq INTEGER NOT NULL,    -- the answer of that turn
    receipt_id TEXT NOT NULL,
    PRIMARY KEY (session, cited_seq, answer_seq)
) WITHOUT ROWID;
"""
MAX_CITED_QUERY = 500  # seqs per lookup in citing_answers (SQLite's bound parameters)


class Sql(Protocol):
    """What the cites helpers need of a connection (sqlite3.Connection, or sqlite_utils.Database)."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Any: ...


def record_cites(db: Sql, session: str, receipt_id: str, answer_seq: int, cited: Iterable[int]) -> None:
    """Note that the answer at `answer_seq` was written from the events at `cited` (its question and memories)."""
    for seq in sorted(set(cited)):
        db.execute(
            "INSERT OR IGNORE INTO receipt_cites (session, cited_seq, answer_seq, receipt_id) VALUES (?, ?, ?, ?)",
            [session, seq, answer_seq, receipt_id],
        )


def citing_answers(db: Sql, session: str, seqs: Collection[int]) -> list[tuple[int, int]]:
    """(cited seq, answer seq) for every answer of `session` whose turn cited one of `seqs`."""
    wanted = sorted(set(seqs))
    out: list[tuple[int, int]] = []
    for i in range(0, len(wanted), MAX_CITED_QUERY):
        part = wanted[i : i + MAX_CITED_QUERY]
        marks = ", ".join("?" for _ in part)
        rows = db.execute(
            f"SELECT cited_seq, answer_seq FROM receipt_cites WHERE session = ? AND cited_seq IN ({marks})", [session, *part]
        ).fetchall()
        out += [(int(r[0]), int(r[1])) for r in rows]
    return out


def forget_rows(db: Sql, session: str, receipt_ids: Sequence[str] | None = None) -> None:
    """Drop the derived rows of a session (or of these receipts of it): a deleted session, withdrawn receipts."""
    if receipt_ids is None:
        db.execute("DELETE FROM receipts WHERE session = ?", [session])
        db.execute("DELETE FROM receipt_cites WHERE session = ?", [session])
        return
    for i in range(0, len(receipt_ids), MAX_CITED_QUERY):
        part = list(receipt_ids[i : i + MAX_CITED_QUERY])
        marks = ", ".join("?" for _ in part)
        db.execute(f"DELETE FROM receipts WHERE receipt_id IN ({marks})", part)
        db.execute(f"DELETE FROM receipt_cites WHERE session = ? AND receipt_id IN ({marks})", [session, *part])

_locks = KeyedLocks()  # per (data dir, session), while a turn holds or waits for it


def receipt_path(data_dir: Path, session: str, receipt_id: str) -> Path:
    validate_session_id(session)
    if not RECEIPT_ID_RE.fullmatch(receipt_id):
        raise ValueError(f"receipt id {receipt_id!r} is not valid")
    return data_dir / "sessions" / session / "receipts" / f"{receipt_id}.json"


def write_receipt(data_dir: Path, session: str, receipt_id: str, envelope: dict[str, Any]) -> Path:
    """Write a receipt durably; it exists complete or not at all."""
    path = receipt_path(data_dir, session, receipt_id)
    folder = path.parent
    created = not folder.is_dir()
    private_dir(folder)
    data = (json.dumps(envelope, indent=2, sort_keys=True) + "\n").encode("utf-8")
    tmp = folder / f".{receipt_id}.tmp"
    fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    for d in ([folder, folder.parent] if created else [folder]):
        dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    return path


def cites_path(data_dir: Path, session: str, receipt_id: str) -> Path:
    """`receipts/<receipt_id>.cites`: what a turn handed the model, kept until its receipt is in place."""
    return receipt_path(data_dir, session, receipt_id).with_suffix(".cites")


def write_cites(data_dir: Path, session: str, receipt_id: str, question_seq: int, memory_seqs: list[int]) -> Path:
    """Record, durably and before the answer is appended, which events a turn handed the model (seqs only: no
    text). The receipt says it once written; until then (a turn killed between the answer's append and its
    receipt, or a receipt that could not be written) this is the only record of what the answer may quote, and
    an erasure cascades through it (control.steps.citations)."""
    path = cites_path(data_dir, session, receipt_id)
    private_dir(path.parent)
    replace_durable(path, json.dumps({"question": question_seq, "memories": memory_seqs}, sort_keys=True).encode("ascii"))
    return path


def read_cites(path: Path) -> tuple[int, list[int]] | None:
    """(question seq, memory seqs) of a `.cites` file; None when it is unreadable or not one."""
    try:
        if path.stat().st_size > 64 * 1024:
            return None
        obj = json.loads(path.read_bytes())
        q, mems = obj["question"], obj["memories"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    ok = type(q) is int and q >= 0 and isinstance(mems, list) and all(type(m) is int and m >= 0 for m in mems)
    return (q, list(mems)) if ok else None


def list_cites(data_dir: Path, session: str) -> list[Path]:
    folder = data_dir / "sessions" / validate_session_id(session) / "receipts"
    return sorted(folder.glob("rcpt_*.cites")) if folder.is_dir() else []


def read_receipt_bytes(path: Path) -> bytes:
    """A receipt file's bytes, refusing files over the size cap without reading them."""
    size = path.stat().st_size
    if size > MAX_RECEIPT_BYTES:
        raise ValueError(f"{path}: {size} bytes is over the {MAX_RECEIPT_BYTES}-byte receipt limit")
    return path.read_bytes()


def list_receipts(data_dir: Path, session: str) -> list[Path]:
    folder = data_dir / "sessions" / validate_session_id(session) / "receipts"
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.glob("rcpt_*.json")), key=lambda p: p.stat().st_mtime_ns)


@contextmanager
def session_turn_lock(data_dir: Path, session: str) -> Iterator[None]:
    """Serialise turns of one session across threads and processes."""
    validate_session_id(session)
    with _locks.held(f"{data_dir}:{session}"):
        folder = data_dir / "merkle"
        path = folder / f"{session}.lock"
        while True:
            private_dir(folder)
            fd = open_private(path, os.O_RDWR | os.O_CREAT)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                os.close(fd)
                raise
            # a session's deletion unlinks its lock file while holding it: a process that was waiting on the old file
            # must not go on while the next one locks a new file at the same path — take the lock again on the path's file
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        try:
            yield
        finally:
            os.close(fd)


def synced_tree(data_dir: Path, ledger: TreeSource, session: str) -> MerkleStore:
    """The producer's tree for a session, brought level with the ledger (caller holds the turn lock).

    Leaves are the raw event digests. A tree that is ahead of the ledger, or
    whose last leaf disagrees with the ledger, is rebuilt from the ledger.
    """
    count, _head = ledger.head(session)
    folder = data_dir / "merkle" / validate_session_id(session)
    store = MerkleStore(folder)
    if store.size > count or (0 < store.size and not leaf_matches(store, ledger, session, store.size - 1)):
        store.truncate(0)
    if store.size < count:
        missing = range(store.size, count)
        for start in range(missing.start, missing.stop, 4096):
            seqs = range(start, min(start + 4096, missing.stop))
            store.extend(bytes.fromhex(ev.digest) for ev in ledger.read_events(session, seqs))
    return store


