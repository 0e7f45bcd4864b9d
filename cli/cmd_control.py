"""`mre control`: a visitor's decisions about a memory (`python -m control forget|revoke|restore|supersede|history|suggestions|ask-first`)."""

from __future__ import annotations

from typing import Any

import click

from cli.calls import run_program
from cli.options import OrderedGroup, data_dir_argument, json_option, reason_option, session_argument

IMPL = "cli.prog_control"
DONE = "Exit status: 0 done; 2 unusable input, nothing changed."
FORGET_EPILOG = "Exit status: 0 done; 1 the erasure began and stopped (the next forget finishes it); 2 unusable input, nothing changed."


@click.group(cls=OrderedGroup)
def control() -> None:
    """A visitor's decisions: forget, revoke, restore, supersede."""


@control.command(epilog=FORGET_EPILOG, short_help="Erase events or a session; write an erasure certificate.")
@data_dir_argument
@session_argument
@click.argument("seqs", metavar="[SEQ]...", nargs=-1)
@reason_option("why (kept in the erasure record; never put the erased words here)")
@click.option("--no-cascade", is_flag=True, help="do not erase the answers whose receipts cited them")
@click.option("--all", "all", is_flag=True, help="delete the whole session; the certificate holds only hashes")
@json_option("print what was erased and the certificate's path as JSON")
def forget(**params: Any) -> int:
    """Erase events of a session (or the whole session) and write an erasure certificate."""
    return run_program(IMPL, "cmd_forget", "forget", params)


@control.command(epilog=DONE)
@data_dir_argument
@session_argument
@click.argument("seq", metavar="SEQ")
@reason_option("why (kept in the ledger for good; never repeat the memory's words)")
def revoke(**params: Any) -> int:
    """Take an event out of retrieval (kept on record, unused). SEQ: its seq or id (evt_…)."""
    return run_program(IMPL, "cmd_control", "revoke", params)


@control.command(epilog=DONE)
@data_dir_argument
@session_argument
@click.argument("seq", metavar="SEQ")
@reason_option("why (kept in the ledger for good; never repeat the memory's words)")
def restore(**params: Any) -> int:
    """Bring a revoked event back into retrieval. SEQ: its seq or id (evt_…)."""
    return run_program(IMPL, "cmd_control", "restore", params)


@control.command(epilog=DONE, short_help="Record that a newer statement supersedes an older one.")
@data_dir_argument
@session_argument
@click.argument("new_seq", metavar="NEW_SEQ")
@click.argument("old_seq", metavar="OLD_SEQ")
@reason_option("why (kept in the ledger for good; never repeat either statement's words)")
def supersede(**params: Any) -> int:
    """Record that a newer statement supersedes an older one (both kept on record)."""
    return run_program(IMPL, "cmd_supersede", "supersede", params)


@control.command(short_help="Every statement of a fact, oldest first.")
@data_dir_argument
@session_argument
@click.argument("seq", metavar="SEQ")
@json_option("print the statements as JSON")
def history(**params: Any) -> int:
    """Every statement of the fact an event states, oldest first, each live or superseded."""
    return run_program(IMPL, "cmd_history", "history", params)


@control.command(short_help="Model-proposed supersessions the rules did not confirm.")
@data_dir_argument
@session_argument
@json_option("print the suggestions as JSON")
def suggestions(**params: Any) -> int:
    """Supersessions a model proposed that the rules did not confirm; confirm one with supersede."""
    return run_program(IMPL, "cmd_suggestions", "suggestions", params)


@control.command("ask-first", short_help="Turn ask me first on or off for a session, or show it.")
@data_dir_argument
@session_argument
@click.argument("value", metavar="[on|off]", required=False)
def ask_first(**params: Any) -> int:
    """Turn ask me first on or off for a session (the app's setting), or with no on/off show it."""
    return run_program(IMPL, "cmd_ask_first", "ask-first", params)
