"""The file backend behind receipts.stores.ReceiptBackend: DATA_DIR's receipt files, Merkle folders and
checkpoint.json, through the functions that write them (receipts.files, receipts.checkpoints) — same paths,
same bytes, same locks; IndexRows, receipts.stores.ReceiptRows over index.sqlite. `issue` signs and keeps a
checkpoint on any backend.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol

from ledger.event import now_ts, validate_session_id
from receipts import checkpoints, files
from receipts.body import sign_checkpoint
from receipts.keys import SigningKey
from receipts.stores import MerkleTree, PendingCites, ReceiptBackend, ReceiptNotFound, TreeSource, row_values

RECEIPT_TEMP_PREFIX = ".rcpt_"  # receipts.files.write_receipt's `.<id>.tmp`, write_durable's `.<id>.json.tmp`


class FileBackend:
    """Receipts, trees and checkpoints as files under one data directory (the embedded default)."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.data_dir = Path(data_dir)

    def __repr__(self) -> str:
        return f"FileBackend({str(self.data_dir)!r})"

    @contextmanager
    def turn_lock(self, session: str) -> Iterator[None]:
        with files.session_turn_lock(self.data_dir, session):
            yield

    def synced_tree(self, ledger: TreeSource, session: str) -> MerkleTree:
        return files.synced_tree(self.data_dir, ledger, session)

    def drop_tree(self, session: str) -> None:
        shutil.rmtree(self.data_dir / "merkle" / validate_session_id(session), ignore_errors=True)

    def write_receipt(self, session: str, receipt_id: str, envelope: Mapping[str, Any]) -> str:
        return str(files.write_receipt(self.data_dir, session, receipt_id, dict(envelope)))

    def replace_receipt(self, session: str, receipt_id: str, data: bytes) -> None:
        path = files.receipt_path(self.data_dir, session, receipt_id)
        if not path.is_file():
            raise ReceiptNotFound(f"session {session}: no receipt {receipt_id}")
        from ledger.fsmode import replace_durable

        replace_durable(path, data)

    def read_receipt(self, session: str, receipt_id: str) -> bytes:
        path = files.receipt_path(self.data_dir, session, receipt_id)
        try:
            return files.read_receipt_bytes(path)
        except FileNotFoundError:
            raise ReceiptNotFound(f"session {session}: no receipt {receipt_id}") from None

    def receipt_ids(self, session: str) -> list[str]:
        return [p.stem for p in files.list_receipts(self.data_dir, session)]

    def delete_receipt(self, session: str, receipt_id: str) -> None:
        files.receipt_path(self.data_dir, session, receipt_id).unlink(missing_ok=True)

    def write_cites(self, session: str, receipt_id: str, question_seq: int, memory_seqs: Sequence[int]) -> None:
        files.write_cites(self.data_dir, session, receipt_id, question_seq, list(memory_seqs))

    def drop_cites(self, session: str, receipt_id: str) -> None:
        files.cites_path(self.data_dir, session, receipt_id).unlink(missing_ok=True)

    def pending_cites(self, session: str) -> list[PendingCites]:
        out = []
        for path in files.list_cites(self.data_dir, session):
            got = files.read_cites(path)
            if got is not None:
                out.append(PendingCites(path.stem, got[0], tuple(got[1])))
        return out

    def keep_checkpoint(self, session: str, checkpoint: Mapping[str, Any], *, allow_shrink: bool = False) -> bool:
        if not allow_shrink:
            try:
                kept = checkpoints.latest(self.data_dir, session)
            except (checkpoints.MalformedCheckpoint, OSError):
                kept = None  # an unreadable one is replaced, as `keep` always did
            if kept is not None and kept["body"]["tree_size"] > checkpoint["body"]["tree_size"]:
                return False
        checkpoints.keep(self.data_dir, session, checkpoint)
        return True

    def latest_checkpoint(self, session: str) -> dict[str, Any] | None:
        return checkpoints.latest(self.data_dir, session)

    def forget_session(self, session: str) -> None:
        validate_session_id(session)
        for path in (self.data_dir / "sessions" / session / "receipts", self.data_dir / "merkle" / session):
            shutil.rmtree(path, ignore_errors=True)
        checkpoints.checkpoint_path(self.data_dir, session).unlink(missing_ok=True)

    # -- the storage contract (storage.api.ReceiptStore) ---------------------------------------------------------
    def sync_deletes(self, session: str) -> None:
        """Make the receipts deleted so far durable (their folder fsynced) before a certificate says they went."""
        from ledger.fsmode import fsync_dir

        folder = self.data_dir / "sessions" / validate_session_id(session) / "receipts"
        if folder.is_dir():
            fsync_dir(folder)

    def scrub_temps(self, session: str) -> tuple[str, ...]:
        """Receipt temp files a crash left in the session's receipts folder, overwritten and removed; their names
        (as `receipts/<name>`). Receipts are written under the session's turn lock, which the caller holds: any temp
        file there is an orphan, and one from a turn killed before its rename holds the cited memories' words whole."""
        from ledger.scrub import scrub_prefixed

        folder = self.data_dir / "sessions" / validate_session_id(session) / "receipts"
        return tuple(f"receipts/{n}" for n in scrub_prefixed(folder, RECEIPT_TEMP_PREFIX, suffix=".tmp"))

    def vacuum(self) -> list[str]:
        """Nothing to do: a receipt file is replaced by rename (PostgreSQL VACUUMs its receipt tables)."""
        return []

    def unlink_lock(self, session: str) -> None:
        """The turn lock's file (receipts.files), once its session is deleted; the caller holds the lock."""
        (self.data_dir / "merkle" / f"{validate_session_id(session)}.lock").unlink(missing_ok=True)


