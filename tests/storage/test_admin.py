"""storage.admin, what the `ledger`, `search` and `db` commands use so that cli/ never names a backend (issue 29):
each contract-shaped function answers the same on both backends, over one `stores` fixture with ids `files` and
`pg`; and cli/ itself names none (the issue's grep, and no import of storage.files, storage.pg or storage.common)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger import importer
from ledger.repair import RepairRefused
from receipts.keys import SigningKey
from storage import admin
from storage.stores import Stores, file_stores, pg_stores

ROOT = Path(__file__).resolve().parents[2]


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


def _lines(*texts: str) -> list[bytes]:
    return [json.dumps({"role": "user", "text": t}).encode() + b"\n" for t in texts]


class TestEitherBackend:
    def test_an_import_is_staged_committed_recorded_and_then_found(self, stores: Stores) -> None:
        led = stores.ledger
        staged = admin.stage_import(led, "alice", _lines("I adopted a cat", "Her name is Miso"), content=True)
        assert staged.sha256 is not None
        assert admin.previous_import(led, "alice", staged.sha256) is None
        events = importer.commit(led, staged)
        admin.record_import(led, "alice", staged.sha256, events, "chat.jsonl")
        seen = admin.previous_import(led, "alice", staged.sha256)
        assert seen is not None and led.head("alice")[0] == 2

    def test_the_listing_counts_and_verifies_every_session(self, stores: Stores) -> None:
        stores.ledger.append("alice", "user", "hello")
        stores.ledger.append("alice", "assistant", "hi")
        stores.ledger.append("bob", "user", "hey")
        rows = admin.list_sessions(stores.ledger)
        assert [(r.session, r.lines, r.ok) for r in rows] == [("alice", 2, True), ("bob", 1, True)]
        assert admin.session_bytes(stores.ledger, ["alice"]) > admin.session_bytes(stores.ledger, ["bob"]) > 0

    def test_a_checkpoint_is_signed_under_the_session_lock(self, stores: Stores) -> None:
        stores.ledger.append("alice", "user", "hello")
        with admin.signing(stores.ledger, "alice") as sign:
            cp = sign(SigningKey.generate())
        assert cp["body"]["tree_size"] == 1

    def test_a_verifying_session_has_nothing_to_repair(self, stores: Stores) -> None:
        stores.ledger.append("alice", "user", "hello")
        d = admin.diagnose(stores.ledger, "alice")
        assert d.report.ok and d.suggest_seq is None

    def test_a_repair_of_a_verifying_session_is_refused_and_changes_nothing(self, stores: Stores) -> None:
        for text in ("one", "two", "three"):
            stores.ledger.append("alice", "user", text)
        before = stores.ledger.head("alice")
        with pytest.raises(RepairRefused, match="the ledger verifies"):
            admin.repair(stores, "alice", 2, None, "no checkpoint signed (test)")
        assert stores.ledger.head("alice") == before


class TestTheDataDirectory:
    def test_the_file_index_is_never_made_by_asking(self, tmp_path: Path) -> None:
        assert not admin.has_file_index(tmp_path)
        led = admin.file_ledger(tmp_path)
        led.append("alice", "user", "hello")
        index = admin.file_index(tmp_path, led)
        try:
            assert admin.events_to_index(index, "alice") == 1
            index.index_session("alice")
            assert admin.events_to_index(index, "alice") == 0
            assert admin.index_totals(index) == (1, 1)
        finally:
            index.close()
            led.close()
        assert admin.has_file_index(tmp_path) and admin.file_index_bytes(tmp_path) > 0


def test_cli_names_no_backend() -> None:
    """The issue's grep over cli/*.py prints nothing."""
    pattern = re.compile(r'on_files|\.kind ?(==|!=)|cast\("Pg|PgLedger|PgIndex|from storage\.(pg|files|common)|import storage\.(pg|files|common)')
    found = [f"{p.name}:{n}: {line}" for p in sorted((ROOT / "cli").glob("*.py")) for n, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert found == []
