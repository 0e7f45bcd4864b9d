"""Checkpoints kept as DATA_DIR/sessions/<s>/checkpoint.json (the file backend): read the latest, keep a new one,
issue one over the producer's tree, and prove a ledger grew from a kept checkpoint. The checks themselves
(shape, signature, consistency rows) are pure, in receipts/checkpoints.py."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ledger.event import validate_session_id
from ledger.verify import TORN_TAIL
from receipts.checkpoints import (
    ATTEMPTS,
    CHECKPOINT_FILE,
    MAX_CHECKPOINT_BYTES,
    LatestCheckpoint,
    MalformedCheckpoint,
    SinceReport,
    check_checkpoint_shape,
    check_since,
    checkpoint_file_bytes,
    parse_checkpoint,
    sign_tree,
)
from receipts.keys import ENV_VAR, KeyConfigError, PublicKey, SigningKey, parse_private_key
from storage.common.fsmode import replace_durable
from storage.common.keyfiles import load_existing
from storage.files.ledger.store import Ledger
from storage.files.receipts.audit import Auditor
from storage.files.receipts.files import synced_tree
from storage.files.receipts.ledger_copy import LineSource, ledger_dir
from storage.files.receipts.merkle_store import MerkleStore


# -- the stored latest checkpoint (I/O) ------------------------------------------
def checkpoint_path(data_dir: str | os.PathLike[str], session: str) -> Path:
    return Path(data_dir) / "sessions" / validate_session_id(session) / CHECKPOINT_FILE

def latest(data_dir: str | os.PathLike[str], session: str) -> dict[str, Any] | None:
    """The session's latest signed checkpoint, or None if none was issued yet.

    Raises MalformedCheckpoint (naming the file) when the stored one is not a
    well-formed checkpoint of this session, OSError when it cannot be read.
    """
    path = checkpoint_path(data_dir, session)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError:
        if not path.is_symlink():
            raise
        raise MalformedCheckpoint("$", "is a symbolic link, not a file", source=str(path)) from None
    try:
        raw = os.read(fd, MAX_CHECKPOINT_BYTES + 1)
    finally:
        os.close(fd)
    cp = parse_checkpoint(raw, source=str(path))
    if cp["body"]["session"] != session:
        raise MalformedCheckpoint("body.session", f"names session {cp['body']['session']!r}, not {session!r}", source=str(path))
    return cp

def keep(data_dir: str | os.PathLike[str], session: str, checkpoint: Mapping[str, Any], *, durable: bool = True) -> Path:
    """Write the latest checkpoint durably (temp file, fsync, rename, fsync of the folder), 0600; `durable=False`
    leaves out the folder's fsync (storage.common.fsmode.replace_durable): a power cut keeps the old one or this one."""
    path = checkpoint_path(data_dir, session)
    replace_durable(path, checkpoint_file_bytes(checkpoint), sync_dir=durable)
    return path

def issue(data_dir: str | os.PathLike[str], ledger: Ledger, session: str, key: SigningKey, *, store: MerkleStore | None = None) -> dict[str, Any]:
    """Sign a checkpoint over the session as it is now and keep it as the latest.

    The caller holds the session's turn lock (storage.files.receipts.files.session_turn_lock)
    and has just appended. `store`, when given, is the producer's tree already
    brought level with the ledger (files.synced_tree); otherwise it is opened here.
    """
    count, head = ledger.head(session)
    if count == 0:
        raise ValueError(f"session {session}: no events to sign a checkpoint over")
    own = store is None
    tree = synced_tree(Path(data_dir), ledger, session) if store is None else store
    try:
        if tree.size != count:
            raise ValueError(f"session {session}: Merkle tree holds {tree.size} leaves, the ledger {count} events")
        cp = sign_tree(session, tree, head, key)
    finally:
        if own:
            tree.close()
    keep(data_dir, session, cp)
    return cp

def existing_key(data_dir: str | os.PathLike[str]) -> SigningKey | None:
    """The data directory's signing key if one exists (receipts.keys.load_existing): never creates one."""
    return load_existing(data_dir)

def _data_dir_public_key(data_dir: Path) -> PublicKey | None:
    """The data directory's own public key, for a self-consistency check only (never trusted).

    Read-only, and never the private key file: `RECEIPT_SIGNING_KEY` when set
    (the app's key), else the keys folder's `signing.pub` (storage.files.receipts.api.data_dir_key).
    """
    from storage.files.receipts.api import data_dir_key

    try:
        env = os.environ.get(ENV_VAR)
        if env is not None:
            return parse_private_key(env).public_key
        return data_dir_key(data_dir)
    except (KeyConfigError, OSError, ValueError):
        return None

def _read_latest(data: Path, session: str, read: LatestCheckpoint | None = None) -> dict[str, Any] | MalformedCheckpoint | None:
    try:
        return latest(data, session) if read is None else read(session)
    except MalformedCheckpoint as exc:
        return exc

def prove_since(
    data_dir: str | os.PathLike[str],
    session: str,
    kept: Mapping[str, Any],
    trusted: Sequence[PublicKey],
    *,
    full: bool = False,
    source: LineSource | None = None,
    read_latest: LatestCheckpoint | None = None,
) -> SinceReport:
    """Prove (or disprove) that the session's ledger today extends the kept checkpoint.

    Re-walks the ledger through the auditor (storage.files.receipts.audit: every digest
    recomputed; roots and proofs over those digests, never the producer's tree)
    and compares the latest signed checkpoint with it. `kept` must have passed
    parse_checkpoint/check_checkpoint_shape. With no `trusted` key the
    signatures are checked against the data directory's own key, for
    self-consistency only, and the verdict is never "verified".

    `source` and `read_latest`: the ledger and its checkpoints are kept there (PostgreSQL: the PgLedger, whose
    lines are audited from a private copy, and PgReceipts.latest_checkpoint); `data_dir` then only holds the key.
    """
    validate_session_id(session)
    check_checkpoint_shape(kept)
    data = Path(data_dir)
    own = None if trusted else _data_dir_public_key(data)
    report: SinceReport | None = None
    # A writer appends, then signs its checkpoint (under the turn lock, which a
    # verifier does not take: it must not block turns or write a lock file). So
    # the checkpoint read just before the ledger is walked and the one read just
    # after bracket it; use whichever covers exactly what was walked, and retry
    # briefly when neither does, so an honest concurrent append is not reported
    # as events under no signature (nor its half-written last line as a torn
    # tail). A tampered ledger fails the same way each try.
    for attempt in range(ATTEMPTS):
        before = _read_latest(data, session, read_latest)
        with ledger_dir(data, session, source) as where, Auditor.of(where, full=full).facts(session) as facts:
            after = _read_latest(data, session, read_latest)
            n = facts.verified
            current = next((c for c in (after, before) if isinstance(c, dict) and c["body"]["tree_size"] == n), after)
            report = check_since(session, kept, facts, current, trusted, own)
            # a last line caught half-written by a writer is a torn tail only if it stays so
            in_flight = facts.first_break is not None and facts.first_break.kind == TORN_TAIL
        if not in_flight and (not isinstance(current, dict) or current["body"]["tree_size"] == n):
            break
        time.sleep(0.02 * (attempt + 1))
    assert report is not None
    return report
