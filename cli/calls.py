"""How an `mre` command calls the implementation its `python -m` twin calls: the same function, handed the same
argparse.Namespace, under the same error guard (so the same output, one-line errors and exit codes).

The implementation modules are imported when a command runs, not when `mre --help` does.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Mapping
from typing import Any

Command = Callable[[argparse.Namespace], int]


def namespace(func: Command, params: Mapping[str, Any], command: str | None) -> argparse.Namespace:
    """What the argparse parser would have built: repeated options and `nargs="*"` positionals as lists,
    `command` (the subparsers' dest) when the program has subcommands, and `func` (set_defaults)."""
    values = {name: list(v) if isinstance(v, tuple) else v for name, v in params.items()}
    if command is not None:
        values["command"] = command
    return argparse.Namespace(**values, func=func)


def _function(module: str, name: str) -> Command:
    func: Command = getattr(importlib.import_module(module), name)
    return func


def run_program(module: str, name: str, command: str, params: Mapping[str, Any]) -> int:
    """ledger, receipts, control, bundle: `cli.support.run` (CliError, OSError, anything else: one line)."""
    from cli.support import run

    func = _function(module, name)
    return run(func, namespace(func, params, command))


def run_search(name: str, command: str, params: Mapping[str, Any]) -> int:
    """`python -m retrieval`: its own guard (`cli.prog_retrieval.guarded`)."""
    from cli import prog_retrieval

    func = _function("cli.prog_retrieval", name)
    return prog_retrieval.guarded(func, namespace(func, params, command))


def run_chat(name: str, params: Mapping[str, Any]) -> int:
    """`python -m chat`: each command guards itself (cli/prog_chat.py `_guarded`); the engine's log stays quiet."""
    from cli import prog_chat

    prog_chat.quiet_logs()
    func = _function("cli.prog_chat", name)
    return func(namespace(func, params, None))


__all__ = ["namespace", "run_chat", "run_program", "run_search"]
