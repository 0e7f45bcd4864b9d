"""`mre db`: the PostgreSQL side (`python -m ledger export|migrate`, which keep working under that spelling)."""

from __future__ import annotations

from typing import Any

import click

from cli.calls import run_program
from cli.options import OrderedGroup, data_dir_argument, session_argument

IMPL = "cli.prog_ledger"


@click.group(cls=OrderedGroup)
def db() -> None:
    """PostgreSQL: migrate a data directory; export a session."""


@db.command(short_help="Move a data directory's ledgers into PostgreSQL (resumable).")
@data_dir_argument
@click.argument("sessions", metavar="[SESSION]...", nargs=-1)
def migrate(**params: Any) -> int:
    """Move a data directory's ledgers into PostgreSQL (every chain verified; resumable).

    The database is $DATABASE_URL (or --database-url before the group); a password on the command line is refused.
    Only the SESSIONs named, or all of them."""
    return run_program(IMPL, "cmd_migrate", "migrate", params)


@db.command(short_help="Write a session's JSONL from PostgreSQL.")
@click.argument("database_url", metavar="[DATABASE_URL]", required=False)
@session_argument
@click.option("-o", "--output", metavar="FILE", help="write to FILE (default: standard output)")
def export(**params: Any) -> int:
    """Write a session's JSONL from PostgreSQL (the bytes the file backend holds).

    The database is $DATABASE_URL (or --database-url before the group); a DATABASE_URL argument is still taken when it
    holds no password, and refused when it does (a command line is visible to every user of the machine)."""
    return run_program(IMPL, "cmd_export", "export", params)
