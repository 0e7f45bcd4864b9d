"""The PostgreSQL schema's version, the roles that may use a database, and the password in log lines.

A start whose database records this code's schema version writes nothing (so a role that may only read and write
the tables can use a database its owner made, and a read-only one can verify it); an older version is completed
and recorded; a newer one is refused before anything is written. The pool's own log lines never carry the password,
in whatever form libpq quotes it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import secrets
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from chat.engine import Engine
from chat.llm import LLM
from storage import BackendError, redact, scrub
from storage.pg import sql
from storage.pg.connect import Database
from storage.stores import pg_stores

ROOT = Path(__file__).resolve().parents[2]
S = "alice"


def _role(admin_url: str, *grants: str) -> str:
    """A new login role with `grants` (statements with {role}); its URL on the same database."""
    role = f"r_{secrets.token_hex(4)}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        for g in grants:
            admin.execute(g.format(role=role))
    return admin_url.replace("://mre@", f"://{role}@")


def _cli(url: str, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def _version(url: str) -> str | None:
    with psycopg.connect(url) as conn:
        row = conn.execute(sql.GET_SCHEMA_VERSION).fetchone()
    return None if row is None else str(row[0])


@pytest.mark.pg
def test_a_read_only_role_lists_exports_and_verifies_a_database_its_owner_made(tmp_path: Path, pg_url: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    with pg_stores(pg_url, data, pool_size=2) as stores:
        eng = Engine(data, llm=LLM(api_key=""), stores=stores)
        eng.remember(S, "I keep bees on the roof")
        turn = eng.turn(S, "Where do I keep bees?")
        rfile = tmp_path / "r.json"
        rfile.write_bytes(stores.receipts.read_receipt(S, turn.receipt_id))
    reader = _role(pg_url, "GRANT USAGE ON SCHEMA public TO {role}", "GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    led = _cli(reader, "ledger", "verify", reader, S, cwd=tmp_path)
    assert led.returncode == 0, led.stdout + led.stderr
    listed = _cli(reader, "ledger", "list", reader, cwd=tmp_path)
    assert listed.returncode == 0 and S in listed.stdout, listed.stdout + listed.stderr
    exported = _cli(reader, "ledger", "export", reader, S, cwd=tmp_path)
    assert exported.returncode == 0 and exported.stdout.count("\n") == 3, exported.stderr  # the memory, question, answer
    key = _cli(reader, "receipts", "pubkey", str(data), cwd=tmp_path)
    assert key.returncode == 0, key.stderr
    (tmp_path / "trusted.pub").write_text(key.stdout)
    rec = _cli(reader, "receipts", "verify", str(rfile), "--data", str(data), "--trust", str(tmp_path / "trusted.pub"), cwd=tmp_path)
    assert rec.returncode == 0, rec.stdout + rec.stderr
    assert "verdict: VERIFIED" in rec.stdout


@pytest.mark.pg
def test_a_read_only_role_that_tries_to_write_gets_one_line_not_a_traceback(tmp_path: Path, pg_url: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    with pg_stores(pg_url, data, pool_size=2) as stores:
        Engine(data, llm=LLM(api_key=""), stores=stores).remember(S, "I keep bees on the roof")
    reader = _role(pg_url, "GRANT USAGE ON SCHEMA public TO {role}", "GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    src = tmp_path / "in.jsonl"
    src.write_text('{"role": "user", "text": "a line to import"}\n')
    r = _cli(reader, "ledger", "import", reader, "bob", str(src), cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "Traceback" not in out, out
    assert "permission denied" in out and "PostgreSQL at" in out, out


# What SCHEMA_VERSION 4 creates (3 added supersession_suggestions and erasures_pending, 4 search_vectors). A start whose database records version 4 runs no DDL, so a table or index added
# without a version bump would never reach a database made before it: change SCHEMA → bump the version → update this.
SCHEMA_4_SHA256 = "6beda445b379d9c47f32b391455af77496285ac1a968801a11d70ccaa733d098"


def test_the_schema_cannot_change_without_a_new_schema_version() -> None:
    digest = hashlib.sha256("\n;\n".join(s.strip() for s in sql.SCHEMA).encode()).hexdigest()
    assert (sql.SCHEMA_VERSION, digest) == (4, SCHEMA_4_SHA256), "SCHEMA changed: bump SCHEMA_VERSION and pin the new digest"


@pytest.mark.pg
def test_an_older_schema_version_is_completed_and_recorded(pg_url: str) -> None:
    with Database(pg_url, max_size=1) as db, db.transaction() as conn:
        conn.execute("DROP TABLE ledger_cuts")
        conn.execute(sql.SET_SCHEMA_VERSION, ("1",))
    with Database(pg_url, max_size=1) as db, db.transaction() as conn:
        assert conn.execute("SELECT to_regclass('ledger_cuts')").fetchone() != (None,)
    assert _version(pg_url) == str(sql.SCHEMA_VERSION)


@pytest.mark.pg
def test_a_current_schema_is_not_touched_on_start(pg_url: str) -> None:
    Database(pg_url, max_size=1).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TABLE ledger_cuts")  # a start that ran the DDL would make it again
    Database(pg_url, max_size=1).close()
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT to_regclass('ledger_cuts')").fetchone() == (None,)


@pytest.mark.pg
def test_a_newer_schema_version_is_refused_and_left_as_it_was(pg_url: str) -> None:
    Database(pg_url, max_size=1).close()
    newer = str(sql.SCHEMA_VERSION + 1)
    with psycopg.connect(pg_url) as conn:
        conn.execute(sql.SET_SCHEMA_VERSION, (newer,))
    with pytest.raises(BackendError, match=f"schema version {newer} is newer than this code's {sql.SCHEMA_VERSION}"):
        Database(pg_url, max_size=1)
    assert _version(pg_url) == newer


@pytest.mark.pg
def test_a_role_without_the_right_to_make_tables_is_told_so_in_one_line(pg_url: str) -> None:
    plain = _role(pg_url)  # PostgreSQL 15: PUBLIC may not make tables in schema public
    with pytest.raises(BackendError) as got:
        Database(plain, max_size=1)
    msg = str(got.value)
    assert "\n" not in msg and "permission denied for schema public" in msg and "cannot make the tables" in msg


SECRET = "hunter2pw"


def test_the_pool_log_never_carries_a_password_libpq_quotes(caplog: pytest.LogCaptureFixture) -> None:
    url = f"postgresql://u:pa%ss{SECRET}@127.0.0.1:1/db"
    with caplog.at_level(logging.WARNING, logger="psycopg.pool"), pytest.raises(BackendError) as got:
        Database(url, max_size=1, timeout=1)
    logged = [r.getMessage() for r in caplog.records if r.name.startswith("psycopg")]
    assert logged, "the pool logged no failed attempt: nothing was checked"
    assert any("invalid percent-encoded token" in m for m in logged)
    assert all(SECRET not in m for m in logged), logged
    assert SECRET not in str(got.value) and "invalid percent-encoded token" in str(got.value)


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://u:{SECRET}@h/db",
        f"postgresql://u@h/db?password={SECRET}",
        f"postgresql://u@h/db?sslmode=disable&pass%77ord={SECRET}&application_name=x",
        f"postgresql://u@h/db?PASSWORD={SECRET}",
        f"host=h user=u password={SECRET} dbname=db",
        f"host=h user=u password='{SECRET} x' dbname=db",
    ],
)
def test_redact_hides_the_password_in_each_form_libpq_accepts(url: str) -> None:
    shown = redact(url)
    assert SECRET not in shown and "***" in shown


def test_redact_keeps_the_rest_of_the_url() -> None:
    assert redact("postgresql://u:pw@h:5/db?sslmode=disable&password=x") == "postgresql://u:***@h:5/db?sslmode=disable&password=***"
    assert redact("postgresql://h/db") == "postgresql://h/db"


def test_scrub_takes_the_percent_decoded_password_out_of_a_message_too() -> None:
    url = "postgresql://u:s%40cret@h/db"
    assert scrub('password authentication failed: "s@cret" or s%40cret', url) == 'password authentication failed: "***" or ***'


def test_redact_hides_every_generated_password_libpq_would_read_from_the_url() -> None:
    """Generated attack: passwords of awkward characters, in the userinfo (raw or percent-encoded) and as the
    password / sslpassword parameters; whatever libpq (psycopg.conninfo) reads as the secret never shows."""
    from urllib.parse import quote

    from psycopg.conninfo import conninfo_to_dict

    rnd = random.Random(14)
    alphabet = "abcXYZ019?&=:%#+ ;'\\@/"
    checked = 0
    for _ in range(400):
        pw = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(4, 12)))
        form = rnd.randrange(4)
        if form == 0:
            url = f"postgresql://u:{pw}@h:5432/db?sslmode=disable"
        elif form == 1:
            url = f"postgresql://u:{quote(pw, safe='')}@h/db"
        elif form == 2:
            url = f"postgresql://u@h/db?application_name=x&{rnd.choice(['password', 'sslpassword', 'pass%77ord'])}={quote(pw, safe='')}"
        else:
            url = "host=h user=u password='" + pw.replace("\\", "\\\\").replace("'", "\\'") + "' dbname=db"
        if form == 0 and len(pw.strip()) >= 4:  # as written in the userinfo: hidden even where libpq reads it otherwise
            assert pw.strip() not in redact(url), (url, pw)
        try:
            info = conninfo_to_dict(url)
        except (psycopg.Error, UnicodeDecodeError):
            continue  # libpq refuses it, or it is not UTF-8: nothing is read as a password (scrub still hides the raw forms)
        secret = info.get("password") or info.get("sslpassword")
        if not secret or len(secret) < 4:
            continue
        checked += 1
        assert secret not in redact(url), (url, secret)
        assert secret not in scrub(f"failed for {url}: {secret!r}", url), (url, secret)
    assert checked > 200, f"only {checked} generated URLs were read by libpq: the test checked too little"


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review_pg_cli_roles.py):
# Review (issue 14; fixed: a start runs no DDL when the database records this schema version, and a role that cannot
# make the tables gets one BackendError line naming the server). As found: the command lines with a DATABASE_URL whose role
# cannot create the schema.
#
# PostgreSQL 15 gives PUBLIC no CREATE on schema public, so an operator's ordinary (or read-only) role gets
# `permission denied for schema public` from Database.ensure_schema. That is a psycopg.errors.InsufficientPrivilege
# (a ProgrammingError), which Database.connection does not turn into a BackendError (it catches OperationalError
# only), so cli.stores.opened_stores does not make it the one line a database failure gets: each command
# falls to its "unexpected failure" handler, which prints the server's multi-line message with the SQL statement,
# exits 1 (not 2) and does not name the server.
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.pg
@pytest.mark.parametrize(
    "argv",
    [
        ["ledger", "list", "{data}"],
        ["retrieval", "search", "{data}", "alice", "garden"],
        ["receipts", "checkpoint", "{data}", "alice"],
        ["bundle", "list", "{data}"],
    ],
    ids=lambda a: a[0],
)
def test_a_role_without_create_gets_one_line_naming_the_server(argv: list[str], tmp_path: Path, pg_url: str) -> None:
    role = f"plain_{secrets.token_hex(4)}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'sekret{role}'")
    url = pg_url.replace("://mre@", f"://{role}:sekret{role}@")
    data = tmp_path / "data"
    data.mkdir()
    env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", *[a.format(data=data) for a in argv]], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=50)
    out = r.stdout + r.stderr
    # today: "error: unexpected failure: permission denied for schema public" + the statement's LINE 2 and a caret
    # (bundle: two "couldn't stop thread 'mre-worker-N'" lines first), exit 1, the server not named
    assert "Traceback" not in out
    assert (len(out.strip().splitlines()), r.returncode) == (1, 2), out
    assert "PostgreSQL at" in out and "CREATE" not in out
    assert f"sekret{role}" not in out


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review3_dml_role_erase_vacuum.py):
# Reviewer finding (c7dbcb0/ccec788; fixed as: never silent — Database.vacuum logs the tables PostgreSQL skipped, and
# docs/BACKENDS.md says erasure's VACUUM needs the tables' owner). As found: erasure by the documented app role leaves
# the erased words in live-readable tuples.
#
# docs/BACKENDS.md now says the app and the writing commands can run as a role with SELECT, INSERT, UPDATE and
# DELETE on the tables. PgLedger.erase (and delete_session, PgReceipts' and the index's forget) promise that after
# the commit `VACUUM` makes the old row versions unreachable. But only a table's owner (or a superuser) may VACUUM
# it: for that role PostgreSQL skips the table with a WARNING notice that nobody reads, so the erased line's old
# version stays a tuple of the heap (readable with pageinspect, in a physical backup, by any long snapshot) until
# autovacuum happens to come by. The owner's erasure leaves nothing; the same call by the documented role does.
#
# Fix: at start (or before an erasure) find out whether this role may VACUUM the tables (pg_class.relowner /
# pg_has_role(relowner, 'USAGE'), or PG 16's pg_maintain) and either refuse erasure/deletion with one line, or
# collect the 'skipping' notices (conn.add_notice_handler) and report the VACUUM as not done; say in BACKENDS.md
# that erasure needs the owner's role (or a MAINTAIN grant).
# --------------------------------------------------------------------------------------------------------------------


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
