"""The operator's attacks on a session's history, for the kept-checkpoint tests (service level and in a browser).

Each of `rewrite_and_recompute` and `truncate` leaves `ledger verify` passing and
the latest checkpoint freshly signed with the app's own key, so only a
checkpoint kept from before can catch it. `edit_in_place` is the lazy edit: one
byte of an old line, same length, mtime put back — the ledger no longer verifies.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import orjson

from ledger.event import GENESIS, chain_link, event_from_dict, recompute_digest
from receipts.keys import SigningKey
from storage.files.ledger.store import Ledger
from storage.files.receipts import checkpoint_files as checkpoints_files


def log_path(data: Path, session: str) -> Path:
    return data / "sessions" / session / "events.jsonl"


def resign(data: Path, session: str, key: SigningKey) -> dict[str, object]:
    """A thorough operator: rebuilds the producer's Merkle tree and signs a checkpoint matching the ledger as it is."""
    shutil.rmtree(data / "merkle" / session, ignore_errors=True)
    ledger = Ledger(data)
    report = ledger.verify(session)
    assert report.ok, f"the attack should leave `ledger verify` passing: {report.to_dict()}"
    return checkpoints_files.issue(data, ledger, session, key)


def rewrite_and_recompute(data: Path, session: str, seq: int, text: str, key: SigningKey) -> dict[str, object]:
    """Rewrite event `seq`'s text, recompute every digest and chain hash from there on, re-sign the latest checkpoint."""
    path = log_path(data, session)
    objs = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert objs[seq]["text"] != text
    objs[seq]["text"] = text
    prev = GENESIS if seq == 0 else bytes.fromhex(objs[seq - 1]["chain"])
    for obj in objs[seq:]:
        obj["prev"] = prev.hex()
        obj["digest"] = recompute_digest(obj).hex()
        prev = chain_link(prev, bytes.fromhex(obj["digest"]))
        obj["chain"] = prev.hex()
    path.write_bytes(b"".join(event_from_dict(o).to_line() for o in objs))
    return resign(data, session, key)


def truncate(data: Path, session: str, drop: int, key: SigningKey) -> dict[str, object]:
    """Drop the last `drop` events and re-sign a checkpoint over what is left."""
    path = log_path(data, session)
    lines = path.read_bytes().splitlines(keepends=True)
    assert 0 < drop < len(lines)
    path.write_bytes(b"".join(lines[:-drop]))
    return resign(data, session, key)


def edit_in_place(data: Path, session: str, seq: int, old: bytes, new: bytes) -> None:
    """Replace `old` by `new` (same length) inside line `seq`, in place (same inode), and put the mtime back."""
    assert len(old) == len(new) and old != new
    path = log_path(data, session)
    before = os.stat(path)
    lines = path.read_bytes().splitlines(keepends=True)
    assert lines[seq].count(old) == 1, f"{old!r} occurs {lines[seq].count(old)} times in line {seq}"
    lines[seq] = lines[seq].replace(old, new)
    with open(path, "r+b") as f:
        f.write(b"".join(lines))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
