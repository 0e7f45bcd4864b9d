"""A persisted, append-only RFC 6962 Merkle tree: one file of 32-byte node hashes per level.

Layout of the directory given to ``MerkleStore`` (e.g. ``DATA_DIR/merkle/<session>/``)::

    FORMAT        one line naming the layout and hash; an unknown line is refused
    level-00.bin  leaf hashes, leaf_hash(data), 32 bytes each, in leaf order
    level-01.bin  hashes of complete 2-leaf subtrees
    level-LL.bin  node i covers leaves [i * 2^L, (i + 1) * 2^L), written once complete

Only complete (perfect) subtrees are stored, and they never change, so any
historical tree of size n <= size is still fully described by the files. Its
root, and every node of an inclusion or consistency proof, is either one stored
node or a right-edge subtree folded from at most log2(n) stored nodes: root(n)
reads popcount(n) nodes, and a proof reads O(log n) nodes. Nothing is rebuilt.

Everything above level 0 is derived from level 0, and level 0 is derived from the
ledger (callers append event digests as leaf data). Opening therefore heals
instead of failing: a torn last record (file length not a multiple of 32) is
cut off, upper levels ahead of what level 0 supports are truncated, and missing
upper nodes are recomputed from the level below. A crash can still lose the last
leaves, so after opening, the caller compares ``size`` with its ledger and
appends what is missing (or calls ``truncate`` if the store is ahead).

Concurrency: one process owns a store directory. Within it, every public method
takes an internal lock, so threads may share an instance; callers that need
"append then read back my index" to be atomic must still serialise their writes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from itertools import islice
from pathlib import Path
from types import TracebackType

from receipts.merkle import EMPTY_ROOT, HASH_SIZE, leaf_hash, node_hash, split_point
from storage.common.fsmode import open_private, private_dir, write_private
from storage.common.fsmode import write_all as _write_all
from storage.common.tree_errors import MerkleStoreError

FORMAT_FILE = "FORMAT"
FORMAT_LINE = b"merkle-store v1: rfc6962 sha256, one file of 32-byte nodes per level\n"
# Leaves hashed and written per batch: bounds memory during a large extend.
BATCH_LEAVES = 1 << 16


def level_file_name(level: int) -> str:
    return f"level-{level:02d}.bin"


class MerkleStore:
    """An append-only Merkle tree persisted under ``directory`` (created if missing)."""

    def __init__(self, directory: Path) -> None:
        self._dir = Path(directory)
        self._lock = threading.Lock()
        self._fds: list[int] = []  # index = level
        self._counts: list[int] = []  # complete nodes per level, always == file length / 32
        self._dir_dirty = False  # a level file was created since the last directory fsync
        self._closed = False
        private_dir(self._dir)
        self._check_format()
        try:
            self._open_existing_levels()
            self._heal()
        except BaseException:
            self._close_fds()
            raise

    # --- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._close_fds()

    def __enter__(self) -> MerkleStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MerkleStore({str(self._dir)!r}, size={self._counts[0] if self._counts else 0})"

    # --- writes ---------------------------------------------------------------------------------

    def append(self, leaf_data: bytes, *, durable: bool = False) -> int:
        """Append one leaf (hashed with leaf_hash) and return its index."""
        with self._lock:
            self._require_open()
            index = self._size()
            self._append_batch([leaf_hash(leaf_data)])
            if durable:
                self._sync()
            return index

    def extend(self, leaf_datas: Iterable[bytes], *, durable: bool = False) -> None:
        """Append many leaves, writing each level's new nodes in one write per batch of BATCH_LEAVES.

        Each batch is all-or-nothing while the process lives (a failed write is rolled
        back); an exception part-way through a long iterable keeps the earlier batches.
        """
        with self._lock:
            self._require_open()
            leaves = iter(leaf_datas)
            while batch := [leaf_hash(data) for data in islice(leaves, BATCH_LEAVES)]:
                self._append_batch(batch)
            if durable:
                self._sync()

    def load_levels(self, levels: Sequence[bytes], *, durable: bool = False) -> None:
        """Fill an empty store with a whole tree computed elsewhere (receipts/audit_parallel.py).

        ``levels[0]`` is the leaf hashes (leaf_hash already applied), ``levels[L]`` every complete node of
        level L in order: exactly ``n >> L`` nodes for a tree of ``n`` leaves, one level per bit of ``n``.
        The caller vouches that each node is the hash of its two children (it computed them); the store
        checks only the shape, as it does not re-derive what it stores on append either.
        """
        with self._lock:
            self._require_open()
            if self._size() or any(self._counts):
                raise ValueError(f"{self._where('load_levels')}: the store is not empty")
            n = len(levels[0]) // HASH_SIZE if levels else 0
            if len(levels) != n.bit_length() or any(len(nodes) != HASH_SIZE * (n >> i) for i, nodes in enumerate(levels)):
                raise ValueError(f"{self._where('load_levels')}: levels do not describe a tree of {n} leaves")
            try:
                self._ensure_levels(len(levels))
                for level, nodes in enumerate(levels):
                    _write_all(self._fds[level], nodes)
                    self._counts[level] = len(nodes) // HASH_SIZE
            except BaseException:
                self._roll_back([0] * len(self._fds))
                raise
            if durable:
                self._sync()

    def flush(self) -> None:
        """fsync every level file (level 0 first) and the directory."""
        with self._lock:
            self._require_open()
            self._sync()

    def truncate(self, size: int) -> None:
        """Drop every leaf at index >= size, e.g. to match a ledger that lost its tail in a crash."""
        with self._lock:
            self._require_open()
            size = self._require_size("truncate", size)
            for level in reversed(range(len(self._fds))):  # top first: lower levels stay a superset
                self._truncate_level(level, size >> level)

    # --- reads ----------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        with self._lock:
            self._require_open()
            return self._size()

    def leaf_hash(self, index: int) -> bytes:
        with self._lock:
            self._require_open()
            self._require_index("leaf_hash", index, self._size())
            return self._read(0, index)

    def root(self, n: int | None = None) -> bytes:
        """The root of the tree of the first ``n`` leaves (default: all); popcount(n) node reads."""
        with self._lock:
            self._require_open()
            n = self._require_size("root", n)
            return EMPTY_ROOT if n == 0 else self._subtree_hash(0, n)

    def inclusion_proof(self, index: int, n: int | None = None) -> list[bytes]:
        """RFC 9162 2.1.3.1 PATH(index, D[n]), leaf-up; O(log n) node reads."""
        with self._lock:
            self._require_open()
            n = self._require_size("inclusion_proof", n)
            self._require_index("inclusion_proof", index, n)
            siblings: list[bytes] = []
            lo, hi = 0, n
            while hi - lo > 1:
                k = split_point(hi - lo)
                if index < lo + k:
                    siblings.append(self._subtree_hash(lo + k, hi))
                    hi = lo + k
                else:
                    siblings.append(self._subtree_hash(lo, lo + k))
                    lo += k
            siblings.reverse()
            return siblings

    def inclusion_proofs(self, indexes: Iterable[int], n: int) -> dict[int, list[bytes]]:
        """inclusion_proof(i, n) of each index (the PostgreSQL store reads them all in one query)."""
        return {i: self.inclusion_proof(i, n) for i in dict.fromkeys(indexes)}

    def consistency_proof(self, m: int, n: int | None = None) -> list[bytes]:
        """RFC 9162 2.1.4.1 PROOF(m, D[n]); O(log n) node reads. Requires 0 < m <= n."""
        with self._lock:
            self._require_open()
            n = self._require_size("consistency_proof", n)
            if type(m) is not int or not 0 < m <= n:
                raise ValueError(f"{self._where('consistency_proof')}: expected 0 < m <= {n}, found m={m!r}")
            nodes: list[bytes] = []
            lo, hi, whole = 0, n, True
            while m != hi - lo:
                k = split_point(hi - lo)
                if m <= k:
                    nodes.append(self._subtree_hash(lo + k, hi))
                    hi = lo + k
                else:
                    nodes.append(self._subtree_hash(lo, lo + k))
                    lo, m, whole = lo + k, m - k, False
            if not whole:
                nodes.append(self._subtree_hash(lo, hi))
            nodes.reverse()
            return nodes

    # --- tree arithmetic ------------------------------------------------------------------------

    def _subtree_hash(self, lo: int, hi: int) -> bytes:
        """MTH(D[lo:hi]) for a subtree of an RFC 6962 tree: perfect, or a right-edge remainder.

        Such a range splits into perfect, aligned pieces of decreasing size (the
        binary digits of hi - lo); its hash folds them right to left.
        """
        pieces: list[bytes] = []
        pos, width = lo, hi - lo
        for level in reversed(range(width.bit_length())):
            if (width >> level) & 1:
                if pos % (1 << level):
                    raise AssertionError(f"unaligned subtree [{lo}, {hi}) at level {level}")
                pieces.append(self._read(level, pos >> level))
                pos += 1 << level
        result = pieces.pop()
        while pieces:
            result = node_hash(pieces.pop(), result)
        return result

    def _append_batch(self, leaf_hashes: list[bytes]) -> None:
        before = list(self._counts)
        new_size = self._size() + len(leaf_hashes)
        try:
            self._ensure_levels(new_size.bit_length())
            new_nodes, level = leaf_hashes, 0
            while new_nodes:
                count = self._counts[level]
                # An odd count means the last stored node still waits for its right sibling.
                row = [self._read(level, count - 1), *new_nodes] if count % 2 else new_nodes
                parents = [node_hash(row[i], row[i + 1]) for i in range(0, len(row) - 1, 2)]
                _write_all(self._fds[level], b"".join(new_nodes))  # lower levels first: upper ones derive
                self._counts[level] = count + len(new_nodes)
                new_nodes, level = parents, level + 1
        except BaseException:
            self._roll_back(before)
            raise

    def _roll_back(self, counts: Sequence[int]) -> None:
        # Unconditional: a failed write may have left bytes the in-memory counts never saw.
        try:
            for level in reversed(range(len(self._fds))):
                count = counts[level] if level < len(counts) else 0
                os.ftruncate(self._fds[level], count * HASH_SIZE)
                self._counts[level] = count
        except OSError as error:
            self._closed = True
            self._close_fds()
            raise MerkleStoreError(f"{self._where('append')}: rollback failed, store closed; reopen to heal") from error

    # --- healing --------------------------------------------------------------------------------

    def _heal(self) -> None:
        for fd in self._fds:
            length = os.fstat(fd).st_size
            if length % HASH_SIZE:  # a torn last record
                os.ftruncate(fd, length - length % HASH_SIZE)
            self._counts.append(length // HASH_SIZE)
        self._ensure_levels(1)
        level = 1
        while level < len(self._fds) or self._counts[level - 1] >= 2:
            self._ensure_levels(level + 1)
            supported = self._counts[level - 1] // 2
            if self._counts[level] > supported:
                self._truncate_level(level, supported)
            elif self._counts[level] < supported:
                self._recompute_level(level, supported)
            level += 1

    def _recompute_level(self, level: int, target: int) -> None:
        """Append the missing nodes [count, target) of ``level`` from the level below."""
        while (start := self._counts[level]) < target:
            count = min(target - start, BATCH_LEAVES)
            children = self._read_run(level - 1, 2 * start, 2 * count)
            parents = b"".join(
                node_hash(children[i : i + HASH_SIZE], children[i + HASH_SIZE : i + 2 * HASH_SIZE])
                for i in range(0, len(children), 2 * HASH_SIZE)
            )
            _write_all(self._fds[level], parents)
            self._counts[level] = start + count

    # --- files ----------------------------------------------------------------------------------

    def _check_format(self) -> None:
        path = self._dir / FORMAT_FILE
        if os.path.lexists(path):
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)  # a symlink: OSError, not followed
            try:
                found = os.read(fd, len(FORMAT_LINE) + 200)
            finally:
                os.close(fd)
            if found != FORMAT_LINE:
                raise MerkleStoreError(
                    f"merkle store {self._dir}: unknown format: expected {FORMAT_LINE!r}, found {found[:200]!r}"
                )
            return
        if any(self._dir.glob("level-*.bin")):
            raise MerkleStoreError(f"merkle store {self._dir}: level files without a {FORMAT_FILE} file")
        tmp = path.with_suffix(".tmp")
        tmp.unlink(missing_ok=True)  # a leftover or a planted symlink: the name is removed, never written through
        write_private(tmp, FORMAT_LINE)
        os.replace(tmp, path)
        self._dir_dirty = True

    def _open_existing_levels(self) -> None:
        levels = [int(p.name[6:8]) for p in self._dir.glob("level-[0-9][0-9].bin")]
        self._ensure_levels(max(levels, default=-1) + 1, count=False)

    def _ensure_levels(self, n_levels: int, *, count: bool = True) -> None:
        """Open (creating if needed) level files 0..n_levels-1."""
        while len(self._fds) < n_levels:
            path = self._dir / level_file_name(len(self._fds))
            if not path.exists():
                self._dir_dirty = True
            # O_NOFOLLOW: a symlink planted among the level files is refused (OSError), never written through
            self._fds.append(open_private(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW))
            if count:
                self._counts.append(os.fstat(self._fds[-1]).st_size // HASH_SIZE)

    def _truncate_level(self, level: int, count: int) -> None:
        if self._counts[level] > count:
            os.ftruncate(self._fds[level], count * HASH_SIZE)
            self._counts[level] = count

    def _read(self, level: int, index: int) -> bytes:
        data = os.pread(self._fds[level], HASH_SIZE, index * HASH_SIZE)
        if len(data) != HASH_SIZE:
            raise MerkleStoreError(
                f"{self._where('read')}: level {level} node {index}: short read: expected {HASH_SIZE} bytes, found {len(data)}"
            )
        return data

    def _read_run(self, level: int, index: int, count: int) -> bytes:
        want, offset, chunks = count * HASH_SIZE, index * HASH_SIZE, []
        while want:
            chunk = os.pread(self._fds[level], want, offset)
            if not chunk:
                raise MerkleStoreError(f"{self._where('read')}: level {level} ends before node {offset // HASH_SIZE}")
            chunks.append(chunk)
            want, offset = want - len(chunk), offset + len(chunk)
        return b"".join(chunks)

    def _sync(self) -> None:
        for fd in self._fds:
            os.fsync(fd)
        if self._dir_dirty:
            dir_fd = os.open(self._dir, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
            self._dir_dirty = False

    def _close_fds(self) -> None:
        while self._fds:
            os.close(self._fds.pop())

    # --- argument checks ------------------------------------------------------------------------

    def _size(self) -> int:
        return self._counts[0] if self._counts else 0

    def _where(self, operation: str) -> str:
        return f"merkle store {self._dir}: {operation}"

    def _require_open(self) -> None:
        if self._closed:
            raise MerkleStoreError(f"{self._where('use')}: store is closed")

    def _require_size(self, operation: str, n: int | None) -> int:
        size = self._size()
        if n is None:
            return size
        if type(n) is not int or not 0 <= n <= size:
            raise ValueError(f"{self._where(operation)}: tree size out of range: expected 0..{size}, found {n!r}")
        return n

    def _require_index(self, operation: str, index: int, n: int) -> None:
        if type(index) is not int or not 0 <= index < n:
            raise ValueError(
                f"{self._where(operation)}: index out of range: expected 0 <= index < {n}, found {index!r}"
            )


