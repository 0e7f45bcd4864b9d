"""The seam between the turn engine and where receipts, the producer's tree and checkpoints are kept.

Two backends present these interfaces: the files in DATA_DIR (storage.files.receipts.file_backend.FileBackend, over
storage.files.receipts.files, storage.files.receipts.merkle_store and receipts.checkpoints) and PostgreSQL (storage.pg.receipts.PgReceipts).
The engine and the control commands are handed a `ReceiptBackend` and never learn which; formats are the same
on both (a receipt is the exact bytes of its file, a checkpoint the exact bytes of checkpoint.json).

- `MerkleTree`: what a producer's tree answers (MerkleStore, storage.pg.merkle.PgMerkleStore);
- `TreeSource`: what a tree is brought level with (ledger.Ledger, storage.pg.ledger.PgLedger);
- `ReceiptBackend`: the session's turn lock, the tree, receipt envelopes, the `.cites` records a turn leaves
  before its answer is appended, and the latest signed checkpoint;
- `ReceiptRows`: the derived `receipts` / `receipt_cites` rows (index.sqlite's tables in the file backend,
  which chat.citing reaches through the index; PostgreSQL tables in the other).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from ledger import Event
from receipts.keys import SigningKey


class ReceiptNotFound(FileNotFoundError):
    """No receipt of that id in that session (a FileNotFoundError, as a missing file is, so callers that catch
    OSError for a missing receipt file keep working on either backend)."""


@dataclass(frozen=True, slots=True)
class PendingCites:
    """A `.cites` record: what a turn handed the model, written before its answer was appended."""

    receipt_id: str
    question_seq: int
    memory_seqs: tuple[int, ...]


class MerkleTree(Protocol):
    """A producer's RFC 6962 tree over a session's event digests (leaf data = raw digest bytes)."""

    @property
    def size(self) -> int: ...

    def leaf_hash(self, index: int) -> bytes: ...

    def root(self, n: int | None = None) -> bytes: ...

    def inclusion_proof(self, index: int, n: int | None = None) -> list[bytes]: ...

    def inclusion_proofs(self, indexes: Iterable[int], n: int) -> dict[int, list[bytes]]: ...

    def consistency_proof(self, m: int, n: int | None = None) -> list[bytes]: ...

    def close(self) -> None: ...


class TreeSource(Protocol):
    """What a producer's tree is kept level with: the session's ledger."""

    def head(self, session: str) -> tuple[int, str]: ...

    def read_events(self, session: str, seqs: Iterable[int]) -> list[Event]: ...


class ReceiptBackend(Protocol):
    """Where one deployment keeps receipts, trees and checkpoints. Safe for many threads."""

    def turn_lock(self, session: str) -> AbstractContextManager[None]:
        """Serialise the turns of one session (across threads, processes and, on PostgreSQL, replicas)."""
        ...

    def synced_tree(self, ledger: TreeSource, session: str) -> MerkleTree:
        """The session's tree brought level with the ledger (caller holds the turn lock); close it after."""
        ...

    def drop_tree(self, session: str) -> None:
        """Forget the session's tree (rebuilt from the ledger next time): after a repair cut the ledger."""
        ...

    def write_receipt(self, session: str, receipt_id: str, envelope: Mapping[str, Any]) -> str:
        """Store a receipt durably (complete or not at all) as receipts.body.dump_file's bytes; where it is."""
        ...

    def replace_receipt(self, session: str, receipt_id: str, data: bytes) -> None:
        """Rewrite a stored receipt with these exact bytes (a redaction); ReceiptNotFound if it is not there."""
        ...

    def read_receipt(self, session: str, receipt_id: str) -> bytes:
        """The receipt's exact bytes; ReceiptNotFound, or ValueError over receipts.body.MAX_RECEIPT_BYTES."""
        ...

    def receipt_ids(self, session: str) -> list[str]:
        """The session's receipt ids, oldest first."""
        ...

    def delete_receipt(self, session: str, receipt_id: str) -> None:
        """Withdraw a receipt (idempotent)."""
        ...

    def write_cites(self, session: str, receipt_id: str, question_seq: int, memory_seqs: Sequence[int]) -> None:
        """Durably note what a turn handed the model, before its answer is appended (seqs only, no text)."""
        ...

    def drop_cites(self, session: str, receipt_id: str) -> None:
        """The receipt says it now (idempotent)."""
        ...

    def pending_cites(self, session: str) -> list[PendingCites]:
        """The `.cites` records still held (turns killed before their receipt, receipts that failed)."""
        ...

    def issue_checkpoint(
        self, ledger: TreeSource, session: str, key: SigningKey, *, allow_shrink: bool = False, durable: bool = True
    ) -> dict[str, Any]:
        """Sign a checkpoint over the session as the ledger has it now and keep it as the latest (caller holds the
        turn lock). `allow_shrink`: a repair cut the ledger, so a smaller tree's checkpoint replaces a larger one."""
        ...

    def keep_checkpoint(self, session: str, checkpoint: Mapping[str, Any], *, allow_shrink: bool = False, durable: bool = True) -> bool:
        """Make `checkpoint` the session's latest unless a larger tree's is already kept (then False: a slower
        writer never moves it backwards). `allow_shrink`: a repair cut the ledger, the smaller one is right."""
        ...

    def latest_checkpoint(self, session: str) -> dict[str, Any] | None:
        """The latest signed checkpoint (parsed strictly: receipts.checkpoints.parse_checkpoint), or None."""
        ...

    def forget_session(self, session: str) -> None:
        """Delete the session's receipts, cites records, tree and checkpoint (idempotent)."""
        ...

    def stored_receipts(self, session: str) -> list[tuple[str, Callable[[], bytes]]]:
        """(file name `<receipt id>.json`, read its exact bytes) of every stored receipt of the session, by name: a
        bundle's members (bundle.export). A read that fails on PostgreSQL raises ReceiptUnreadable."""
        ...

    def proposals(self, ttl: int) -> ProposalStore:
        """Where the deployment's consent proposals wait (chat.consent; `ttl`: the tokens' lifetime in seconds):
        DATA_DIR/proposals/ on files, tables every replica shares on PostgreSQL."""
        ...


