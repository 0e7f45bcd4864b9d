"""Reviewer finding (fc665d4, redact reads a URL as libpq does): a password written with an unencoded '/' or '@' is
printed, whole or in part.

Generated passwords often hold '/' and '@' (base64 has '/' and '+'); pasted into DATABASE_URL without percent-encoding,
libpq reads `postgresql://u:ab/cd@db/mre` as host 'u', port 'ab', dbname 'cd@db/mre' — no password at all — and
`postgresql://u:p@ss@db/mre` as password 'p', host 'ss@db'. The connection fails, and the message that says so
starts with Database.shown: redact() now follows libpq's reading, so it hides nothing in the first URL
("PostgreSQL at postgresql://u:ab/cd@db/mre: …": the whole secret) and only 'p' in the second
("postgresql://u:***@ss@db/mre"). The operator's real password is on stderr, in the app's log, in CI output.

Fix: redact conservatively, not as libpq reads: hide everything between the scheme's '://' (after the user name's
':') and the LAST '@' before the query, whatever libpq makes of it; keep libpq's reading for scrub's list of forms
(and add this wider span to it).
"""

from __future__ import annotations

import pytest

from storage import redact, scrub


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
