"""storage.files.receipts.ledger_copy: a check through a private copy of a ledger's lines leaves nothing behind, even killed.

The source here is a files ledger read line by line (the PostgreSQL one is at the end of this file):
the copy, its cache and the lock table are the same code whatever hands the lines over.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import storage.files.receipts.ledger_copy as ledger_copy
from chat.engine import Engine
from chat.llm import LLM
from receipts.keys import PublicKey
from storage.files.receipts import audit
from storage.files.receipts.api import verify_bytes
from storage.files.receipts.audit import Auditor
from storage.files.receipts.ledger_copy import COPIED, OWNER, PREFIX, ledger_dir, sweep_stale_copies
from storage.stores import pg_stores

from ..forget_support import MARKER, engine, files_with_marker, marked_session

ROOT = Path(__file__).resolve().parents[2]
S = "alice"


class FileLines:
    """A LineSource over a data directory's own ledger files."""

    def __init__(self, data: Path) -> None:
        self.data = data

    def exists(self, session: str) -> bool:
        return (self.data / "sessions" / session / "events.jsonl").exists()

    @contextmanager
    def snapshot_lines(self, session: str) -> Iterator[Iterator[bytes]]:
        raw = (self.data / "sessions" / session / "events.jsonl").read_bytes()
        yield iter(raw.splitlines(keepends=True))


@pytest.fixture
def marked(tmp_path: Path) -> tuple[Path, bytes, PublicKey]:
    data = tmp_path / "data"
    eng = engine(data)
    _mem, turns = marked_session(eng, S)
    return data, turns[0].receipt_path.read_bytes(), eng.key.public_key


def test_a_receipt_checked_through_a_copy_verifies_and_says_it_walked_a_copy(tmpdir_: Path, marked: tuple[Path, bytes, PublicKey]) -> None:
    data, raw, key = marked
    report = verify_bytes(raw, trusted=[key], data_dir=data, source=FileLines(data))
    assert report.verdict == "verified"
    assert COPIED in repr(report)


def test_the_copy_has_no_name_on_disk_while_it_is_audited(tmpdir_: Path, marked: tuple[Path, bytes, PublicKey]) -> None:
    data, _raw, _key = marked
    lines = (data / "sessions" / S / "events.jsonl").read_bytes().count(b"\n")
    with ledger_dir(data, S, FileLines(data)) as where, Auditor.of(where).facts(S) as facts:
        assert (facts.exists, facts.verified, facts.first_break) == (True, lines, None)
        assert files_with_marker(tmpdir_) == [], "the copy of the memories has a name under $TMPDIR"
        assert where.ledger is not None and MARKER.encode() in os.pread(where.ledger, 1 << 20, 0)


def test_a_session_the_source_lacks_is_no_such_session(tmpdir_: Path, marked: tuple[Path, bytes, PublicKey]) -> None:
    data, _raw, _key = marked
    with ledger_dir(data, "bob", FileLines(data)) as where, Auditor.of(where).facts("bob") as facts:
        assert (facts.exists, facts.verified, where.ledger) == (False, 0, None)


def test_checks_through_copies_leave_no_folder_cache_or_lock_entry(tmpdir_: Path, tmp_path: Path, marked: tuple[Path, bytes, PublicKey]) -> None:
    data, raw, key = marked
    locks_before = len(audit._locks)
    for _ in range(4):
        assert verify_bytes(raw, trusted=[key], data_dir=data, source=FileLines(data)).verdict == "verified"
    cache = tmp_path / "cache"
    left = (sorted(os.listdir(tmpdir_)), sorted(cache.rglob("*")) if cache.exists() else [], len(audit._locks) - locks_before)
    assert left == ([], [], 0)


def test_an_audit_lock_entry_lives_only_while_a_check_uses_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MRE_CACHE_DIR", str(tmp_path / "cache"))
    data = tmp_path / "data"
    marked_session(engine(data), S)
    before = len(audit._locks)
    with Auditor(data).facts(S):
        during = len(audit._locks) - before
    assert (during, len(audit._locks) - before) == (1, 0)


