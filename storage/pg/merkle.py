"""The producer's RFC 6962 tree on PostgreSQL: storage.files.receipts.merkle_store.MerkleStore's interface over rows.

`merkle_nodes` holds complete subtrees only, as MerkleStore's level files do: node (level, idx) covers leaves
[idx * 2^level, (idx + 1) * 2^level), is written once when complete and never changes, so every historical
tree of n <= size leaves is still described. root(n) reads popcount(n) nodes and a proof O(log n) nodes, all
in one query (receipts.merkle_nodes says which); nothing is rebuilt.

Concurrent appenders are serialised by a row lock: an append locks its session's `merkle_trees` row
(SELECT … FOR UPDATE) in its transaction, reads the size there, writes the new nodes and the new size, and
commits. So two replicas appending at once cannot interleave nodes. `extend(..., at=n)` appends only if the
tree still holds n leaves (else TreeMoved): a caller that read the ledger from leaf n never appends twice.
The engine also holds the session's turn lock around its appends (storage.pg.receipts.PgReceipts.turn_lock),
so in practice the row lock is never contended.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import islice
from typing import Any

import psycopg

from ledger.event import validate_session_id
from receipts.merkle import EMPTY_ROOT, leaf_hash
from receipts.merkle_nodes import (
    Node,
    appended_nodes,
    consistency_ranges,
    edge_nodes,
    fold,
    inclusion_ranges,
    nodes_of,
    subtree_nodes,
)
from storage.common.tree_errors import MerkleStoreError
from storage.pg import sql
from storage.pg.connect import Database

BATCH_LEAVES = 1 << 16  # leaves hashed and written per transaction: bounds memory during a large extend


class TreeMoved(MerkleStoreError):
    """extend(at=n) found a tree of another size: another writer appended (or truncated) first."""

    def __init__(self, session: str, expected: int, found: int) -> None:
        super().__init__(f"merkle tree of session {session}: expected {expected} leaves, found {found}: another writer moved it")
        self.expected, self.found = expected, found


class PgMerkleStore:
    """One session's append-only Merkle tree in PostgreSQL. Safe for many threads (each call is one transaction)."""

    def __init__(self, db: Database, session: str) -> None:
        self.db = db
        self.session = validate_session_id(session)
        self._closed = False

    def __repr__(self) -> str:
        return f"PgMerkleStore({self.db.shown!r}, {self.session!r})"

    def close(self) -> None:
        self._closed = True

    def __enter__(self) -> PgMerkleStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writes ---------------------------------------------------------------------------------

    def append(self, leaf_data: bytes, *, durable: bool = False) -> int:
        """Append one leaf (hashed with leaf_hash) and return its index. Every commit is durable."""
        return self._append([leaf_hash(leaf_data)], None)

    def extend(self, leaf_datas: Iterable[bytes], *, durable: bool = False, at: int | None = None) -> None:
        """Append many leaves, one transaction per BATCH_LEAVES. `at`: only onto a tree of exactly that many
        leaves (TreeMoved otherwise, nothing written by this batch)."""
        leaves = iter(leaf_datas)
        expected = at
        while batch := [leaf_hash(data) for data in islice(leaves, BATCH_LEAVES)]:
            start = self._append(batch, expected)
            expected = start + len(batch)

    def truncate(self, size: int) -> None:
        """Drop every leaf at index >= size (a ledger cut by a repair)."""
        self._require_open()
        if type(size) is not int or size < 0:
            raise ValueError(f"{self._where('truncate')}: tree size must be a non-negative integer, found {size!r}")
        with self.db.transaction() as conn:
            found = self._lock(conn)
            if size < found:
                conn.execute(sql.MERKLE_TRUNCATE, (size, self.session))
                conn.execute(sql.MERKLE_SET_SIZE, (size, self.session))

    def drop(self) -> None:
        """Delete the whole tree (its nodes and its size row)."""
        with self.db.transaction() as conn:
            conn.execute(sql.MERKLE_DELETE_NODES, (self.session,))
            conn.execute(sql.MERKLE_DELETE_TREE, (self.session,))

    def _append(self, hashes: Sequence[bytes], at: int | None) -> int:
        self._require_open()
        with self.db.transaction() as conn:
            size = self._lock(conn)
            if at is not None and size != at:
                raise TreeMoved(self.session, at, size)
            edge = self._fetch(conn, edge_nodes(size), size)
            rows = appended_nodes(size, hashes, edge)
            with conn.cursor().copy(sql.MERKLE_COPY_NODES) as copy:
                copy.set_types(sql.MERKLE_COPY_TYPES)
                for level, idx, h in rows:
                    copy.write_row((self.session, level, idx, h))
            conn.execute(sql.MERKLE_SET_SIZE, (size + len(hashes), self.session))
            return size

    def _lock(self, conn: psycopg.Connection[Any]) -> int:
        conn.execute(sql.MERKLE_NEW_TREE, (self.session,))
        row = conn.execute(sql.MERKLE_LOCK_TREE, (self.session,)).fetchone()
        assert row is not None
        return int(row[0])

    # --- reads ----------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        self._require_open()
        with self.db.connection() as conn:
            return self._size(conn)

    def leaf_hash(self, index: int) -> bytes:
        with self._reading() as (conn, size):
            self._require_index("leaf_hash", index, size)
            return self._fetch(conn, [(0, index)], size)[(0, index)]

    def root(self, n: int | None = None) -> bytes:
        """The root of the tree of the first n leaves (default: all); popcount(n) nodes in one query."""
        with self._reading() as (conn, size):
            n = self._require_size("root", n, size)
            if n == 0:
                return EMPTY_ROOT
            pieces = subtree_nodes(0, n)
            got = self._fetch(conn, pieces, size)
            return fold([got[p] for p in pieces])

    def inclusion_proof(self, index: int, n: int | None = None) -> list[bytes]:
        """RFC 9162 2.1.3.1 PATH(index, D[n]), leaf-up; O(log n) nodes in one query."""
        with self._reading() as (conn, size):
            n = self._require_size("inclusion_proof", n, size)
            self._require_index("inclusion_proof", index, n)
            return self._hashes(conn, inclusion_ranges(index, n), size)

    def inclusion_proofs(self, indexes: Iterable[int], n: int) -> dict[int, list[bytes]]:
        """inclusion_proof(i, n) of each index, every node read in one query (a receipt proves ten or more events)."""
        wanted = list(dict.fromkeys(indexes))
        with self._reading() as (conn, size):
            n = self._require_size("inclusion_proofs", n, size)
            for index in wanted:
                self._require_index("inclusion_proofs", index, n)
            ranges = {index: inclusion_ranges(index, n) for index in wanted}
            got = self._fetch(conn, nodes_of([r for rs in ranges.values() for r in rs]), size)
        return {index: [fold([got[p] for p in subtree_nodes(lo, hi)]) for lo, hi in rs] for index, rs in ranges.items()}

    def consistency_proof(self, m: int, n: int | None = None) -> list[bytes]:
        """RFC 9162 2.1.4.1 PROOF(m, D[n]); O(log n) nodes in one query. Requires 0 < m <= n."""
        with self._reading() as (conn, size):
            n = self._require_size("consistency_proof", n, size)
            if type(m) is not int or not 0 < m <= n:
                raise ValueError(f"{self._where('consistency_proof')}: expected 0 < m <= {n}, found m={m!r}")
            return self._hashes(conn, consistency_ranges(m, n), size)

    def _hashes(self, conn: psycopg.Connection[Any], ranges: Sequence[tuple[int, int]], size: int) -> list[bytes]:
        got = self._fetch(conn, nodes_of(ranges), size)
        return [fold([got[p] for p in subtree_nodes(lo, hi)]) for lo, hi in ranges]

    @contextmanager
    def _reading(self) -> Iterator[tuple[psycopg.Connection[Any], int]]:
        """A connection and the tree's size, read in the same transaction as the nodes after it."""
        self._require_open()
        with self.db.transaction() as conn:
            yield conn, self._size(conn)

    def _size(self, conn: psycopg.Connection[Any]) -> int:
        row = conn.execute(sql.MERKLE_SIZE, (self.session,)).fetchone()
        return 0 if row is None else int(row[0])

    def _fetch(self, conn: psycopg.Connection[Any], nodes: Sequence[Node], size: int) -> dict[Node, bytes]:
        if not nodes:
            return {}
        rows = conn.execute(sql.MERKLE_NODES, ([lv for lv, _ in nodes], [i for _, i in nodes], self.session)).fetchall()
        got = {(int(lv), int(i)): bytes(h) for lv, i, h in rows}
        missing = [n for n in nodes if n not in got]
        if missing:
            level, idx = missing[0]
            raise MerkleStoreError(
                f"{self._where('read')}: level {level} node {idx} is missing from a tree of {size} leaves "
                f"({len(missing)} of {len(nodes)} nodes missing); drop the tree to rebuild it from the ledger"
            )
        return got

    # --- argument checks ------------------------------------------------------------------------

    def _where(self, operation: str) -> str:
        return f"merkle tree of session {self.session} (PostgreSQL): {operation}"

    def _require_open(self) -> None:
        if self._closed:
            raise MerkleStoreError(f"{self._where('use')}: store is closed")

    def _require_size(self, operation: str, n: int | None, size: int) -> int:
        if n is None:
            return size
        if type(n) is not int or not 0 <= n <= size:
            raise ValueError(f"{self._where(operation)}: tree size out of range: expected 0..{size}, found {n!r}")
        return n

    def _require_index(self, operation: str, index: int, n: int) -> None:
        if type(index) is not int or not 0 <= index < n:
            raise ValueError(f"{self._where(operation)}: index out of range: expected 0 <= index < {n}, found {index!r}")


__all__ = ["BATCH_LEAVES", "PgMerkleStore", "TreeMoved"]
