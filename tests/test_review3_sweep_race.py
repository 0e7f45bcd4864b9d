"""Reviewer finding (1b8d8b3): a sweep can remove a live check's folder, in the window before its owner lock is taken.

receipts.ledger_copy.owned_folder makes the folder (mkdtemp), creates OWNER (O_CREAT|O_EXCL) and only then flocks it.
sweep_stale_copies, run by every other check as it starts (other threads of the app, other processes, replicas sharing
/tmp), treats a folder whose OWNER exists and can be flocked as abandoned and rmtree()s it. Between the creator's
open() and its flock() the OWNER file exists unlocked: a sweep then deletes the live folder, and the check that owns it
fails when it makes its nameless copy or its audit cache there (FileNotFoundError), or runs on in a deleted folder.
The test runs another check's sweep exactly in that window (flock from another open file description conflicts in one
process as across processes, so this is what a second process would do).

Fix: never let OWNER be visible unlocked — open and flock a temporary name (e.g. OWNER + '.new', which the sweep
treats like 'no owner yet': the grace period) and rename it to OWNER while holding the lock; or have the sweep also
require the folder to be older than a few seconds.
"""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import Any

import pytest

import storage.files.receipts.ledger_copy as ledger_copy


def test_a_sweep_between_owner_creation_and_its_lock_leaves_the_live_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_flock = fcntl.flock
    swept: list[Path] = []

    def flock_after_a_sweep(fd: Any, op: int) -> None:
        if op == fcntl.LOCK_EX and not swept:  # the creator's blocking lock of its new OWNER: another check sweeps first
            swept.extend(ledger_copy.sweep_stale_copies(tmp_path))
        real_flock(fd, op)

    monkeypatch.setattr(ledger_copy.fcntl, "flock", flock_after_a_sweep)
    with ledger_copy.owned_folder(under=tmp_path) as folder:
        assert swept == [] and folder.is_dir(), f"a concurrent sweep removed the live folder {folder}"
