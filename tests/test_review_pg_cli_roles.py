"""Review (issue 14; fixed: a start runs no DDL when the database records this schema version, and a role that cannot
make the tables gets one BackendError line naming the server). As found: the command lines with a DATABASE_URL whose role
cannot create the schema.

PostgreSQL 15 gives PUBLIC no CREATE on schema public, so an operator's ordinary (or read-only) role gets
`permission denied for schema public` from Database.ensure_schema. That is a psycopg.errors.InsufficientPrivilege
(a ProgrammingError), which Database.connection does not turn into a BackendError (it catches OperationalError
only), so storage.cli_stores.opened_stores does not make it the one line a database failure gets: each command
falls to its "unexpected failure" handler, which prints the server's multi-line message with the SQL statement,
exits 1 (not 2) and does not name the server.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[1]


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

