"""Issue a checkpoint over a session on any receipt backend (the same steps on files and on PostgreSQL)."""

from __future__ import annotations

from typing import Any

from ledger.event import now_ts
from receipts.body import sign_checkpoint
from receipts.keys import SigningKey
from receipts.stores import ReceiptBackend, TreeSource


def issue(
    backend: ReceiptBackend, ledger: TreeSource, session: str, key: SigningKey, *, allow_shrink: bool = False, durable: bool = True
) -> dict[str, Any]:
    """Sign a checkpoint over the session as it is now and keep it as the latest, on any ReceiptBackend.

    The caller holds backend.turn_lock(session) and has just appended (receipts.checkpoints.issue is the
    file backend's, by path). `allow_shrink`: a repair cut the ledger, so the smaller tree's checkpoint replaces
    a larger one (backend.keep_checkpoint's). `durable=False`: see keep_checkpoint."""
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
    backend.keep_checkpoint(session, cp, allow_shrink=allow_shrink, durable=durable)
    return cp
