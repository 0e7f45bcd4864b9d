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
    ("ledger", "import"): ("ledger.__main__", "import"),
    ("ledger", "list"): ("ledger.__main__", "list"),
    ("ledger", "verify"): ("ledger.__main__", "verify"),
    ("ledger", "repair"): ("ledger.__main__", "repair"),
    ("db", "export"): ("ledger.__main__", "export"),
    ("db", "migrate"): ("ledger.__main__", "migrate"),
    ("receipt", "verify"): ("receipts.__main__", "verify"),
    ("receipt", "show"): ("receipts.__main__", "show"),
    ("receipt", "pubkey"): ("receipts.__main__", "pubkey"),
    ("receipt", "checkpoint"): ("receipts.__main__", "checkpoint"),
    ("search", "query"): ("retrieval.cli", "search"),
    ("search", "rebuild"): ("retrieval.cli", "rebuild"),
    ("control", "forget"): ("control.__main__", "forget"),
    ("control", "revoke"): ("control.__main__", "revoke"),
    ("control", "restore"): ("control.__main__", "restore"),
    ("control", "supersede"): ("control.__main__", "supersede"),
    ("control", "history"): ("control.__main__", "history"),
    ("control", "suggestions"): ("control.__main__", "suggestions"),
    ("control", "ask-first"): ("control.__main__", "ask-first"),
    ("chat", "turn"): ("chat.__main__", None),
    ("chat", "propose"): ("chat.__main__", "chat:propose"),
    ("chat", "answer"): ("chat.__main__", "chat:answer"),
    ("bundle", "export"): ("bundle.__main__", "export"),
    ("bundle", "verify"): ("bundle.__main__", "verify"),
    ("bundle", "import"): ("bundle.__main__", "import"),
    ("bundle", "markdown"): ("bundle.__main__", "markdown"),
    ("bundle", "list"): ("bundle.__main__", "list"),
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
