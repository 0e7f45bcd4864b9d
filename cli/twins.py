"""Each `mre` command's twin: the argparse parser of the `python -m` subcommand it stands for, which reads the
command's arguments (`PrefixCommand.parse_args`), so that both spellings take exactly the same argument lists.

argparse and click read an argument that starts with '-' differently: argparse takes "-1" (a negative number) or
"-a b" (a space inside) as a positional, refuses an option where an option's value was expected (`--reason -typo`),
and reads `-k=5` as 5; it also assigns positionals around options its own way (`[DATABASE_URL] SESSION`). The
twin's parser decides, and click's own parser is used only for --help. The modules are imported when a command
runs, not when `mre --help` does.
"""

from __future__ import annotations

import argparse
import importlib
from typing import NoReturn

# (mre group, mre command) -> (module whose build_parser() is the program's parser, its subcommand; None: the parser
# itself, "chat:STEP": chat's own parser for that step)
TWINS: dict[tuple[str, str], tuple[str, str | None]] = {
    ("ledger", "import"): ("cli.prog_ledger", "import"),
    ("ledger", "list"): ("cli.prog_ledger", "list"),
    ("ledger", "verify"): ("cli.prog_ledger", "verify"),
    ("ledger", "repair"): ("cli.prog_ledger", "repair"),
    ("db", "export"): ("cli.prog_ledger", "export"),
    ("db", "migrate"): ("cli.prog_ledger", "migrate"),
    ("receipt", "verify"): ("cli.prog_receipts", "verify"),
    ("receipt", "show"): ("cli.prog_receipts", "show"),
    ("receipt", "pubkey"): ("cli.prog_receipts", "pubkey"),
    ("receipt", "checkpoint"): ("cli.prog_receipts", "checkpoint"),
    ("receipt", "tlog-proof"): ("cli.prog_receipts", "tlog-proof"),
    ("receipt", "verify-proof"): ("cli.prog_receipts", "verify-proof"),
    ("receipt", "cosign"): ("cli.prog_receipts", "cosign"),
    ("receipt", "verify-note"): ("cli.prog_receipts", "verify-note"),
    ("receipt", "replay"): ("cli.prog_receipts", "replay"),
    ("search", "query"): ("cli.prog_retrieval", "search"),
    ("search", "rebuild"): ("cli.prog_retrieval", "rebuild"),
    ("control", "forget"): ("cli.prog_control", "forget"),
    ("control", "revoke"): ("cli.prog_control", "revoke"),
    ("control", "restore"): ("cli.prog_control", "restore"),
    ("control", "supersede"): ("cli.prog_control", "supersede"),
    ("control", "history"): ("cli.prog_control", "history"),
    ("control", "suggestions"): ("cli.prog_control", "suggestions"),
    ("control", "ask-first"): ("cli.prog_control", "ask-first"),
    ("chat", "turn"): ("cli.prog_chat", None),
    ("chat", "propose"): ("cli.prog_chat", "chat:propose"),
    ("chat", "answer"): ("cli.prog_chat", "chat:answer"),
    ("bundle", "export"): ("cli.prog_bundle", "export"),
    ("bundle", "verify"): ("cli.prog_bundle", "verify"),
    ("bundle", "import"): ("cli.prog_bundle", "import"),
    ("bundle", "markdown"): ("cli.prog_bundle", "markdown"),
    ("bundle", "list"): ("cli.prog_bundle", "list"),
}


class Refused(Exception):
    """argparse refused the arguments: its message (the `python -m` twin exits 2 with it)."""


class HelpAsked(Exception):
    """-h/--help (or a prefix of it) among the arguments: click shows its own help."""


def twin_parser(group: str, command: str) -> argparse.ArgumentParser:
    """The parser `python -m` reads this command's arguments with (after its subcommand name)."""
    module_name, sub = TWINS[(group, command)]
    module = importlib.import_module(module_name)
    if sub is None:
        parser: argparse.ArgumentParser = module.build_parser()
    elif sub.startswith("chat:"):
        parser = module.PARSERS[sub.removeprefix("chat:")]()
    else:
        parser = module.build_parser()
        (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = action.choices[sub]
    return parser


def parse(group: str, command: str, args: list[str]) -> argparse.Namespace:
    """`args` read as the twin reads them; Refused (argparse's message) or HelpAsked instead of printing and exiting."""
    parser = twin_parser(group, command)

    def error(message: str) -> NoReturn:
        raise Refused(message)

    def help_asked(*_: object, **__: object) -> NoReturn:
        raise HelpAsked

    parser.error = error  # type: ignore[method-assign]
    parser.print_help = help_asked  # type: ignore[method-assign]
    return parser.parse_args(args)


__all__ = ["TWINS", "HelpAsked", "Refused", "parse", "twin_parser"]
