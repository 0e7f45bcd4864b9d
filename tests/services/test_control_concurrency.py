"""Two processes on one session: one keeps taking turns (chat engine, offline stand-in) while the other runs
`python -m control forget`. The turner goes on until it has seen the certificate and three turns more, so turns
land on both sides of the erasure (test_control_strong's in-process variant cannot promise that): no acknowledged
event is lost, nothing forks, the ledger verifies, every receipt left verifies against it, the turns after the
erasure never cite the forgotten memory, and no file holds its words."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import control.forget as control_forget
from chat.engine import Engine
from chat.llm import LLM
from control.steps import delete_session
from control.where import where
from receipts.disclose import cited_seqs
from receipts.verify import FAIL
from storage.files.ledger.store import Ledger
from storage.files.receipts import files
from storage.files.receipts.api import verify_bytes
from storage.files.receipts.files import session_turn_lock
from storage.stores import pg_stores
from webui.retention import forget_if_idle

from ..forget_support import engine, files_with_marker, marked_session

ROOT = Path(__file__).resolve().parents[2]

TURNER = r"""
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
sys.path.append(sys.argv[1] + "/tests")  # after the root: tests/storage/ must not shadow the storage package
from forget_support import engine
data = Path(sys.argv[2])
eng = engine(data)
after, i = None, 0
while after is None or after < 3:
    t = eng.turn("alice", f"What is my locker code word? (try {i})")
    print(t.user_event.seq, t.user_event.digest, t.assistant_event.seq, t.assistant_event.digest, t.receipt_id, flush=True)
    i += 1
    if after is not None:
        after += 1
    elif list((data / "erasures").glob("erasure-*.json")):
        after = 0
    if i > 400:
        sys.exit("the certificate never appeared")
