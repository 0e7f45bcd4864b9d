"""Reviewer finding (pre-existing; delete_session, now also Engine.forget's): two processes can hold one turn lock.

receipts.files.session_turn_lock flocks DATA/merkle/<S>.lock, and control.steps.delete_session unlinks that file
while its caller still holds the lock. A process already waiting for the lock (a CLI `ledger import` with a key, a
repair, a second app on the same DATA_DIR) waits on the old inode and gets it when the deletion ends; the next
locker opens the path, makes a new file and locks that at once. Both now hold "the" turn lock of S: the import
signs its checkpoint in the middle of the other's turn, which is what the lock exists to prevent.

Fix: never unlink a lock file that others may be waiting on (leave it; it holds no words — the session id is in
its name only, like the watermark), or, if it must go, re-check after flock that the descriptor's inode is still
the path's (fstat vs stat; retry on a mismatch), as lockfile implementations do.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from chat.engine import Engine
from chat.llm import LLM
from control.steps import delete_session
from control.where import where
from storage.files.receipts.files import session_turn_lock

ROOT = Path(__file__).resolve().parents[1]
S = "alice"
WAITER = """
import sys, time
from pathlib import Path
from storage.files.receipts.files import session_turn_lock
with session_turn_lock(Path(sys.argv[1]), sys.argv[2]):
    print("held", flush=True)
    time.sleep(3)
"""


def test_a_deleted_sessions_turn_lock_has_one_holder_at_a_time(tmp_path: Path) -> None:
    data = tmp_path / "data"
    Engine(data, llm=LLM(api_key="")).remember(S, "a memory")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with session_turn_lock(data, S):
        other = subprocess.Popen([sys.executable, "-c", WAITER, str(data), S], env=env, stdout=subprocess.PIPE, text=True)
        time.sleep(1.0)  # the other process is waiting in flock on the lock file
        delete_session(where(data), S)  # what forget_session / Engine.forget run while holding the lock
    try:
        assert other.stdout is not None
        assert other.stdout.readline().strip() == "held"  # the other process holds the lock now (for 3 s)
        got = threading.Event()

        def lock_again() -> None:
            with session_turn_lock(data, S):
                got.set()

        t = threading.Thread(target=lock_again, daemon=True)
        t.start()
        assert not got.wait(1.0), "a second holder took the turn lock while the other process held it"
    finally:
        other.wait(timeout=10)
