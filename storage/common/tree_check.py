"""Whether a producer's Merkle tree still matches the ledger (both backends' synced_tree)."""

from __future__ import annotations

from receipts.merkle import leaf_hash
from receipts.stores import MerkleTree, TreeSource


def leaf_matches(store: MerkleTree, ledger: TreeSource, session: str, index: int) -> bool:
    """Whether the tree's leaf `index` is the ledger's event digest at that seq (both backends' synced_tree)."""
    (ev,) = ledger.read_events(session, [index])
    return store.leaf_hash(index) == leaf_hash(bytes.fromhex(ev.digest))
