"""The database password is never shown (issue 14 and its reviews): storage.redact and storage.scrub hide it in every
form libpq takes (userinfo, `?password=`, `sslpassword`, a key=value string) and in forms libpq cannot read (an
unencoded '?', '/' or '@', a bad percent-escape); no command line and no start line prints it, whether it comes as
DATABASE_URL or by mistake where a data directory is expected; and a command line that would put it where `ps`
shows it refuses it. No server is needed: port 1 on loopback refuses. The pool's log lines and the forms libpq
accepts are in tests/storage/test_pg_schema_roles.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict

from cli.main import main as mre_main
from storage import BackendError, database_url, redact, scrub
from storage.pg.connect import Database

# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review_pg_redaction.py):
# Review (issue 14; fixed: storage.redact hides `?password=` too, and storage.scrub takes every form of the password
# out of libpq's messages, the error lines and the pool's log). As found: the database password in messages. No server is needed: port 1 on loopback refuses.
#
# storage.redact only replaces the userinfo password (`user:PASSWORD@host`). libpq also takes the password as a URI
# query parameter (`?password=…`), and its own parse error for a badly percent-encoded password quotes the token
# (`invalid percent-encoded token: "pa%ss"`), which Database._cause appends to the one-line error and which the
# app's psycopg.pool WARNING lines repeat.
# --------------------------------------------------------------------------------------------------------------------


ROOT = Path(__file__).resolve().parents[2]


QUERY_SECRET = "hunter2pw"


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://u@127.0.0.1:1/db?password={QUERY_SECRET}",
        f"postgresql:///db?host=/tmp&user=u&password={QUERY_SECRET}",
        f"postgresql://u@127.0.0.1:1/db?sslmode=disable&password={QUERY_SECRET}",
    ],
)
def test_redact_hides_a_password_given_as_a_query_parameter(url: str) -> None:
    assert QUERY_SECRET not in redact(url)


def _run(url: str, *argv: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", *argv], cwd=tmp, env=env, capture_output=True, text=True, timeout=50)


def test_the_ledger_cli_never_prints_a_query_parameter_password(tmp_path: Path) -> None:
    data = tmp_path / "d"
    data.mkdir()
    r = _run(f"postgresql://u@127.0.0.1:1/db?password={QUERY_SECRET}", "ledger", "list", str(data), tmp=tmp_path)
    assert r.returncode == 2
    assert QUERY_SECRET not in r.stdout + r.stderr, r.stderr


def test_the_ledger_cli_never_prints_a_password_libpq_cannot_decode(tmp_path: Path) -> None:
    data = tmp_path / "d"
    data.mkdir()
    r = _run("postgresql://u:pa%ss" + QUERY_SECRET + "@127.0.0.1:1/db", "ledger", "list", str(data), tmp=tmp_path)
    assert r.returncode == 2
    assert QUERY_SECRET not in r.stdout + r.stderr, r.stderr


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review3_redact_other_secrets.py):
# Reviewer finding (c7dbcb0): two secret forms libpq takes that storage.redact / scrub still show.
#
# 1. `sslpassword` (libpq: "the password for the secret key specified in sslkey") — in a URI query
#    (`?sslpassword=…`) or a key=value string — is left as it is: Database.shown, every BackendError, Stores.where and
#    the app's start line print it. It unlocks the client's private key, so it is as secret as `password`.
# 2. In a key=value string a value ends at whitespace, not at '&' (`password=s3cr&et` is the password 's3cr&et'), but
#    _PASSWORD_KV stops at '&' ([^\s&]*, a URI habit): redact gives `password=***&et` and secrets_in finds only 's3cr',
#    so the tail of the password stays in the message. A DATABASE_URL in that form is refused with redact(url) in the
#    message (database_url, open_ledger, stores), and `ledger verify|list …` name a non-URL argument the same way.
#
# Fix: treat `sslpassword` like `password` in both forms (a set of secret parameter names), and end an unquoted
# key=value value at whitespace only (the URI query split stays on '&'); better, take the values from
# psycopg.conninfo.conninfo_to_dict when the string parses.
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "secret"),
    [
        ("postgresql://u@db.example/mre?sslmode=require&sslpassword=keypass", "keypass"),
        ("postgresql://u@db.example/mre?sslpassword=keypass", "keypass"),
        ("host=db.example user=u sslpassword=keypass", "keypass"),
    ],
)
def test_the_ssl_key_password_is_hidden_like_the_password(url: str, secret: str) -> None:
    assert secret not in redact(url)
    assert secret not in scrub(f"failed: {url} ({secret})", url)


def test_a_key_value_password_with_an_ampersand_is_hidden_whole() -> None:
    url = "host=db.example user=u password=s3cr&et"
    assert "&et" not in redact(url), redact(url)
    with pytest.raises(BackendError) as caught:
        database_url({"DATABASE_URL": url})
    assert "&et" not in str(caught.value), str(caught.value)


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review3_redact_question_mark.py):
# Reviewer finding (c7dbcb0): a password holding an unencoded '?' is printed whole in every error and the app's start line.
#
# libpq looks for the userinfo's '@' before it looks for the query: `postgresql://u:pa?ss@host/db` is user u, password
# 'pa?ss' (psycopg.conninfo.conninfo_to_dict says so, and the connection uses it). storage.redact and secrets_in split
# at the first '?' first, so they see no '@' in the authority, no password, and hand the URL back unchanged. Database.shown
# is that text: it starts every BackendError ("PostgreSQL at postgresql://u:pa?ss@…: no connection within …"), it is
# Stores.where (the app's "memory kept in PostgreSQL at …" log line, CLI messages), and scrub() finds nothing to hide.
#
# Fix: parse the way libpq does (the authority ends at the first '/' after the '@' search, which stops at '@' or '/';
# then the query), or simply take the password from psycopg.conninfo.conninfo_to_dict(url) and redact/scrub that
# value (and its raw form), falling back to '***' for the whole URL when it cannot be parsed.
# --------------------------------------------------------------------------------------------------------------------


QUESTION_MARK_SECRET = "pa?ss"


QUESTION_MARK_URL = f"postgresql://u:{QUESTION_MARK_SECRET}@127.0.0.1:1/db"


def test_redact_and_scrub_hide_a_password_with_a_question_mark() -> None:
    assert (
        conninfo_to_dict(QUESTION_MARK_URL)["password"] == QUESTION_MARK_SECRET
    )  # the premise: libpq takes all of it as the password
    assert QUESTION_MARK_SECRET not in redact(QUESTION_MARK_URL)
    assert QUESTION_MARK_SECRET not in scrub(
        f"connecting to {QUESTION_MARK_URL}: {QUESTION_MARK_SECRET}", QUESTION_MARK_URL
    )


def test_a_database_that_cannot_be_reached_does_not_print_that_password() -> None:
    with pytest.raises(BackendError) as caught:
        Database(QUESTION_MARK_URL, timeout=1)
    assert "pa?" not in str(caught.value), str(caught.value)


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review3_redact_unencoded_password.py):
# Reviewer finding (fc665d4, redact reads a URL as libpq does): a password written with an unencoded '/' or '@' is
# printed, whole or in part.
#
# Generated passwords often hold '/' and '@' (base64 has '/' and '+'); pasted into DATABASE_URL without percent-encoding,
# libpq reads `postgresql://u:ab/cd@db/mre` as host 'u', port 'ab', dbname 'cd@db/mre' — no password at all — and
# `postgresql://u:p@ss@db/mre` as password 'p', host 'ss@db'. The connection fails, and the message that says so
# starts with Database.shown: redact() now follows libpq's reading, so it hides nothing in the first URL
# ("PostgreSQL at postgresql://u:ab/cd@db/mre: …": the whole secret) and only 'p' in the second
# ("postgresql://u:***@ss@db/mre"). The operator's real password is on stderr, in the app's log, in CI output.
#
# Fix: redact conservatively, not as libpq reads: hide everything between the scheme's '://' (after the user name's
# ':') and the LAST '@' before the query, whatever libpq makes of it; keep libpq's reading for scrub's list of forms
# (and add this wider span to it).
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "secret"),
    [
        ("postgresql://app:Zm9v/YmFy@db.example:5432/mre", "Zm9v/YmFy"),
        ("postgresql://app:Zm9v/YmFy@db.example:5432/mre", "YmFy"),
        ("postgresql://app:n0t@secret@db.example/mre", "secret"),
    ],
)
def test_a_password_libpq_cannot_read_is_still_hidden(url: str, secret: str) -> None:
    assert secret not in redact(url), redact(url)
    assert secret not in scrub(f"connection to {url} failed", url)


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review3_app_data_url.py):
# Reviewer finding (same family as the data-directory finding below): `python app.py --data postgresql://u:PW@…`
# prints PW.
#
# The app's --data check (config) does not recognise a URL: Path() folds the '//' and the message names the path,
# password included ("--data postgresql:/u:PW@host:1/db: no such data directory, and the folder it would go in
# (postgresql:/u:PW@host:1) does not exist either"). Someone who puts DATABASE_URL's value into --data by mistake
# gets the password on stderr (and in a service's journal).
#
# Fix: in the app's --data check, refuse an is_database_url() value first with the redacted URL (as
# cli.support._not_a_url does: "a URL, not a data directory; set DATABASE_URL").
# --------------------------------------------------------------------------------------------------------------------


SECRET = "Sekr1tPw"


def test_the_app_names_a_url_given_as_data_without_its_password(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["PYTHONPATH"] = str(ROOT)
    r = subprocess.run(
        [sys.executable, str(ROOT / "app.py"), "--data", f"postgresql://u:{SECRET}@127.0.0.1:1/db"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert SECRET not in out, out


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review3_cli_url_as_data_dir.py):
# Reviewer finding (c7dbcb0 "a URL given as a data directory is named without its password"): not in every command.
#
# cli.support names a postgresql:// URL given where DATA_DIR is expected through storage.redact. Two command
# lines check DATA_DIR themselves and echo the raw argument: `python -m retrieval search|rebuild` (cli.prog_retrieval
# _data_dir: "<raw>: not a directory") and `python -m control forget|revoke|restore|supersede|history`
# (cli.prog_control: "<raw>: not a data directory …"). With DATABASE_URL unset (or set: retrieval never takes a URL
# argument), `python -m retrieval search postgresql://u:PW@host/db S q` prints PW on stderr — into the terminal
# scroll-back, a CI log, a support ticket.
#
# Fix: route both through cli.support's check (existing_data_dir / _not_a_url), or at least redact(raw) in
# those two messages; a test over every `python -m` entry point that takes DATA_DIR would keep new ones honest.
# --------------------------------------------------------------------------------------------------------------------


URL = f"postgresql://u:{SECRET}@127.0.0.1:1/db"


@pytest.mark.parametrize(
    "argv",
    [
        ["retrieval", "search", URL, "alice", "bees"],
        ["retrieval", "rebuild", URL],
        ["control", "forget", URL, "alice", "--all"],
        ["control", "revoke", URL, "alice", "0"],
    ],
    ids=["retrieval-search", "retrieval-rebuild", "control-forget", "control-revoke"],
)
def test_a_url_given_as_data_dir_is_named_without_its_password(tmp_path: Path, argv: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["PYTHONPATH"] = str(ROOT)
    r = subprocess.run([sys.executable, "-m", *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert SECRET not in out, out


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review6_mre_db_export_password.py):
# Reviewer finding (`mre db export DATABASE_URL SESSION`): the database URL is a positional argument, and one holding a
# password is taken (a connection is tried) instead of refused as `mre --database-url` and `mre db migrate` refuse
# it: the password sits on a command line every user of the machine can read (ps).
# --------------------------------------------------------------------------------------------------------------------


def test_mre_db_export_refuses_a_url_holding_a_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "s3cr3t-Pa55"
    url = f"postgresql://mre:{secret}@/x?host={tmp_path}/nosock&port=1"
    monkeypatch.delenv("DATABASE_URL", raising=False)
    from cli import prog_ledger_pg as pg_cli

    tried: list[str] = []

    def opened(url: str):  # type: ignore[no-untyped-def]
        tried.append(url)
        raise OSError("connection tried (no server here)")

    monkeypatch.setattr(pg_cli, "opened", opened)
    code = mre_main(["db", "export", url, "alice"])
    out, err = capsys.readouterr()
    assert secret not in out + err
    assert tried == [], "a connection was tried with the password from the command line"
    assert code == 2 and "password" in err and "DATABASE_URL" in err, (code, err)
