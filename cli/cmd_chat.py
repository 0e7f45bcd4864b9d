"""`mre chat`: one turn with a signed receipt (`python -m chat`), or the same turn in two steps, a person approving
the memories first (`python -m chat propose|answer`)."""

from __future__ import annotations

from typing import Any

import click

from cli.calls import run_chat
from cli.options import OrderedGroup, data_dir_argument, k_option, session_argument


@click.group(cls=OrderedGroup)
def chat() -> None:
    """One turn with a signed receipt; ask me first: propose, answer."""


@chat.command(short_help="One turn with a signed receipt (`python -m chat`).")
@data_dir_argument
@session_argument
@click.argument("message", metavar="MESSAGE")
@k_option("memories handed to the model (1-50)")
@click.option("--create", is_flag=True, help="create DATA_DIR and any missing folders above it (without it only the default ./data is made)")
def turn(**params: Any) -> int:
    """Run one chat turn (`python -m chat DATA_DIR SESSION MESSAGE`); the last line names the receipt."""
    return run_chat("cmd_turn", params)


@chat.command(short_help="Ask me first, step 1: the memories proposed and a token.")
@data_dir_argument
@session_argument
@click.argument("message", metavar="MESSAGE")
@k_option("memories proposed (1-50)")
def propose(**params: Any) -> int:
    """Ask me first, step 1: the memories retrieval would hand the model, and a one-time token. Nothing is appended."""
    return run_chat("cmd_propose", params)


@chat.command(short_help="Ask me first, step 2: answer with the approved memories.")
@data_dir_argument
@click.argument("token", metavar="TOKEN")
@click.argument("ids", metavar="[ID]...", nargs=-1)
@click.option("--session", metavar="SESSION", help="refuse the token unless it was issued for this session")
@click.option("--cancel", is_flag=True, help="end the turn: nothing is sent to the model, nothing appended")
def answer(**params: Any) -> int:
    """Ask me first, step 2: answer with only the approved memories (event ids or seqs; none: the question alone),
    or --cancel: no turn."""
    return run_chat("cmd_answer", params)
