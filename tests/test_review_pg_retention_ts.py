"""Review (issue 14): retention on PostgreSQL dates a session by its last event's `ts` (PgLedger.last_written),
which `python -m ledger import` takes from the imported file (ledger/importer.py: "A message without `ts` gets the
time the import started"). On files the same session is dated by its log's mtime: the moment of the import. So a
history imported a minute ago with its original dates is "idle" on PostgreSQL and the next retention sweep deletes
it (forget_session_if_idle), while on files it is kept for RETENTION_HOURS.
"""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest

from chat.engine import Engine
from chat.llm import LLM
from storage.stores import Stores, file_stores, pg_stores
from webui.retention import idle_sessions

S = "alice"
OLD = [{"role": "user", "text": f"note {i} from my old diary", "ts": "2023-05-01T10:00:00Z"} for i in range(3)]


def _imported_just_now(stores: Stores, data: Path) -> list[str]:
    lines = [orjson.dumps(m) + b"\n" for m in OLD]
    stores.ledger.import_jsonl(S, lines)
    eng = Engine(data, llm=LLM(api_key=""), stores=stores)
    return idle_sessions(data, 24.0, time.time(), engine=eng)


def test_on_files_a_session_imported_just_now_is_not_idle(tmp_path: Path) -> None:
    stores = file_stores(tmp_path)
    assert _imported_just_now(stores, tmp_path) == []


@pytest.mark.pg
def test_on_postgresql_a_session_imported_just_now_is_not_idle(tmp_path: Path, pg_url: str) -> None:
    with pg_stores(pg_url, tmp_path, pool_size=2) as stores:
        assert _imported_just_now(stores, tmp_path) == [], "retention would delete a session written a moment ago"
