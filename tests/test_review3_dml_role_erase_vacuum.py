"""Reviewer finding (c7dbcb0/ccec788; fixed as: never silent — Database.vacuum logs the tables PostgreSQL skipped, and
docs/BACKENDS.md says erasure's VACUUM needs the tables' owner). As found: erasure by the documented app role leaves
the erased words in live-readable tuples.

docs/BACKENDS.md now says the app and the writing commands can run as a role with SELECT, INSERT, UPDATE and
DELETE on the tables. PgLedger.erase (and delete_session, PgReceipts' and the index's forget) promise that after
the commit `VACUUM` makes the old row versions unreachable. But only a table's owner (or a superuser) may VACUUM
it: for that role PostgreSQL skips the table with a WARNING notice that nobody reads, so the erased line's old
version stays a tuple of the heap (readable with pageinspect, in a physical backup, by any long snapshot) until
autovacuum happens to come by. The owner's erasure leaves nothing; the same call by the documented role does.

Fix: at start (or before an erasure) find out whether this role may VACUUM the tables (pg_class.relowner /
pg_has_role(relowner, 'USAGE'), or PG 16's pg_maintain) and either refuse erasure/deletion with one line, or
collect the 'skipping' notices (conn.add_notice_handler) and report the VACUUM as not done; say in BACKENDS.md
that erasure needs the owner's role (or a MAINTAIN grant).
"""

from __future__ import annotations

import logging
from pathlib import Path

import psycopg
import pytest

from chat.engine import Engine
from chat.llm import LLM
from storage.stores import pg_stores
from tests.test_pg_schema_roles import _role

S = "alice"
WORDS = b"I keep bees on the roof"


def _words_in_a_tuple(admin_url: str) -> bool:
    """True when some tuple of `events` (live or dead, still pointed at) holds WORDS (pageinspect, as superuser)."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
        row = conn.execute("SELECT pg_relation_size('events') / current_setting('block_size')::int").fetchone()
        assert row is not None
        for page in range(int(row[0])):
            hit = conn.execute(
                "SELECT bool_or(position(%s::bytea in t_data) > 0) FROM heap_page_items(get_raw_page('events', %s))",
                (WORDS, page),
            ).fetchone()
            if hit is not None and hit[0]:
                return True
    return False


def _erase_as(url: str, data: Path) -> None:
    with pg_stores(url, data, pool_size=2) as stores:
        stores.ledger.erase(S, [0])


def _remembered(tmp_path: Path, pg_url: str) -> Path:
    """A data directory whose session S holds the words to erase and one line after them, on `pg_url`."""
    data = tmp_path / "data"
    data.mkdir()
    with pg_stores(pg_url, data, pool_size=2) as stores:
        eng = Engine(data, llm=LLM(api_key=""), stores=stores)
        eng.remember(S, WORDS.decode())
        eng.remember(S, "another line")
    return data


@pytest.mark.pg
def test_an_erasure_by_a_role_that_may_not_vacuum_says_so_and_the_owners_vacuum_finishes_it(
    tmp_path: Path, pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    data = _remembered(tmp_path, pg_url)
    app_role = _role(
        pg_url,
        "GRANT USAGE ON SCHEMA public TO {role}",
        "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}",
    )
    with caplog.at_level(logging.WARNING, logger="storage.pg"):
        _erase_as(app_role, data)
    said = [r.getMessage() for r in caplog.records if r.name == "storage.pg"]
    assert any("VACUUM skipped" in m and '"events"' in m for m in said), said  # not silent: the operator is told
    with pg_stores(pg_url, data, pool_size=2) as owner:
        assert owner.ledger.vacuum() == []  # the owner's VACUUM is not skipped
    assert not _words_in_a_tuple(pg_url), "the erased words are still a tuple of events after the owner's VACUUM"


@pytest.mark.pg
def test_an_erasure_by_the_owner_leaves_no_tuple_with_the_words(tmp_path: Path, pg_url: str) -> None:
    data = _remembered(tmp_path, pg_url)
    _erase_as(pg_url, data)
    assert not _words_in_a_tuple(pg_url)
