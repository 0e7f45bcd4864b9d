"""A forget on PostgreSQL leaves no file holding the forgotten words in any data directory (issue 14, issue 28 item 3):
not the receipt copies another replica keeps in its own DATA_DIR (read, restarted, or an app replica that keeps
none), not the files `python -m ledger migrate` left where they were. The database's own rows are
tests/storage/test_control_backends.py's; a pending erasure seen by every replica is tests/storage/test_pg_pending_erasure_replicas.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from chat.engine import Engine
from chat.llm import LLM
from cli import prog_ledger as ledger_cli
from control import forget as cf
from storage.stores import pg_stores

from ..forget_support import MARKER, files_with_marker, marked_session

# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review_pg_replica_erasure.py):
# Review (issue 14): an erasure on one replica and the receipt copies another replica keeps in its own DATA_DIR.
#
# Every replica writes a copy of each receipt it issues under DATA_DIR/receipt-copies/ (storage.stores.RECEIPT_COPIES).
# PgReceipts.replace_receipt / delete_receipt / forget_session only touch the copies folder of the Stores that runs
# the forget, so a memory forgotten through replica A stays verbatim in replica B's copies of the receipts B issued.
# --------------------------------------------------------------------------------------------------------------------


S = "alice"


@pytest.fixture
def two_replicas(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv(
        "RECEIPT_SIGNING_KEY", "11" * 32
    )  # one key for every replica, as docs/guides/scaling-out.md says
    out = []
    for name in ("a", "b"):
        data = tmp_path / name
        data.mkdir()
        stores = pg_stores(pg_url, data, pool_size=2)
        out.append((data, stores, Engine(data, llm=LLM(api_key=""), stores=stores)))
    try:
        yield out
    finally:
        for _d, st, _e in out:
            st.close()


@pytest.mark.pg
def test_forgetting_a_memory_on_one_replica_leaves_no_copy_of_its_words_on_another(two_replicas) -> None:  # type: ignore[no-untyped-def]
    (data_a, stores_a, eng_a), (data_b, _stores_b, eng_b) = two_replicas
    mem, _turns = marked_session(eng_b, S)  # the visitor's turns were answered by replica B
    assert list((data_b / "receipt-copies").rglob("*.json")) == []  # an app replica keeps no copy (fixed: rows only)
    cf.forget(data_a, S, [mem], stores=stores_a, key=eng_a.key)  # the visitor's forget lands on replica A
    assert files_with_marker(data_a) == []
    assert files_with_marker(data_b) == [], "replica B still holds the erased words in its receipt copies"


@pytest.mark.pg
def test_forgetting_a_session_on_one_replica_leaves_no_copy_on_another(two_replicas) -> None:  # type: ignore[no-untyped-def]
    (data_a, stores_a, eng_a), (data_b, _stores_b, eng_b) = two_replicas
    marked_session(eng_b, S)
    cf.forget_session(data_a, S, stores=stores_a, key=eng_a.key)
    left = sorted(p.name for p in (data_b / "receipt-copies").rglob("*.json"))
    assert left == [], f"replica B keeps {len(left)} receipt copies of a deleted session"


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review6_pg_receipt_copies_other_replica.py):
# Reviewer finding (issue 28 item 3, PostgreSQL with several replicas / data directories): a receipt copy a process
# keeps in its own DATA_DIR/receipt-copies/ (`python -m chat` on PostgreSQL, storage.stores receipt_copies=True) is
# redacted or deleted only by a forget run with that same DATA_DIR. A forget run on another replica (another DATA_DIR,
# the same database) redacts the database's receipt rows and leaves the first replica's copy holding the forgotten word,
# and nothing pending tells the first replica to finish it: the word stays on its disk for good.
#
# What is asserted, and when: B's forget runs in another process with another DATA_DIR and cannot reach A's disk, and
# the copy A keeps is, by design, the receipt's plain bytes (the visitor reads it with `receipts show`; the test
# checks it holds the word before the forget). So no step of B's can remove it; what can be promised is that A never
# serves it and does not keep it past its next look at the database: A checks its copies against the rows when its
# store opens (start-up) and before it reads, lists or writes a receipt of the session, rewriting a copy whose row was
# redacted and deleting one whose row is gone. The test checks each of those two moments, with nothing pending.
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.pg
@pytest.mark.parametrize("then", ["a_reads", "a_restarts"])
def test_a_forget_on_another_replica_leaves_no_receipt_copy_with_the_word(
    then: str, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_dir.mkdir()
    b_dir.mkdir()
    a = Engine(
        a_dir, llm=LLM(api_key=""), stores=pg_stores(pg_url, a_dir, receipt_copies=True)
    )  # as `python -m chat` opens it
    b = Engine(b_dir, llm=LLM(api_key=""), stores=pg_stores(pg_url, b_dir))
    try:
        mem = a.remember("s1", f"My locker code word is {MARKER}")
        a.turn("s1", "What is my locker code word?")  # the offline stand-in quotes it; its receipt discloses it
        assert files_with_marker(a_dir / "receipt-copies"), "the copy A keeps holds the word before the forget"
        cf.forget(b_dir, "s1", [mem.seq], stores=b.stores, key=b.key)
        assert cf.pending_sessions(b_dir, b.stores) == []
        (copy,) = (a_dir / "receipt-copies" / "s1").glob("rcpt_*.json")
        if then == "a_reads":  # A's next read of the session's receipts (its download, `receipts show` through it)
            served = a.stores.receipts.read_receipt("s1", copy.stem)
            assert MARKER.encode() not in served
        else:  # A's next start: a new process opening the same DATA_DIR on the database
            pg_stores(pg_url, a_dir, receipt_copies=True).close()
        assert files_with_marker(a_dir) == []
        if copy.exists():  # rewritten from the row: the redacted receipt, byte for byte
            assert copy.read_bytes() == b.stores.receipts.read_receipt("s1", copy.stem)
    finally:
        a.close()
        b.close()


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review6_pg_migrated_files_keep_words.py):
# Reviewer finding (issue 28, PostgreSQL): `python -m ledger migrate DATA_DIR` copies the ledgers and receipts into
# the database and leaves the files where they were (events.jsonl, receipts/rcpt_*.json, index.sqlite). The app then
# runs on the database with that same DATA_DIR (where its signing key is). A forget erases the database's ledger rows
# and redacts its receipt rows, and the certificate says the words are gone, but the migrated files in DATA_DIR still
# hold them — and `python -m receipts show DATA_DIR/sessions/S/receipts/rcpt_….json` prints them (its settle looks
# only for a file journal).
#
# The fix (control.steps.drop_file_copy, docs/BACKENDS.md): the database is the record once migrated, so a forget or a
# session's deletion on PostgreSQL deletes that session's migrated files and index rows from DATA_DIR; another
# session's migrated files are left as they are.
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.pg
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
        assert (data / "sessions" / "s2" / "events.jsonl").is_file(), (
            "another session's migrated files are left as they are"
        )
    finally:
        eng.close()
