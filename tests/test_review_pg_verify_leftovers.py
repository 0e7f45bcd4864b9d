"""Review (issue 14; fixed: the copy has no name on disk — the auditor reads it through its open descriptor, so
the kernel frees it when the process ends, however it ends — its audit cache lives in the check's own folder, removed
after (a dead check's by the next one), and the lock table's entries are refcounted). As found: what a check against
the database leaves behind (receipts.ledger_copy, receipts.audit).

- Each check copies the session's rows into a fresh mkdtemp folder; receipts.audit keys its cache folder and its
  in-process lock table by that folder's real path, so every check adds one `_locks` entry (never removed) and one
  empty `<cache_root>/audit/<hash>/` folder (forget_cache removes only the session folder under it): a long-running
  app grows both by one per Verify click / history check.
- A check that dies mid-walk (SIGKILL, OOM, a container stop past its grace period) leaves the private copy of the
  whole session — every memory's words — under $TMPDIR; nothing sweeps `mre-audit-copy-*`, and a later forget does
  not look there, so an erased memory's words stay on disk.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from chat.engine import Engine
from chat.llm import LLM
from storage.files.receipts import audit
from storage.files.receipts.api import verify_bytes
from storage.stores import pg_stores

from .forget_support import files_with_marker, marked_session

ROOT = Path(__file__).resolve().parents[1]
S = "alice"


@pytest.mark.pg
def test_checks_against_the_database_leave_no_folder_or_lock_per_check(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MRE_CACHE_DIR", str(tmp_path / "cache"))
    data = tmp_path / "data"
    data.mkdir()
    with pg_stores(pg_url, data, pool_size=2) as stores:
        eng = Engine(data, llm=LLM(api_key=""), stores=stores)
        eng.remember(S, "I keep bees on the roof")
        turn = eng.turn(S, "Where do I keep bees?")
        raw = stores.receipts.read_receipt(S, turn.receipt_id)
        locks_before = len(audit._locks)
        for _ in range(5):
            report = verify_bytes(raw, trusted=[eng.key.public_key], data_dir=data, source=stores.ledger)
            assert report.verdict == "verified"
    left = sorted(p.name for p in (tmp_path / "cache" / "audit").iterdir()) if (tmp_path / "cache" / "audit").exists() else []
    grown = len(audit._locks) - locks_before
    assert (len(left), grown) == (0, 0), f"{len(left)} audit folders and {grown} lock entries left by 5 checks"


KILLED_MID_CHECK = """
import os, signal, sys
import storage.files.receipts.api as api
class Dying(api.Auditor):
    def facts(self, session):
        os.kill(os.getpid(), signal.SIGKILL)  # a crash in the middle of the walk
        return super().facts(session)
api.Auditor = Dying
from cli.prog_receipts import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.pg
def test_a_check_killed_mid_walk_leaves_no_copy_of_the_memories_in_tmpdir(tmp_path: Path, pg_url: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    with pg_stores(pg_url, data, pool_size=2) as stores:
        eng = Engine(data, llm=LLM(api_key=""), stores=stores)
        _mem, turns = marked_session(eng, S)
        rfile = tmp_path / "r.json"
        rfile.write_bytes(stores.receipts.read_receipt(S, turns[0].receipt_id))
    env = {**os.environ, "DATABASE_URL": pg_url, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmpdir)}
    r = subprocess.run([sys.executable, "-c", KILLED_MID_CHECK, "verify", str(rfile), "--data", str(data)],
                       env=env, capture_output=True, text=True, timeout=50)
    assert r.returncode == -9
    assert files_with_marker(tmpdir) == [], "the private copy of the session outlived the check"
