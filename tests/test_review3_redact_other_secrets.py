"""Reviewer finding (c7dbcb0): two secret forms libpq takes that storage.redact / scrub still show.

1. `sslpassword` (libpq: "the password for the secret key specified in sslkey") — in a URI query
   (`?sslpassword=…`) or a key=value string — is left as it is: Database.shown, every BackendError, Stores.where and
   the app's start line print it. It unlocks the client's private key, so it is as secret as `password`.
2. In a key=value string a value ends at whitespace, not at '&' (`password=s3cr&et` is the password 's3cr&et'), but
   _PASSWORD_KV stops at '&' ([^\\s&]*, a URI habit): redact gives `password=***&et` and secrets_in finds only 's3cr',
   so the tail of the password stays in the message. A DATABASE_URL in that form is refused with redact(url) in the
   message (database_url, open_ledger, stores), and `ledger verify|list …` name a non-URL argument the same way.

Fix: treat `sslpassword` like `password` in both forms (a set of secret parameter names), and end an unquoted
key=value value at whitespace only (the URI query split stays on '&'); better, take the values from
psycopg.conninfo.conninfo_to_dict when the string parses.
"""

from __future__ import annotations

import pytest

from storage import BackendError, database_url, redact, scrub


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
