"""Reviewer finding (issue 28, PostgreSQL): `python -m ledger migrate DATA_DIR` copies the ledgers and receipts into
the database and leaves the files where they were (events.jsonl, receipts/rcpt_*.json, index.sqlite). The app then
runs on the database with that same DATA_DIR (where its signing key is). A forget erases the database's ledger rows
and redacts its receipt rows, and the certificate says the words are gone, but the migrated files in DATA_DIR still
hold them — and `python -m receipts show DATA_DIR/sessions/S/receipts/rcpt_….json` prints them (its settle looks
only for a file journal).

The fix (control.steps.drop_file_copy, docs/BACKENDS.md): the database is the record once migrated, so a forget or a
session's deletion on PostgreSQL deletes that session's migrated files and index rows from DATA_DIR; another
session's migrated files are left as they are."""

from __future__ import annotations

from pathlib import Path

import pytest

from chat.engine import Engine
from chat.llm import LLM
from cli import prog_ledger as ledger_cli
from control import forget as cf
from storage.stores import pg_stores

from .forget_support import MARKER, files_with_marker

pytestmark = pytest.mark.pg


def test_a_forget_after_migration_leaves_no_file_in_data_dir_with_the_word(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    data = tmp_path / "data"
    files_engine = Engine(data, llm=LLM(api_key=""))
    mem = files_engine.remember("s1", f"My locker code word is {MARKER}")
    files_engine.turn("s1", "What is my locker code word?")
    files_engine.remember("s2", "My umbrella is green")
    files_engine.close()
    monkeypatch.setenv("DATABASE_URL", pg_url)
    assert ledger_cli.main(["migrate", str(data)]) == 0, capsys.readouterr()
    monkeypatch.delenv("DATABASE_URL")
    eng = Engine(data, llm=LLM(api_key=""), stores=pg_stores(pg_url, data))
    try:
        cf.forget(data, "s1", [mem.seq], stores=eng.stores, key=eng.key)
        assert cf.pending_sessions(data, eng.stores) == []
        left = [str(Path(p).relative_to(data)) for p in files_with_marker(data)]
        assert left == [], left
        assert (data / "sessions" / "s2" / "events.jsonl").is_file(), "another session's migrated files are left as they are"
    finally:
        eng.close()
