"""The storage contract's methods that let chat/, bundle/, webui/ and app.py stop asking which backend they have
(issue 29; storage/api_faces.py lists them): each answers the same question on both backends, over one `stores`
fixture with ids `files` and `pg`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from receipts.stores import ImportFailed
from storage.stores import Stores, file_stores, pg_stores


@pytest.fixture(params=["files", pytest.param("pg", marks=pytest.mark.pg)])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    data = tmp_path / "data"
    (data / "sessions").mkdir(parents=True)
    opened = file_stores(data) if request.param == "files" else pg_stores(request.getfixturevalue("pg_url"), data)
    try:
        yield opened
    finally:
        if opened.database is None:
            opened.index.close()
            opened.ledger.close()
        opened.close()


class TestLedger:
    def test_a_session_never_written_has_no_last_write(self, stores: Stores) -> None:
        assert stores.ledger.last_written("nobody") is None

    def test_an_append_dates_the_session_and_idle_sessions_follow_that_date(self, stores: Stores) -> None:
        before = time.time() - 5
        stores.ledger.append("alice", "user", "hello")
        written = stores.ledger.last_written("alice")
        assert written is not None and written >= before
        assert stores.ledger.idle_sessions(written + 60) == ["alice"]
        assert stores.ledger.idle_sessions(before - 60) == []

    def test_only_a_record_kept_outside_data_dir_says_where_it_is(self, stores: Stores) -> None:
        elsewhere = stores.ledger.kept_elsewhere()
        if stores.database is None:
            assert elsewhere is None
        else:
            assert elsewhere == f"PostgreSQL at {stores.where}"  # the shown name: never a password


class TestReceiptRows:
    def test_derived_rows_have_a_generation_only_when_they_are_derived(self, stores: Stores) -> None:
        generation = stores.rows.derived_generation()
        restored = stores.rows.restore_derived()
        if stores.database is None:
            assert isinstance(generation, int) and restored == generation
        else:
            assert generation is None and restored is None


class TestProposals:
    def test_a_proposal_is_saved_loaded_and_spent_once(self, stores: Stores) -> None:
        store = stores.receipts.proposals(600)
        assert len(store.secret()) == 32 and store.secret() == store.secret()
        pending = {"v": 1, "session": "alice", "expires": int(time.time()) + 600, "message": "a question"}
        store.save("alice", "ab" * 16, pending)
        assert store.load("ab" * 16) == pending
        assert store.spend("ab" * 16, "used") and not store.spend("ab" * 16, "used")
        assert store.load("ab" * 16) is None and store.spent("ab" * 16) == "used"
        store.forget_session("alice")
        assert store.spent("ab" * 16) is None


class TestImports:
    def test_an_empty_store_has_no_imports_and_a_session_id_is_taken(self, stores: Stores) -> None:
        imports = stores.ledger.imports()
        assert imports.origins() == [] and imports.sweep() == []
        assert imports.same_ledger("alice", "ed25519:x", 1, "00" * 32) is None
        assert not imports.taken("alice")
        stores.ledger.append("alice", "user", "hello")
        assert imports.taken("alice")

    def test_opening_an_import_that_is_not_there_is_refused_on_postgresql(self, stores: Stores) -> None:
        if stores.database is None:
            pytest.skip("on files an imported session is a folder: opening a missing one finds an empty ledger")
        with pytest.raises(ImportFailed, match="no such import"), stores.ledger.imports().open("nothing-here"):
            pass
