"""RFC 6962 / RFC 9162 Merkle tree hashing and proofs, as pure functions over bytes.

This module is the one place that defines how a Merkle leaf and node are hashed
(RFC 6962 section 2.1, SHA-256): changing either function changes every root
and every proof ever issued, which is a format version change, never an edit.

    leaf_hash(d)    = SHA-256(0x00 || d)
    node_hash(l, r) = SHA-256(0x01 || l || r)
    empty root      = SHA-256("")

Verification follows transparency-dev/merkle ``proof/verify.go``: computing a
root from a proof is split from comparing it (``root_from_inclusion_proof`` vs
``verify_inclusion``), the exact proof length is derived from the tree shape
and checked before any hashing, and a mismatch error carries both the expected
and the calculated value. The arithmetic is equivalent to the RFC 9162 2.1.3.2
and 2.1.4.2 verification loops; the test suite checks the two agree.

Deliberate difference from the Go library: every hash taken as input (leaf hash,
roots, proof elements) must be exactly 32 bytes, including the trivial
``size1 == size2`` consistency case, where Go compares roots of any length.

The generators (``root_from_leaf_hashes``, ``inclusion_proof``,
``consistency_proof``) are O(n) references for tests and small trees; the
persisted O(log n) versions live in ``storage.files.receipts.merkle_store``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

HASH_SIZE = 32
LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"
EMPTY_ROOT = hashlib.sha256(b"").digest()
# Tree sizes and indices are uint64 in RFC 9162; larger values are refused, not wrapped.
MAX_TREE_SIZE = 2**64 - 1


class ProofError(ValueError):
    """A Merkle proof does not verify. ``expected`` / ``found`` hold the two values when there are two."""

    def __init__(self, message: str, *, expected: bytes | int | None = None, found: bytes | int | None = None) -> None:
        super().__init__(message)
        self.expected = expected
        self.found = found


class MalformedProofError(ProofError):
    """The inputs cannot form a valid proof (bad size, index out of range, wrong length, non-32-byte hash)."""


class RootMismatchError(ProofError):
    """The proof is well formed but the root it leads to is not the one claimed."""


# --- hashing -----------------------------------------------------------------------------------


def leaf_hash(data: bytes) -> bytes:
    """RFC 6962 leaf hash: SHA-256(0x00 || data)."""
    return hashlib.sha256(LEAF_PREFIX + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """RFC 6962 interior node hash: SHA-256(0x01 || left || right)."""
    return hashlib.sha256(NODE_PREFIX + left + right).digest()


def split_point(n: int) -> int:
    """The largest power of two strictly less than ``n`` (RFC 9162 2.1.1's k); requires n >= 2."""
    if n < 2:
        raise ValueError(f"split_point: expected n >= 2, found {n}")
    return 1 << ((n - 1).bit_length() - 1)


# --- reference generators (O(n); for tests and small trees) ------------------------------------


def root_from_leaf_hashes(leaf_hashes: Sequence[bytes]) -> bytes:
    """The Merkle tree hash of a list of leaf hashes (RFC 9162 2.1.1), computed level by level.

    Pairing neighbours and carrying a lone last node up unchanged builds exactly
    the RFC tree whose left subtree is always the largest power of two.
    """
    _require_leaf_hashes(leaf_hashes)
    if not leaf_hashes:
        return EMPTY_ROOT
    level = list(leaf_hashes)
    while len(level) > 1:
        parents = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            parents.append(level[-1])
        level = parents
    return level[0]


def inclusion_proof(leaf_hashes: Sequence[bytes], index: int) -> list[bytes]:
    """The RFC 9162 2.1.3.1 inclusion proof PATH(index, D[n]) for the tree of all ``leaf_hashes``."""
    _require_leaf_hashes(leaf_hashes)
    size = len(leaf_hashes)
    if not 0 <= index < size:
        raise ValueError(f"inclusion_proof: index out of range: expected 0 <= index < {size}, found {index}")
    siblings: list[bytes] = []
    lo, hi = 0, size
    while hi - lo > 1:
        k = split_point(hi - lo)
        if index < lo + k:
            siblings.append(root_from_leaf_hashes(leaf_hashes[lo + k : hi]))
            hi = lo + k
        else:
            siblings.append(root_from_leaf_hashes(leaf_hashes[lo : lo + k]))
            lo += k
    siblings.reverse()  # collected root-down; proofs are ordered leaf-up
    return siblings


def consistency_proof(leaf_hashes: Sequence[bytes], size1: int, size2: int) -> list[bytes]:
    """The RFC 9162 2.1.4.1 consistency proof PROOF(size1, D[size2]) over a prefix of ``leaf_hashes``."""
    _require_leaf_hashes(leaf_hashes)
    if not 0 < size1 <= size2 <= len(leaf_hashes):
        raise ValueError(
            f"consistency_proof: sizes out of range: expected 0 < size1 <= size2 <= {len(leaf_hashes)}, "
            f"found size1={size1}, size2={size2}"
        )
    nodes: list[bytes] = []
    lo, hi, m, whole = 0, size2, size1, True
    while m != hi - lo:
        k = split_point(hi - lo)
        if m <= k:
            nodes.append(root_from_leaf_hashes(leaf_hashes[lo + k : hi]))
            hi = lo + k
        else:
            nodes.append(root_from_leaf_hashes(leaf_hashes[lo : lo + k]))
            lo, m, whole = lo + k, m - k, False
    if not whole:
        nodes.append(root_from_leaf_hashes(leaf_hashes[lo:hi]))
    nodes.reverse()
    return nodes


# --- inclusion verification --------------------------------------------------------------------


def root_from_inclusion_proof(index: int, size: int, leaf_hash: bytes, proof: Sequence[bytes]) -> bytes:
    """The root implied by an inclusion proof for leaf ``index`` of a tree of ``size`` leaves.

    Raises MalformedProofError when no valid proof could have this shape. Requires 0 <= index < size.
    """
    where = f"inclusion proof for leaf {index} of {size}"
    _require_tree_int(where, "index", index)
    _require_tree_int(where, "size", size)
    if size == 0:
        raise MalformedProofError(f"{where}: an empty tree has no leaves", expected=1, found=0)
    if index >= size:
        raise MalformedProofError(
            f"{where}: index out of range: expected index < {size}, found {index}", expected=size, found=index
        )
    _require_hash(where, "leaf hash", leaf_hash)
    inner, border = _decompose_inclusion(index, size)
    _require_proof(where, proof, inner + border)
    calculated = _chain_inner(leaf_hash, proof[:inner], index)
    return _chain_border_right(calculated, proof[inner:])


def verify_inclusion(index: int, size: int, leaf_hash: bytes, proof: Sequence[bytes], root: bytes) -> None:
    """Raise ProofError unless ``proof`` shows ``leaf_hash`` at ``index`` in the tree of ``size`` with ``root``."""
    where = f"inclusion proof for leaf {index} of {size}"
    calculated = root_from_inclusion_proof(index, size, leaf_hash, proof)
    _require_hash(where, "root", root)
    _require_match(where, "root", root, calculated)


# --- consistency verification ------------------------------------------------------------------


def root_from_consistency_proof(size1: int, size2: int, proof: Sequence[bytes], root1: bytes) -> bytes:
    """The size2 root implied by a consistency proof from the size1 tree with ``root1``.

    Checks ``root1`` against the proof on the way (RootMismatchError), and raises
    MalformedProofError when no valid proof could have this shape. Requires 0 < size1 <= size2:
    a proof from the empty tree proves nothing and is refused, as transparency-dev/merkle does.
    """
    where = f"consistency proof from size {size1} to {size2}"
    _require_tree_int(where, "size1", size1)
    _require_tree_int(where, "size2", size2)
    if size2 < size1:
        raise MalformedProofError(
            f"{where}: trees only grow: expected size2 >= {size1}, found {size2}", expected=size1, found=size2
        )
    if size1 == 0:
        raise MalformedProofError(
            f"{where}: a consistency proof from the empty tree is meaningless", expected=1, found=0
        )
    _require_hash(where, "root1", root1)
    if size1 == size2:
        _require_proof(where, proof, 0)
        return root1

    inner, border = _decompose_inclusion(size1 - 1, size2)
    shift = _trailing_zeros(size1)
    inner -= shift  # shift < inner when size1 < size2
    # The proof starts with the root of the size1 tree's last complete 2^shift subtree,
    # unless size1 is itself that power of two, whose root is root1.
    start = 0 if size1 == 1 << shift else 1
    _require_proof(where, proof, start + inner + border)
    seed = root1 if start == 0 else proof[0]
    path = proof[start:]
    mask = (size1 - 1) >> shift

    calculated1 = _chain_border_right(_chain_inner_right(seed, path[:inner], mask), path[inner:])
    _require_match(where, "root1", root1, calculated1)
    return _chain_border_right(_chain_inner(seed, path[:inner], mask), path[inner:])


def verify_consistency(size1: int, size2: int, proof: Sequence[bytes], root1: bytes, root2: bytes) -> None:
    """Raise ProofError unless ``proof`` shows the size2 tree with ``root2`` extends the size1 tree with ``root1``."""
    where = f"consistency proof from size {size1} to {size2}"
    calculated2 = root_from_consistency_proof(size1, size2, proof, root1)
    _require_hash(where, "root2", root2)
    _require_match(where, "root2", root2, calculated2)


# --- internals ---------------------------------------------------------------------------------


def _decompose_inclusion(index: int, size: int) -> tuple[int, int]:
    """Lengths of the inner and border parts of the inclusion proof for ``index`` in a tree of ``size``.

    The inner part runs up to where the paths to ``index`` and ``size - 1`` meet;
    above that, the path runs along the right border and every sibling is on the left.
    """
    inner = (index ^ (size - 1)).bit_length()
    border = (index >> inner).bit_count()
    return inner, border


def _trailing_zeros(n: int) -> int:
    return (n & -n).bit_length() - 1


def _chain_inner(seed: bytes, proof: Sequence[bytes], index: int) -> bytes:
    for i, sibling in enumerate(proof):
        seed = node_hash(sibling, seed) if (index >> i) & 1 else node_hash(seed, sibling)
    return seed


def _chain_inner_right(seed: bytes, proof: Sequence[bytes], index: int) -> bytes:
    """Like _chain_inner but only folds in left siblings: the hash of this subtree's earlier, smaller version."""
    for i, sibling in enumerate(proof):
        if (index >> i) & 1:
            seed = node_hash(sibling, seed)
    return seed


def _chain_border_right(seed: bytes, proof: Sequence[bytes]) -> bytes:
    for sibling in proof:
        seed = node_hash(sibling, seed)
    return seed


def _require_tree_int(where: str, name: str, value: int) -> None:
    # bool is an int subclass; True as a tree size is a caller bug, not a size.
    if type(value) is not int:
        raise MalformedProofError(f"{where}: {name} must be an int, found {type(value).__name__}")
    if not 0 <= value <= MAX_TREE_SIZE:
        raise MalformedProofError(f"{where}: {name} out of range: expected 0..2^64-1, found {value}", found=value)


def _require_hash(where: str, name: str, value: bytes) -> None:
    if not isinstance(value, bytes):
        raise MalformedProofError(f"{where}: {name} must be bytes, found {type(value).__name__}")
    if len(value) != HASH_SIZE:
        raise MalformedProofError(
            f"{where}: {name} has the wrong length: expected {HASH_SIZE} bytes, found {len(value)}",
            expected=HASH_SIZE,
            found=len(value),
        )


def _require_proof(where: str, proof: Sequence[bytes], length: int) -> None:
    if len(proof) != length:
        raise MalformedProofError(
            f"{where}: wrong proof length: expected {length} hashes, found {len(proof)}",
            expected=length,
            found=len(proof),
        )
    for i, item in enumerate(proof):
        _require_hash(where, f"proof[{i}]", item)


def _require_match(where: str, name: str, expected: bytes, calculated: bytes) -> None:
    if calculated != expected:
        raise RootMismatchError(
            f"{where}: {name} mismatch: expected {expected.hex()}, calculated {calculated.hex()}",
            expected=expected,
            found=calculated,
        )


def _require_leaf_hashes(leaf_hashes: Sequence[bytes]) -> None:
    for i, item in enumerate(leaf_hashes):
        if not isinstance(item, bytes) or len(item) != HASH_SIZE:
            raise ValueError(f"leaf_hashes[{i}]: expected {HASH_SIZE} bytes, found {item!r:.80}")
