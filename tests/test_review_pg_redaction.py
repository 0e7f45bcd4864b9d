"""Review (issue 14; fixed: storage.redact hides `?password=` too, and storage.scrub takes every form of the password
out of libpq's messages, the error lines and the pool's log). As found: the database password in messages. No server is needed: port 1 on loopback refuses.

storage.redact only replaces the userinfo password (`user:PASSWORD@host`). libpq also takes the password as a URI
query parameter (`?password=…`), and its own parse error for a badly percent-encoded password quotes the token
(`invalid percent-encoded token: "pa%ss"`), which Database._cause appends to the one-line error and which the
app's psycopg.pool WARNING lines repeat.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from storage import redact

ROOT = Path(__file__).resolve().parents[1]
SECRET = "hunter2pw"


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://u@127.0.0.1:1/db?password={SECRET}",
        f"postgresql:///db?host=/tmp&user=u&password={SECRET}",
        f"postgresql://u@127.0.0.1:1/db?sslmode=disable&password={SECRET}",
    ],
)
def test_redact_hides_a_password_given_as_a_query_parameter(url: str) -> None:
    assert SECRET not in redact(url)


def _run(url: str, *argv: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", *argv], cwd=tmp, env=env, capture_output=True, text=True, timeout=50)


def test_the_ledger_cli_never_prints_a_query_parameter_password(tmp_path: Path) -> None:
    data = tmp_path / "d"
    data.mkdir()
    r = _run(f"postgresql://u@127.0.0.1:1/db?password={SECRET}", "ledger", "list", str(data), tmp=tmp_path)
    assert r.returncode == 2
    assert SECRET not in r.stdout + r.stderr, r.stderr


def test_the_ledger_cli_never_prints_a_password_libpq_cannot_decode(tmp_path: Path) -> None:
    data = tmp_path / "d"
    data.mkdir()
    r = _run("postgresql://u:pa%ss" + SECRET + "@127.0.0.1:1/db", "ledger", "list", str(data), tmp=tmp_path)
    assert r.returncode == 2
    assert SECRET not in r.stdout + r.stderr, r.stderr