"""


def test_a_cli_forget_while_another_process_keeps_taking_turns_loses_nothing_and_forgets_completely(tmp_path: Path) -> None:
    data = tmp_path / "data"
    eng = engine(data)
    mem_seq, _turns = marked_session(eng)
    before, _ = eng.ledger.head("alice")
    key = eng.key.public_key
    eng.index.close()
    eng.ledger.close()
    turner = subprocess.Popen([sys.executable, "-c", TURNER, str(ROOT), str(data)], stdout=subprocess.PIPE, text=True)
    assert turner.stdout is not None
    first = turner.stdout.readline()
    assert first, "the turner must have taken a turn"
    forgetter = subprocess.run(
        [sys.executable, "-m", "control", "forget", str(data), "alice", str(mem_seq), "--json"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    rest = turner.stdout.read()
    assert turner.wait(timeout=120) == 0
    assert forgetter.returncode == 0, forgetter.stderr
    out = json.loads(forgetter.stdout)
    rows = [line.split() for line in (first + rest).splitlines()]
    record = out["record_seq"]
    assert any(int(r[0]) > record for r in rows), "turns must have landed after the erasure record"
    led = Ledger(data)
    report = led.verify("alice")
    assert report.ok and report.events == before + 2 * len(rows) + 1  # every turn and one erasure record: no fork
    by_seq = {ev.seq: ev for ev in led.events("alice")}
    for user_seq, user_digest, asst_seq, asst_digest, _rid in rows:  # every acknowledged event, where it was acked
        assert by_seq[int(user_seq)].digest == user_digest and by_seq[int(asst_seq)].digest == asst_digest
    assert mem_seq in report.erased and {e["seq"] for e in out["erased"]} <= set(report.erased)
    for _u, _ud, asst_seq, _ad, rid in rows:
        path = files.receipt_path(data, "alice", rid)
        if rid in out["receipts"]["withdrawn"]:
            continue
        checked = verify_bytes(path.read_bytes(), trusted=[key], data_dir=data)
        assert checked.verdict == "verified", (rid, [c for c in checked.checks if c.status == FAIL])
        if int(asst_seq) > record:  # asked after the erasure: the forgotten memory is never cited
            assert mem_seq not in cited_seqs(files.read_receipt_bytes(path))
    assert files_with_marker(data) == []


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review3_turn_lock_unlinked.py):
# Reviewer finding (pre-existing; delete_session, now also Engine.forget's): two processes can hold one turn lock.
#
# storage.files.receipts.files.session_turn_lock flocks DATA/merkle/<S>.lock, and control.steps.delete_session unlinks that file
# while its caller still holds the lock. A process already waiting for the lock (a CLI `ledger import` with a key, a
# repair, a second app on the same DATA_DIR) waits on the old inode and gets it when the deletion ends; the next
# locker opens the path, makes a new file and locks that at once. Both now hold "the" turn lock of S: the import
# signs its checkpoint in the middle of the other's turn, which is what the lock exists to prevent.
#
# Fix: never unlink a lock file that others may be waiting on (leave it; it holds no words — the session id is in
# its name only, like the watermark), or, if it must go, re-check after flock that the descriptor's inode is still
# the path's (fstat vs stat; retry on a mismatch), as lockfile implementations do.
# --------------------------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review3_retention_unlocked_import.py):
# Reviewer finding (pre-existing, in the path 733fce8 unified): retention deletes events imported after its idle check.
#
# Retention (webui.retention.forget_if_idle -> control.forget.forget_session_if_idle, or Engine.forget) checks that the
# session was last written before the cutoff under the session's turn lock, then deletes it (delete_session). The idle
# check and the deletion are not one step against the ledger: they rely on every writer taking the turn lock. But
# `python -m ledger import` takes it only when it signs a checkpoint, and on PostgreSQL the CLI has no signing key by
# default ("no checkpoint signed (no signing key: DATA is the database's URL …)"); on files likewise without
# RECEIPT_SIGNING_KEY. An import that lands between the check and PgLedger.delete_session is reported as imported
# (exit 0) and then deleted, and the certificate (signed over `count` read before it) does not cover it.
#
# Fix: make the check part of the deletion — PgLedger.delete_session(session, written_before=cutoff) checking
# sessions.updated_at and the size/head read for the certificate in the same transaction that holds the row lock
# (SELECT … FOR UPDATE), on files under the ledger's session flock; or have every append path (the import CLI
# included) take the turn lock.
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.pg
def test_an_import_after_the_idle_check_is_not_deleted_by_retention(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    data.mkdir()
    src = tmp_path / "in.jsonl"
    src.write_text('{"role": "user", "text": "imported just now"}\n')
    with pg_stores(pg_url, data, pool_size=2) as stores:
        engine = Engine(data, llm=LLM(api_key=""), stores=stores)
        engine.remember(S, "an old memory")
        real = control_forget._last_written
        imported: list[subprocess.CompletedProcess[str]] = []

        def checked_then_imported(w: Any, session: str) -> float | None:
            written = real(w, session)  # the idle check's answer: idle (the old memory was written before the cutoff)
            env = {**os.environ, "DATABASE_URL": pg_url, "PYTHONPATH": str(ROOT)}
            env.pop("RECEIPT_SIGNING_KEY", None)
            imported.append(subprocess.run(
                [sys.executable, "-m", "ledger", "import", pg_url, session, str(src)],
                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
            ))  # another process's import, which takes no turn lock without a signing key
            return written

        monkeypatch.setattr(control_forget, "_last_written", checked_then_imported)
        time.sleep(0.2)
        cutoff = time.time()  # after the old memory, before the import: idle when checked, written when deleted
        time.sleep(0.2)
        forget_if_idle(engine, S, cutoff)
        assert imported and imported[0].returncode == 0, imported[0].stderr if imported else "no import ran"
        assert engine.ledger.exists(S), "retention deleted the session with the event imported after its idle check"


@pytest.mark.pg
def test_a_forget_whose_session_grew_after_its_count_deletes_nothing_and_leaves_no_certificate(tmp_path: Path, pg_url: str) -> None:
    """The same window for an explicit forget: an append that lands after the certificate's count was read makes
    the deletion refuse (the certificate would not cover it) — one PlanError line, the session whole, no journal."""
    from control.forget import forget_session, pending, pending_sessions
    from control.plan import PlanError
    from storage.pg.receipts import PgReceipts

    data = tmp_path / "data"
    data.mkdir()
    with pg_stores(pg_url, data, pool_size=2) as stores:
        engine = Engine(data, llm=LLM(api_key=""), stores=stores)
        engine.remember(S, "an old memory")
        real_ids = PgReceipts.receipt_ids

        def counted_then_appended(self: PgReceipts, session: str) -> list[str]:
            stores.ledger.append(session, "user", "appended after the count")  # as an import in another process
            return real_ids(self, session)

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(PgReceipts, "receipt_ids", counted_then_appended)
            with pytest.raises(PlanError, match="holds 2 events now, not the 1"):
                forget_session(data, S, key=engine.key, stores=stores)
        assert stores.ledger.head(S)[0] == 2
        assert pending(data) == [] and pending_sessions(data, stores) == [] and not list((data / "erasures").glob("erasure-*.json"))
        forget_session(data, S, key=engine.key, stores=stores)  # asked again, it deletes both
        assert not stores.ledger.exists(S)