class ReceiptRows(Protocol):
    """The derived rows: one per receipt, and per answer the seqs its turn cited (chat.citing)."""

    def record_row(self, session: str, receipt_id: str, where: str, body: Mapping[str, Any]) -> None: ...

    def record_cites(self, session: str, receipt_id: str, answer_seq: int, cited: Iterable[int]) -> None: ...

    def citing_answers(self, session: str, seqs: Collection[int]) -> list[tuple[int, int]]: ...

    def answered(self, session: str, after_seq: int) -> set[int]: ...

    def forget_rows(self, session: str, receipt_ids: Sequence[str] | None = None) -> None: ...

    def derived_generation(self) -> int | None:
        """The generation of the derived tables, which changes when they start empty again (the file backend's index
        file opened anew); None when the rows are the record and never start over (PostgreSQL)."""
        ...

    def restore_derived(self) -> int | None:
        """Refill the rows derived from the receipt files when they were never filled (an index rebuilt, moved aside);
        the generation at which they are whole, or None when the rows are the record (nothing to refill)."""
        ...


class ProposalStore(Protocol):
    """Where consent proposals wait (chat.consent): the file backend's DATA_DIR/proposals/
    (storage.files.receipts.file_backend.FileProposals) or PostgreSQL (storage.pg.consent.PgProposals)."""

    def secret(self) -> bytes:
        """The deployment's 32-byte MAC key, made on first use and the same ever after (for every replica).
        ValueError (files) or storage.BackendError (PostgreSQL) when what is kept is not one."""
        ...

    def save(self, session: str, nonce: str, pending: dict[str, Any]) -> None: ...

    def load(self, nonce: str) -> dict[str, Any] | None:
        """The waiting proposal, None when there is none (spent, swept or never made); ValueError when it cannot be
        read."""
        ...

    def spend(self, nonce: str, how: str) -> bool:
        """Atomically end the waiting proposal as `how` (used, cancelled, expired); False when it was not waiting."""
        ...

    def spent(self, nonce: str) -> str | None: ...

    def sweep(self, now: float) -> None: ...

    def forget_session(self, session: str) -> None:
        """Every proposal of the session, waiting or spent, gone (the session is being deleted)."""
        ...


def row_values(body: Mapping[str, Any]) -> dict[str, Any]:
    """The `receipts` row's columns read from a receipt body (chat.engine's `_record` writes the same)."""
    return {
        "issued_at": body["issued_at"],
        "user_seq": body["query"]["event"]["seq"],
        "assistant_seq": body["response"]["event"]["seq"],
        "tree_size": body["checkpoint"]["body"]["tree_size"],
        "root": body["checkpoint"]["body"]["root"],
        "memories": len(body["memories"]),
        "provider": body["response"]["provider"],
        "model": body["response"]["model"],
    }


IMPORTED = "imported"  # DATA_DIR/imported/: imported sessions' folders on files, and every import's staging folder


@dataclass(frozen=True, slots=True)
class Origin:
    """Where an imported session came from (docs/FORMAT.md §21): `origin.json` of its folder on files, its
    `bundle_imports` row on PostgreSQL (bundle.importer re-exports it)."""

    local: str
    session: str  # the bundle's session id (its events carry it)
    signer: str
    events: int
    chain_head: str
    bundle_sha256: str
    verdict: str  # "verified", or "unverified" (imported with allow_untrusted)
    imported_at: str


class ReceiptUnreadable(ValueError):
    """A stored receipt could not be read (ReceiptBackend.stored_receipts; one line naming session and receipt)."""


class ImportFailed(ValueError):
    """A store could not take an imported session, or has no such import; one line (bundle.importer says it as a
    BundleError)."""


def cited_seqs(body: Mapping[str, Any]) -> tuple[int, list[int]]:
    """(the answer's seq, the seqs its turn handed the model: its question, then its memories) of a receipt body:
    one receipt's `receipt_cites` rows."""
    answer = body["response"]["event"]["seq"]
    return answer, [body["query"]["event"]["seq"], *(m["event"]["seq"] for m in body["memories"])]


__all__ = [
    "IMPORTED",
    "ImportFailed",
    "MerkleTree",
    "Origin",
    "PendingCites",
    "ProposalStore",
    "ReceiptBackend",
    "ReceiptNotFound",
    "ReceiptRows",
    "ReceiptUnreadable",
    "TreeSource",
    "cited_seqs",
    "row_values",
]