class _IndexDb(Protocol):
    """What IndexRows needs of retrieval.Index: its write and read connections (index.sqlite)."""

    def write(self) -> AbstractContextManager[files.Sql]: ...

    def read(self) -> AbstractContextManager[files.Sql]: ...


class IndexRows:
    """receipts.stores.ReceiptRows over the file backend's index.sqlite tables (receipts.files.RECEIPTS_DDL, which
    the caller has ensured): the same statements chat.engine and chat.citing write through the index today."""

    def __init__(self, index: _IndexDb) -> None:
        self.index = index

    def record_row(self, session: str, receipt_id: str, where: str, body: Mapping[str, Any]) -> None:
        v = row_values(body)
        with self.index.write() as db:
            db.execute(
                "INSERT OR REPLACE INTO receipts (receipt_id, session, issued_at, path, user_seq, assistant_seq, tree_size, root, memories, provider, model)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [receipt_id, session, v["issued_at"], where, v["user_seq"], v["assistant_seq"], v["tree_size"], v["root"], v["memories"], v["provider"], v["model"]],
            )

    def record_cites(self, session: str, receipt_id: str, answer_seq: int, cited: Iterable[int]) -> None:
        with self.index.write() as db:
            files.record_cites(db, session, receipt_id, answer_seq, cited)

    def citing_answers(self, session: str, seqs: Collection[int]) -> list[tuple[int, int]]:
        with self.index.read() as conn:
            return files.citing_answers(conn, session, seqs)

    def answered(self, session: str, after_seq: int) -> set[int]:
        """The answers after `after_seq` whose turn's cites are recorded."""
        with self.index.read() as conn:
            rows = conn.execute(
                "SELECT DISTINCT answer_seq FROM receipt_cites WHERE session = ? AND answer_seq > ?", (session, after_seq)
            ).fetchall()
        return {int(r[0]) for r in rows}

    def forget_rows(self, session: str, receipt_ids: Sequence[str] | None = None) -> None:
        with self.index.write() as db:
            files.forget_rows(db, session, receipt_ids)


def issue(backend: ReceiptBackend, ledger: TreeSource, session: str, key: SigningKey, *, allow_shrink: bool = False) -> dict[str, Any]:
    """Sign a checkpoint over the session as it is now and keep it as the latest, on any ReceiptBackend.

    The caller holds backend.turn_lock(session) and has just appended (receipts.checkpoints.issue is the
    file backend's, by path). `allow_shrink`: a repair cut the ledger, so the smaller tree's checkpoint replaces
    a larger one (backend.keep_checkpoint's)."""
    count, head = ledger.head(session)
    if count == 0:
        raise ValueError(f"session {session}: no events to sign a checkpoint over")
    tree = backend.synced_tree(ledger, session)
    try:
        if tree.size != count:
            raise ValueError(f"session {session}: Merkle tree holds {tree.size} leaves, the ledger {count} events")
        cp = sign_checkpoint(session=session, tree_size=count, root=tree.root(count), chain_head=head, issued_at=now_ts(), key=key)
    finally:
        tree.close()
    backend.keep_checkpoint(session, cp, allow_shrink=allow_shrink)
    return cp


__all__ = ["FileBackend", "IndexRows", "issue"]
