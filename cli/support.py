"""What every command line of the project shares: exit codes, a parser that never prints a traceback,
the data-directory rules, and a quiet end when the reader of stdout goes away (`... | head`).

Used by `mre` and by `python -m ledger|receipts|retrieval|control|chat|bundle` (cli/prog_*.py).

Data directories (the rules are storage/datadir.py's, which the web app applies too; here a refusal is a CliError):
a command that only reads (verify, list, search, show, pubkey, checkpoint) needs the directory to exist and creates nothing
in it or beside it. A command that writes (ledger import, bundle import, chat) creates a missing data directory only when
told (`--create`, the whole path) or when it is the default one (`./data`, or $DATA_DIR: the app's), and says so on
stderr; any other missing path is one line naming it and the flag (exit 2), so a typo (`./dta`) never silently starts
a second, empty history with a new signing key.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn, Protocol

from storage import datadir
from storage.datadir import EXPECTED_DATA_DIR, shown_arg

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_PIPE = 141  # 128 + SIGPIPE: what a shell shows for a writer whose reader (`| head`) stopped early


class CliError(Exception):
    """One line for the user (no traceback, no class name); `run` prints it and exits with `code`."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


class Parser(argparse.ArgumentParser):
    """argparse, but unusable arguments exit 2 with one `error: ...` line."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print(f"error: {one_line(message)}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def one_line(message: str) -> str:
    """`message` with every control character escaped (a newline as `\\n`): a file name or an argument holding a
    newline cannot split an error over two lines, nor a carriage return or an escape sequence rewrite what was shown."""
    return "".join(c if c.isprintable() or c == " " else c.encode("unicode_escape").decode("ascii") for c in message)


def count(n: int, word: str, words: str | None = None) -> str:
    """`1 receipt`, `2 receipts`, `1,024 events`: a number and its noun, plural when it is not one."""
    return f"{n:,} {word if n == 1 else (words or word + 's')}"


def fail(message: str, code: int = EXIT_USAGE) -> int:
    print(f"error: {one_line(message)}", file=sys.stderr)
    return code


def note(message: str) -> None:
    """A line for the person at the terminal (stderr), never mixed into the output a script reads."""
    print(message, file=sys.stderr)


def given_path(raw: str, *, what: str, expected: str) -> Path:
    """`raw` as a path, refusing a blank one as `WHAT: an empty path; EXPECTED` (storage.datadir.given_path)."""
    with _usage():
        return datadir.given_path(raw, what=what, expected=expected)


def refuse_url(raw: str) -> None:
    """Refuse a URL given where a data directory is expected, naming it without its password."""
    with _usage():
        datadir.refuse_url(raw)


def existing_data_dir(raw: str) -> Path:
    """The data directory a reading command uses: it must exist. Nothing is created."""
    with _usage():
        return datadir.existing_data_dir(raw)


def writable_data_dir(raw: str, *, create: bool) -> Path:
    """Check the data directory a writing command will write into; creates nothing (see `make_data_dir`).

    A missing directory is refused unless `create` (`--create`: the whole path) or it is the default one
    (`is_default_data_dir`, whose folder must exist): one line naming the path and the flag.
    """
    with _usage():
        path = datadir.writable_data_dir(raw, create=create)
    if not create and not path.is_dir() and not is_default_data_dir(path):
        raise CliError(f"{raw}: no such data directory; nothing was created (pass --create to start a new one there)")
    return path


def is_default_data_dir(path: Path) -> bool:
    """`path` is the data directory the app uses when given none: $DATA_DIR when set, else ./data."""
    default = os.environ.get("DATA_DIR") or "data"
    return os.path.abspath(path) == os.path.abspath(default)


def make_data_dir(path: Path) -> Path:
    """Create the data directory checked by `writable_data_dir` if it is missing (0700), saying so on stderr."""
    if datadir.make_data_dir(path):
        note(f"created data directory {path}")
    return path


@contextmanager
def _usage() -> Iterator[None]:
    """storage.datadir's refusal as the command line's: one line, exit 2."""
    try:
        yield
    except datadir.DataDirError as exc:
        raise CliError(str(exc)) from None


def run(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a command; anything unexpected becomes one error line, never a traceback."""
    try:
        return func(args)
    except CliError as exc:
        return fail(str(exc), exc.code)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        raise  # the reader of stdout went away: `entry_point` ends quietly
    except OSError as exc:
        return fail(describe_os_error(exc))
    except Exception as exc:  # last resort: never a traceback, never an internal class name
        return fail(f"unexpected failure: {exc or 'no details'}", EXIT_FAILED)


def describe_os_error(exc: OSError) -> str:
    """`path: reason`, as a person reads it (`No such file or directory`), without the exception's class."""
    where = exc.filename if exc.filename is not None else "file system"
    return f"{where}: {exc.strerror or exc}"


class Main(Protocol):
    """A command line's `main(argv=None) -> exit status`."""

    def __call__(self, argv: list[str] | None = None) -> int: ...


def entry_point(main: Main) -> Main:
    """Wrap a CLI's `main(argv)`: when stdout's reader stops early (`... | head`), end quietly.

    Python ignores SIGPIPE, so a write to a closed pipe raises BrokenPipeError, and the
    interpreter's last flush at exit would print another one. Output is flushed here, inside
    the guard; on a broken pipe stdout is pointed at /dev/null and the exit status is 141,
    what a shell shows for a program stopped by SIGPIPE.
    """

    @functools.wraps(main)
    def wrapped(argv: list[str] | None = None) -> int:
        try:
            code = main(argv)
            sys.stdout.flush()
            return code
        except BrokenPipeError:
            _silence_stdout()
            return EXIT_PIPE

    return wrapped


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError):
        pass  # stdout is not a real file (a test's capture): nothing will flush it to the pipe


__all__ = [
    "EXPECTED_DATA_DIR",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_PIPE",
    "EXIT_USAGE",
    "CliError",
    "Parser",
    "count",
    "describe_os_error",
    "entry_point",
    "existing_data_dir",
    "fail",
    "given_path",
    "is_default_data_dir",
    "make_data_dir",
    "note",
    "refuse_url",
    "run",
    "shown_arg",
    "writable_data_dir",
]
