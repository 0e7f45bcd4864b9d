"""A file-backed data directory's receipts, .cites records, checkpoints and trees moved into PostgreSQL
(storage/migrate_receipts.py): the same bytes, and every old receipt's proofs are the migrated tree's."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chat.engine import Engine
from chat.llm import LLM
from receipts.body import parse_receipt
from receipts.stores import PendingCites
from storage.files.receipts import checkpoint_files as checkpoints_files
from storage.files.receipts import files

pytestmark = pytest.mark.pg
LEFT = "rcpt_" + "0f" * 16  # a turn killed between its answer and its receipt left this .cites record


@pytest.fixture(autouse=True)
def no_groq(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GROQ_API_KEY", "GROQ_MODEL", "GROQ_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("files")
    engine = Engine(tmp, llm=LLM(api_key=""))
    for fact in ("I live in Leeds", "my dog is called Rex", "I work as a nurse"):
        engine.remember("alice", fact)
    for question in ("where do I live?", "what is my dog called?", "what is my job?"):
        engine.turn("alice", question, k=4)
    engine.turn("bob", "hello there", k=4)
    files.write_cites(tmp, "alice", LEFT, 3, [0, 1])
    return tmp


@pytest.fixture
def migrated(data: Path, pg_url: str) -> Iterator[tuple[Any, Any]]:
    from storage.migrate import migrate
    from storage.migrate_receipts import migrate_all
    from storage.pg.connect import Database
    from storage.pg.ledger import PgLedger
    from storage.pg.receipts import PgReceipts

    with Database(pg_url) as db:
        assert {m.status for m in migrate(data, PgLedger(db))} == {"copied"}
        yield PgReceipts(db), migrate_all(data, db)


def test_every_receipt_is_copied_byte_for_byte_with_its_row(data: Path, migrated: tuple[Any, Any]) -> None:
    store, tally = migrated
    assert (tally.receipts, tally.already, tally.skipped) == (4, 0, [])
    index = sqlite3.connect(data / "index.sqlite")
    for session in ("alice", "bob"):
        ids = [p.stem for p in files.list_receipts(data, session)]
        assert store.receipt_ids(session) == ids
        for rid in ids:
            assert store.read_receipt(session, rid) == files.receipt_path(data, session, rid).read_bytes()
            want = index.execute("SELECT user_seq, assistant_seq, tree_size, root, memories, provider, model FROM receipts WHERE receipt_id = ?", (rid,)).fetchone()
            with store.db.connection() as conn:
                got = conn.execute("SELECT user_seq, assistant_seq, tree_size, root, memories, provider, model FROM receipts WHERE receipt_id = %s", (rid,)).fetchone()
            assert got == want


def test_every_old_receipts_proofs_are_the_migrated_trees(data: Path, migrated: tuple[Any, Any]) -> None:
    store, _tally = migrated
    for session in ("alice", "bob"):
        tree = store.tree(session)
        for rid in store.receipt_ids(session):
            body = parse_receipt(store.read_receipt(session, rid)).signed_body
            size = body["checkpoint"]["body"]["tree_size"]
            assert tree.root(size).hex() == body["checkpoint"]["body"]["root"]
            for cited in (body["query"], body["response"], *body["memories"]):
                assert [h.hex() for h in tree.inclusion_proof(cited["event"]["seq"], size)] == cited["proof"]


def test_checkpoints_and_cites_records_are_copied(data: Path, migrated: tuple[Any, Any]) -> None:
    store, tally = migrated
    assert (tally.checkpoints, tally.cites, tally.trees) == (2, 1, 2)
    for session in ("alice", "bob"):
        assert store.checkpoint_bytes(session) == checkpoints_files.checkpoint_path(data, session).read_bytes()
    assert store.pending_cites("alice") == [PendingCites(LEFT, 3, (0, 1))]
    index = sqlite3.connect(data / "index.sqlite")
    want = index.execute("SELECT cited_seq, answer_seq FROM receipt_cites WHERE session = 'alice'").fetchall()
    assert want and sorted(store.citing_answers("alice", range(20))) == sorted(want)


def test_a_rerun_copies_nothing_again(data: Path, migrated: tuple[Any, Any]) -> None:
    from storage.migrate_receipts import migrate_all

    store, _tally = migrated
    again = migrate_all(data, store.db)
    assert (again.receipts, again.already, again.replaced, again.checkpoints, again.skipped) == (0, 4, 0, 0, [])
    assert store.pending_cites("alice") == [PendingCites(LEFT, 3, (0, 1))]


def test_a_session_whose_ledger_is_not_in_the_database_is_skipped_and_named(data: Path, pg_url: str) -> None:
    from storage.migrate import migrate
    from storage.migrate_receipts import migrate_all
    from storage.pg.connect import Database
    from storage.pg.ledger import PgLedger
    from storage.pg.receipts import PgReceipts

    with Database(pg_url) as db:
        migrate(data, PgLedger(db), sessions=["bob"])
        tally = migrate_all(data, db)
        assert tally.skipped == ["alice: the database holds 0 of its 9 events (migrate the ledger first)"]
        assert PgReceipts(db).receipt_ids("alice") == [] and tally.receipts == 1


def test_the_step_registers_once_for_ledger_migrate(pg_url: str) -> None:
    from storage import migrate
    from storage import migrate_receipts as receipts_migrate

    before = list(migrate.EXTRA_STEPS)
    try:
        # from a list without it: an earlier test of the same run may have registered it already (ledger migrate does)
        migrate.EXTRA_STEPS[:] = [s for s in before if s[1] is not receipts_migrate.migrate_receipts]
        before_register = list(migrate.EXTRA_STEPS)
        receipts_migrate.register()
        receipts_migrate.register()
        assert migrate.EXTRA_STEPS[: len(before_register)] == before_register
        assert [name for name, _ in migrate.EXTRA_STEPS[len(before_register) :]] == ["receipts, .cites, checkpoints, Merkle trees"]
    finally:
        migrate.EXTRA_STEPS[:] = before
