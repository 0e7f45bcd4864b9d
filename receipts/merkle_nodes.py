"""Which stored nodes a persisted RFC 6962 tree reads and writes (pure; no I/O).

A node store keeps only complete subtrees: node (L, i) is MTH of leaves [i * 2^L, (i + 1) * 2^L), written
once complete and never changed (storage.files.receipts.merkle_store keeps them in one file per level, storage/pg/merkle.py
in rows). These functions say which nodes an operation needs, so a store can fetch them all in one read
(one query on PostgreSQL), and how to fold or extend them:

- `subtree_nodes(lo, hi)`: the perfect, aligned pieces of MTH(D[lo:hi]) — at most log2(hi - lo) + 1 nodes;
- `inclusion_ranges` / `consistency_ranges`: the subtrees whose hashes make RFC 9162 PATH / PROOF;
- `edge_nodes(size)` and `appended_nodes`: the right-edge nodes an append pairs with, and the new nodes.

The recursions are RFC 9162 2.1.3.1 and 2.1.4.1, the same walk as MerkleStore's (tests compare the two).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from receipts.merkle import node_hash, split_point

Node = tuple[int, int]  # (level, index within the level)


def subtree_nodes(lo: int, hi: int) -> list[Node]:
    """The stored nodes whose fold is MTH(D[lo:hi]), largest first, for a range of an RFC 6962 tree.

    Such a range (a perfect subtree or a right-edge remainder) splits into perfect aligned pieces of
    decreasing size, one per binary digit of hi - lo."""
    if not 0 <= lo < hi:
        raise ValueError(f"merkle nodes: empty or negative range [{lo}, {hi})")
    pieces: list[Node] = []
    pos, width = lo, hi - lo
    for level in reversed(range(width.bit_length())):
        if (width >> level) & 1:
            if pos % (1 << level):
                raise ValueError(f"merkle nodes: unaligned subtree [{lo}, {hi}) at level {level}")
            pieces.append((level, pos >> level))
            pos += 1 << level
    return pieces


def fold(hashes: Sequence[bytes]) -> bytes:
    """MTH of a range from its pieces' hashes (as subtree_nodes lists them): folded right to left."""
    if not hashes:
        raise ValueError("merkle nodes: nothing to fold")
    result = hashes[-1]
    for h in reversed(hashes[:-1]):
        result = node_hash(h, result)
    return result


def inclusion_ranges(index: int, n: int) -> list[tuple[int, int]]:
    """The subtrees whose hashes are PATH(index, D[n]), leaf-up (RFC 9162 2.1.3.1)."""
    if not 0 <= index < n:
        raise ValueError(f"merkle nodes: index out of range: expected 0 <= index < {n}, found {index}")
    ranges: list[tuple[int, int]] = []
    lo, hi = 0, n
    while hi - lo > 1:
        k = split_point(hi - lo)
        if index < lo + k:
            ranges.append((lo + k, hi))
            hi = lo + k
        else:
            ranges.append((lo, lo + k))
            lo += k
    ranges.reverse()
    return ranges


def consistency_ranges(m: int, n: int) -> list[tuple[int, int]]:
    """The subtrees whose hashes are PROOF(m, D[n]) (RFC 9162 2.1.4.1). Requires 0 < m <= n."""
    if not 0 < m <= n:
        raise ValueError(f"merkle nodes: expected 0 < m <= {n}, found m={m}")
    ranges: list[tuple[int, int]] = []
    lo, hi, whole = 0, n, True
    while m != hi - lo:
        k = split_point(hi - lo)
        if m <= k:
            ranges.append((lo + k, hi))
            hi = lo + k
        else:
            ranges.append((lo, lo + k))
            lo, m, whole = lo + k, m - k, False
    if not whole:
        ranges.append((lo, hi))
    ranges.reverse()
    return ranges


def nodes_of(ranges: Sequence[tuple[int, int]]) -> list[Node]:
    """Every node the ranges' hashes read, once each (for one fetch)."""
    return sorted({node for lo, hi in ranges for node in subtree_nodes(lo, hi)})


def edge_nodes(size: int) -> list[Node]:
    """The nodes an append to a tree of `size` leaves pairs new nodes with: the last node of every level
    whose count of complete nodes is odd (it waits for its right sibling)."""
    return [(level, (size >> level) - 1) for level in range(size.bit_length()) if (size >> level) & 1]


def appended_nodes(size: int, leaf_hashes: Sequence[bytes], edge: Mapping[Node, bytes]) -> list[tuple[int, int, bytes]]:
    """(level, index, hash) of every node that becomes complete when `leaf_hashes` are appended to a tree of
    `size` leaves; `edge` holds the hashes of edge_nodes(size)."""
    out: list[tuple[int, int, bytes]] = []
    new, level, count = list(leaf_hashes), 0, size
    while new:
        out += [(level, count + i, h) for i, h in enumerate(new)]
        row = [edge[(level, count - 1)], *new] if count % 2 else new
        new = [node_hash(row[i], row[i + 1]) for i in range(0, len(row) - 1, 2)]
        level, count = level + 1, count >> 1
    return out


__all__ = ["Node", "appended_nodes", "consistency_ranges", "edge_nodes", "fold", "inclusion_ranges", "nodes_of", "subtree_nodes"]
