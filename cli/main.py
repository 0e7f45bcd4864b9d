"""The `mre` program: its groups, and one `error: ...` line (never a traceback) for whatever goes wrong.

`main(argv)` returns the exit status the command returned (the `python -m` programs' codes: 0 done or verified,
1 failed, 2 unusable input, 3 unverified), 2 for arguments click cannot parse, 141 when stdout's reader went away.
"""

from __future__ import annotations

import sys

import click

from cli.cmd_bundle import bundle
from cli.cmd_chat import chat
from cli.cmd_control import control
from cli.cmd_db import db
from cli.cmd_ledger import ledger
from cli.cmd_receipt import receipt
from cli.cmd_search import search
from cli.options import CONTEXT, OrderedGroup, database_url_option
from cli.support import EXIT_FAILED, EXIT_OK, EXIT_USAGE, entry_point, fail


class _PipeClosed(Exception):
    """A BrokenPipeError on its way out of click, which would turn it into exit 1 (click catches EPIPE itself)."""


class Root(OrderedGroup):
    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:
            raise _PipeClosed from exc


EPILOG = (
    "Exit status: 0 done (or VERIFIED); 1 FAILED, or broken; 2 unusable input (one `error:` line, nothing changed); "
    "3 UNVERIFIED (receipt and bundle verify); 141 the reader of the output stopped early (`| head`)."
)


@click.group(cls=Root, context_settings=CONTEXT, epilog=EPILOG)
@database_url_option
def mre() -> None:
    """The Memory Receipt Engine: a hash-chained memory ledger, search, signed receipts.

    Every command is also `python -m ledger|receipts|retrieval|control|chat|bundle ...` with the same arguments,
    output and exit codes."""


for group in (chat, search, ledger, receipt, control, bundle, db):
    group.context_settings = CONTEXT
    mre.add_command(group)


def _usage_error(exc: click.UsageError) -> int:
    """A line for arguments click refused, naming where to find the usage (`python -m` print theirs above it)."""
    path = exc.ctx.command_path if exc.ctx is not None else "mre"
    message = " ".join(exc.format_message().split())
    return fail(f"{path}: {message} (`{path} --help` shows the usage)", EXIT_USAGE)


def _run(argv: list[str] | None) -> int:
    try:
        result = mre.main(args=argv, prog_name="mre", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # `mre` or `mre ledger` alone: the help, as a usage error
        assert exc.ctx is not None
        click.echo(exc.ctx.get_help(), err=True)
        return EXIT_USAGE
    except click.UsageError as exc:
        return _usage_error(exc)
    except click.ClickException as exc:
        return fail(" ".join(exc.format_message().split()), exc.exit_code)
    except click.Abort:
        return 130
    except _PipeClosed:
        raise BrokenPipeError from None  # entry_point: quiet, 141, as the python -m programs end
    return EXIT_OK if result is None else int(result)


@entry_point
def main(argv: list[str] | None = None) -> int:
    try:
        return _run(sys.argv[1:] if argv is None else list(argv))
    except BrokenPipeError:
        raise  # the reader of stdout went away: entry_point ends quietly (141)
    except Exception as exc:  # noqa: BLE001 - last resort, as cli.support.run: never a traceback
        return fail(f"unexpected failure: {exc or 'no details'}", EXIT_FAILED)


__all__ = ["main", "mre"]
