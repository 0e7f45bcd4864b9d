"""`mre ledger`: the hash-chained session ledger (`python -m ledger import|list|verify|repair`)."""

from __future__ import annotations

from typing import Any

import click

from cli.calls import run_program
from cli.options import OrderedGroup, data_dir_argument, json_option, session_argument, trust_option

IMPL = "cli.prog_ledger"


@click.group(cls=OrderedGroup)
def ledger() -> None:
    """The hash-chained session ledger: import, list, verify, repair."""


@ledger.command("import")
@data_dir_argument
@session_argument
@click.argument("file", metavar="FILE")
@click.option("--allow-system", is_flag=True, help='import lines with role "system" (refused by default: the model reads them as instructions)')
@click.option("--allow-duplicates", is_flag=True, help="import a file whose messages this session already holds from an earlier import")
@click.option("--create", is_flag=True, help="create DATA_DIR and any missing folders above it (without it only the default ./data is made)")
@click.option("--detect-changes", is_flag=True, help="run the change detector over the imported user statements in order, recording its supersessions as chat turns do")
@click.option("--semantic", is_flag=True, help="then embed the imported events with the optional semantic extra (requirements-semantic.txt), with a progress bar")
def import_(**params: Any) -> int:
    """Import a JSONL file of messages into a session.

    FILE: one {"role": ..., "text": ..., "meta": {...}?, "ts": "..."?} per line."""
    return run_program(IMPL, "cmd_import", "import", params)


@ledger.command("list")
@data_dir_argument
@json_option()
def list_(**params: Any) -> int:
    """One row per session: events, last activity, status.

    The status is `verified`, or the session's first break."""
    return run_program(IMPL, "cmd_list", "list", params)


@ledger.command()
@data_dir_argument
@click.argument("sessions", metavar="[SESSION]...", nargs=-1)
@json_option()
@click.option("--since", metavar="CHECKPOINT_FILE", help="prove the session extends a checkpoint kept earlier (`mre receipt checkpoint`)")
@trust_option("with --since: a trusted public key file (repeatable)")
@click.option("--full", is_flag=True, help="with --since: re-walk from genesis, ignoring the verifier's cache")
def verify(**params: Any) -> int:
    """Verify sessions (all when none is named)."""
    return run_program(IMPL, "cmd_verify", "verify", params)


@ledger.command()
@data_dir_argument
@session_argument
@click.option("--truncate-at", type=int, metavar="SEQ", help="move lines from seq SEQ on to events.jsonl.cut-SEQ-<utc> and record the cut")
@json_option()
def repair(**params: Any) -> int:
    """Show a session's first break; --truncate-at SEQ cuts the tail.

    The tail is moved aside (kept, never deleted) and the cut recorded in the ledger."""
    return run_program(IMPL, "cmd_repair", "repair", params)
