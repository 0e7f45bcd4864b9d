"""The storage contract (storage/api.py) on both backends: the methods control asks instead of the backend's kind.

One `stores` fixture with ids `files` and `pg`; each test states a property every backend must have. The erasure
and deletion paths built on these are covered end to end by the control tests (test_control_backends.py and the
forget / recover / settle tests), which run on both backends too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.api import Stores, file_stores, pg_stores

S = "alice"


@pytest.fixture(params=["files", pytest.param("pg", marks=pytest.mark.pg)])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    data = tmp_path / "data"
    data.mkdir()
    opened = (
        file_stores(data)
        if request.param == "files"
        else pg_stores(request.getfixturevalue("pg_url"), data, pool_size=2)
    )
    try:
        yield opened
    finally:
        opened.close()


def test_storage_stores_still_exports_the_contracts_stores() -> None:
    import storage.stores

    assert storage.stores.Stores is Stores and storage.stores.open_stores.__module__ == "storage.api"


def test_last_written_is_none_for_an_unknown_session_and_recent_after_an_append(stores: Stores) -> None:
    import time

    assert stores.ledger.last_written(S) is None
    before = time.time() - 60
    stores.ledger.append(S, "user", "hello")
    written = stores.ledger.last_written(S)
    assert written is not None and written >= before


def test_no_erasure_is_pending_in_a_fresh_store(stores: Stores) -> None:
    stores.ledger.append(S, "user", "hello")
    assert stores.ledger.pending_erasures(S) == [] and stores.ledger.erasure_pending(S) is False


def test_a_kept_journal_is_done_once_its_done_runs(stores: Stores) -> None:
    stores.ledger.append(S, "user", "hello")
    done = stores.ledger.keep_journal(S, b'{"scope":"session"}\n', b"{}")
    done()
    assert stores.ledger.erasure_pending(S) is False
    assert not (stores.data_dir / "erasures" / f".pending-{S}.json").exists()


def test_nothing_is_quarantined_holding_a_word_never_written(stores: Stores) -> None:
    stores.ledger.append(S, "user", "hello")
    assert stores.ledger.quarantined_with(S, [b"never written"]) == []


def test_deleting_a_session_leaves_nothing_of_it_and_is_idempotent(stores: Stores) -> None:
    stores.ledger.append(S, "user", "a word to delete")
    stores.index.index_session(S)
    assert stores.ledger.delete_session(S) is True
    stores.index.drop_session(S)
    assert not stores.ledger.exists(S) and stores.ledger.last_written(S) is None
    assert stores.index.search(S, "word").results == []
    assert stores.ledger.delete_session(S) is False
    stores.index.drop_session(S)  # again: nothing left to drop


def test_the_index_keeps_a_session_the_ledger_still_holds_when_asked_to_drop_it_first(stores: Stores) -> None:
    """drop_session runs before and after the ledger's deletion; before it, the session stays searchable on files
    (the purge needs the ledger's deletion first) and a retry after a failed deletion deletes it all on either."""
    stores.ledger.append(S, "user", "kept words")
    stores.index.index_session(S)
    stores.index.drop_session(S)
    assert stores.ledger.exists(S)


def test_the_contracts_housekeeping_steps_answer_on_a_store_with_nothing_to_do(stores: Stores) -> None:
    stores.ledger.append(S, "user", "hello")
    assert stores.index.scrub_copies() == ()
    assert stores.receipts.scrub_temps(S) == ()
    stores.receipts.sync_deletes(S)
    assert isinstance(stores.receipts.vacuum(), list) and isinstance(stores.ledger.vacuum(), list)
    assert stores.leftovers(S) == ()


def test_the_session_state_forgets_settings_and_suggestions(stores: Stores) -> None:
    from storage.api import Suggestion

    stores.ledger.append(S, "user", "hello")
    settings, suggestions = stores.session_state.settings(), stores.session_state.suggestions()
    assert settings.set_consent(S, True, create=True) is True and settings.get_consent(S) is True
    suggestions.add(S, [Suggestion(0, "evt_a", 0, "evt_b", "model:x", "2026-01-01T00:00:00.000000Z")])
    assert len(suggestions.all(S)) == 1
    stores.session_state.forget_session(S)
    settings.forget_session(S)  # on files the session's folder takes these along; forget them explicitly here
    suggestions.forget_session(S)
    assert settings.get_consent(S) is False and suggestions.all(S) == []


def test_an_index_opened_on_first_use_is_closed_by_close_index(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    lazy = file_stores(data, lazy=True)
    assert not (data / "index.sqlite").exists(), "opening lazily must not create the index"
    lazy.index.search(S, "anything")
    assert (data / "index.sqlite").exists()
    lazy.close_index()
    assert lazy._index is None
