"""Reviewer finding (c7dbcb0): a password holding an unencoded '?' is printed whole in every error and the app's start line.

libpq looks for the userinfo's '@' before it looks for the query: `postgresql://u:pa?ss@host/db` is user u, password
'pa?ss' (psycopg.conninfo.conninfo_to_dict says so, and the connection uses it). storage.redact and secrets_in split
at the first '?' first, so they see no '@' in the authority, no password, and hand the URL back unchanged. Database.shown
is that text: it starts every BackendError ("PostgreSQL at postgresql://u:pa?ss@…: no connection within …"), it is
Stores.where (the app's "memory kept in PostgreSQL at …" log line, CLI messages), and scrub() finds nothing to hide.

Fix: parse the way libpq does (the authority ends at the first '/' after the '@' search, which stops at '@' or '/';
then the query), or simply take the password from psycopg.conninfo.conninfo_to_dict(url) and redact/scrub that
value (and its raw form), falling back to '***' for the whole URL when it cannot be parsed.
"""

from __future__ import annotations

import pytest
from psycopg.conninfo import conninfo_to_dict

from storage import BackendError, redact, scrub
from storage.pg.connect import Database

SECRET = "pa?ss"
URL = f"postgresql://u:{SECRET}@127.0.0.1:1/db"


def test_redact_and_scrub_hide_a_password_with_a_question_mark() -> None:
    assert conninfo_to_dict(URL)["password"] == SECRET  # the premise: libpq takes all of it as the password
    assert SECRET not in redact(URL)
    assert SECRET not in scrub(f"connecting to {URL}: {SECRET}", URL)


def test_a_database_that_cannot_be_reached_does_not_print_that_password() -> None:
    with pytest.raises(BackendError) as caught:
        Database(URL, timeout=1)
    assert "pa?" not in str(caught.value), str(caught.value)