KILLED_IN_A_COPY = """
import os, signal, sys
from contextlib import contextmanager
from pathlib import Path
from storage.files.receipts.audit import Auditor
from receipts.keys import PublicKey
from storage.files.receipts.ledger_copy import ledger_dir

class FileLines:
    def exists(self, session):
        return True
    @contextmanager
    def snapshot_lines(self, session):
        yield iter(Path(sys.argv[1]).read_bytes().splitlines(keepends=True))

with ledger_dir(sys.argv[2], "alice", FileLines()) as where, Auditor.of(where).facts("alice") as facts:
    assert facts.verified > 0
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _killed_check(tmpdir_: Path, data: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmpdir_), "MRE_CACHE_DIR": str(tmpdir_.parent / "cache")}
    r = subprocess.run([sys.executable, "-c", KILLED_IN_A_COPY, str(data / "sessions" / S / "events.jsonl"), str(data)],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == -9, r.stderr


def test_a_check_killed_inside_its_copy_leaves_no_word_on_disk(tmpdir_: Path, marked: tuple[Path, bytes, PublicKey]) -> None:
    data, _raw, _key = marked
    _killed_check(tmpdir_, data)
    assert files_with_marker(tmpdir_, tmpdir_.parent / "cache") == []


def test_the_next_check_removes_the_folder_of_a_check_that_was_killed(tmpdir_: Path, marked: tuple[Path, bytes, PublicKey]) -> None:
    data, raw, key = marked
    _killed_check(tmpdir_, data)
    assert [n.startswith(PREFIX) for n in os.listdir(tmpdir_)] == [True]
    assert verify_bytes(raw, trusted=[key], data_dir=data, source=FileLines(data)).verdict == "verified"
    assert os.listdir(tmpdir_) == []


def test_the_sweep_keeps_a_live_checks_folder_and_one_being_made(tmp_path: Path) -> None:
    live, making, dead = (tmp_path / f"{PREFIX}{name}" for name in ("live", "making", "dead"))
    for folder in (live, making, dead):
        folder.mkdir(mode=0o700)
    (dead / OWNER).touch()
    fd = os.open(live / OWNER, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        removed = sweep_stale_copies(tmp_path)
        kept = sorted(os.listdir(tmp_path))
    finally:
        os.close(fd)
    assert (removed, kept) == ([dead], [live.name, making.name])


def test_the_sweep_removes_a_folder_left_without_an_owner_long_ago(tmp_path: Path) -> None:
    old = tmp_path / f"{PREFIX}old"
    old.mkdir(mode=0o700)
    os.utime(old, (0, 0))
    assert (sweep_stale_copies(tmp_path), os.listdir(tmp_path)) == ([old], [])


def test_the_sweep_follows_no_symlink_and_leaves_other_names(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / OWNER).touch()
    (tmp_path / f"{PREFIX}link").symlink_to(target)
    (tmp_path / "mre-audit-other").mkdir()
    assert sweep_stale_copies(tmp_path) == []
    assert sorted(os.listdir(tmp_path)) == ["elsewhere", f"{PREFIX}link", "mre-audit-other"]


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review3_sweep_race.py):
# Reviewer finding (1b8d8b3): a sweep can remove a live check's folder, in the window before its owner lock is taken.
#
# storage.files.receipts.ledger_copy.owned_folder makes the folder (mkdtemp), creates OWNER (O_CREAT|O_EXCL) and only then flocks it.
# sweep_stale_copies, run by every other check as it starts (other threads of the app, other processes, replicas sharing
# /tmp), treats a folder whose OWNER exists and can be flocked as abandoned and rmtree()s it. Between the creator's
# open() and its flock() the OWNER file exists unlocked: a sweep then deletes the live folder, and the check that owns it
# fails when it makes its nameless copy or its audit cache there (FileNotFoundError), or runs on in a deleted folder.
# The test runs another check's sweep exactly in that window (flock from another open file description conflicts in one
# process as across processes, so this is what a second process would do).
#
# Fix: never let OWNER be visible unlocked — open and flock a temporary name (e.g. OWNER + '.new', which the sweep
# treats like 'no owner yet': the grace period) and rename it to OWNER while holding the lock; or have the sweep also
# require the folder to be older than a few seconds.
# --------------------------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review_pg_verify_leftovers.py):
# Review (issue 14; fixed: the copy has no name on disk — the auditor reads it through its open descriptor, so
# the kernel frees it when the process ends, however it ends — its audit cache lives in the check's own folder, removed
# after (a dead check's by the next one), and the lock table's entries are refcounted). As found: what a check against
# the database leaves behind (storage.files.receipts.ledger_copy, storage.files.receipts.audit).
#
# - Each check copies the session's rows into a fresh mkdtemp folder; storage.files.receipts.audit keys its cache folder and its
#   in-process lock table by that folder's real path, so every check adds one `_locks` entry (never removed) and one
#   empty `<cache_root>/audit/<hash>/` folder (forget_cache removes only the session folder under it): a long-running
#   app grows both by one per Verify click / history check.
# - A check that dies mid-walk (SIGKILL, OOM, a container stop past its grace period) leaves the private copy of the
#   whole session — every memory's words — under $TMPDIR; nothing sweeps `mre-audit-copy-*`, and a later forget does
#   not look there, so an erased memory's words stay on disk.
# --------------------------------------------------------------------------------------------------------------------


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
