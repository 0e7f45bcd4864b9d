"""Reviewer finding (pre-existing, in the path 733fce8 unified): retention deletes events imported after its idle check.

Retention (webui.retention.forget_if_idle -> control.forget.forget_session_if_idle, or Engine.forget) checks that the
session was last written before the cutoff under the session's turn lock, then deletes it (delete_session). The idle
check and the deletion are not one step against the ledger: they rely on every writer taking the turn lock. But
`python -m ledger import` takes it only when it signs a checkpoint, and on PostgreSQL the CLI has no signing key by
default ("no checkpoint signed (no signing key: DATA is the database's URL …)"); on files likewise without
RECEIPT_SIGNING_KEY. An import that lands between the check and PgLedger.delete_session is reported as imported
(exit 0) and then deleted, and the certificate (signed over `count` read before it) does not cover it.

Fix: make the check part of the deletion — PgLedger.delete_session(session, written_before=cutoff) checking
sessions.updated_at and the size/head read for the certificate in the same transaction that holds the row lock
(SELECT … FOR UPDATE), on files under the ledger's session flock; or have every append path (the import CLI
included) take the turn lock.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import control.forget as control_forget
from chat.engine import Engine
from chat.llm import LLM
from storage.stores import pg_stores
from webui.retention import forget_if_idle

ROOT = Path(__file__).resolve().parents[1]
S = "alice"


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
