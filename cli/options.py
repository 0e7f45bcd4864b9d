"""The options several `mre` commands share, written once: a data directory, a session, --json, --trust, -k,
--reason, and the PostgreSQL database ($DATABASE_URL or --database-url)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import click
from click.core import ParameterSource

F = TypeVar("F", bound=Callable[..., Any])
Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]  # what click.option(...) returns

DATABASE_ENV = "DATABASE_URL"
CONTEXT: dict[str, Any] = {"help_option_names": ["-h", "--help"]}  # -h as well, as the python -m programs take


class PrefixCommand(click.Command):
    """A command whose arguments its `python -m` twin's argparse parser reads (cli/twins.py), so that both take
    exactly the same argument lists: a unique prefix of a long option (`--js` for `--json`), a negative number as a
    positional ("-1"), `-k=5`, and an option where a value was expected (`--reason -typo`) refused. Click's own
    parser is left to --help, and to a command that has no twin."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        from cli import twins

        group = ctx.parent.command.name if ctx.parent is not None else None
        if group is not None and self.name is not None and (group, self.name) in twins.TWINS:
            try:
                read = twins.parse(group, self.name, list(args))
            except twins.Refused as exc:
                raise click.UsageError(str(exc), ctx=ctx) from None
            except twins.HelpAsked:
                click.echo(ctx.get_help(), color=ctx.color)
                ctx.exit()
            for param in self.get_params(ctx):
                if param.name is not None and param.expose_value and hasattr(read, param.name):
                    value = getattr(read, param.name)
                    ctx.params[param.name] = tuple(value) if isinstance(value, list) else value
            ctx.args = []
            return []
        longs = [o for p in self.get_params(ctx) for o in (*p.opts, *p.secondary_opts) if o.startswith("--")]
        try:
            expanded = expand_prefixes(args, longs)
        except ValueError as exc:
            raise click.UsageError(str(exc), ctx=ctx) from None
        return super().parse_args(ctx, expanded)


def expand_prefixes(args: list[str], longs: list[str]) -> list[str]:
    """`args` with each unique prefix of a long option in `longs` written out; ValueError for an ambiguous one
    (argparse's message)."""
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            return out + args[i:]
        name, eq, value = arg.partition("=")
        if name.startswith("--") and name not in longs:
            matches = [o for o in longs if o.startswith(name)]
            if len(matches) == 1:
                arg = matches[0] + eq + value
            elif matches:
                raise ValueError(f"ambiguous option: {name} could match {', '.join(matches)}")
        out.append(arg)
    return out


class OrderedGroup(click.Group):
    """Commands listed in the order they were added (the order a newcomer meets them), not alphabetically; each
    takes option prefixes (PrefixCommand)."""

    command_class = PrefixCommand

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


def data_dir_argument(f: F) -> F:
    """DATA_DIR: a data directory (checked by the command itself, with the `python -m` programs' messages)."""
    return click.argument("data_dir", metavar="DATA_DIR")(f)


def session_argument(f: F) -> F:
    return click.argument("session", metavar="SESSION")(f)


def json_option(help: str = "print a JSON report") -> Decorator:  # noqa: A002 - click's own keyword
    return click.option("--json", "json", is_flag=True, help=help)


def trust_option(help: str = "a trusted public key file (repeatable)") -> Decorator:  # noqa: A002
    return click.option("--trust", "trust", metavar="PUBKEY", multiple=True, help=help)


def k_option(help: str) -> Decorator:  # noqa: A002
    return click.option("-k", "k", type=int, default=8, show_default=True, metavar="K", help=help)


def reason_option(help: str) -> Decorator:  # noqa: A002
    return click.option("--reason", metavar="TEXT", help=help)


def _use_database(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """A --database-url given on the command line is the process's DATABASE_URL for this command (the commands
    read it there, as `python -m ...` do); the previous value is put back when the command ends."""
    if value is None or param.name is None or ctx.get_parameter_source(param.name) is not ParameterSource.COMMANDLINE:
        return
    from storage import redact

    if redact(value) != value:  # a command line is visible to every user of the machine (ps): never a password there
        raise click.BadParameter(
            "the URL holds a password, which every user of this machine can read on a command line (ps); set it in "
            "the environment instead: DATABASE_URL='postgresql://…' mre …",
            ctx=ctx,
            param=param,
        )
    before = os.environ.get(DATABASE_ENV)
    os.environ[DATABASE_ENV] = value

    def restore() -> None:
        if before is None:
            os.environ.pop(DATABASE_ENV, None)
        else:
            os.environ[DATABASE_ENV] = before

    ctx.call_on_close(restore)


def database_url_option(f: F) -> F:
    return click.option(
        "--database-url",
        metavar="URL",
        envvar=DATABASE_ENV,
        show_envvar=True,
        expose_value=False,
        callback=_use_database,
        help="keep memory in PostgreSQL at this postgresql:// URL (default: the files in DATA_DIR); one holding a "
        "password is refused here, as a command line is visible to other users: set DATABASE_URL instead",
    )(f)


__all__ = [
    "CONTEXT",
    "OrderedGroup",
    "PrefixCommand",
    "data_dir_argument",
    "database_url_option",
    "json_option",
    "k_option",
    "reason_option",
    "session_argument",
    "trust_option",
]
