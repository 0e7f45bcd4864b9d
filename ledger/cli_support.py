"""What every command line of the project shares: exit codes, a parser that never prints a traceback.

Used by `python -m ledger`, `python -m receipts` and `python -m chat`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class Parser(argparse.ArgumentParser):
    """argparse, but unusable arguments exit 2 with one `error: ...` line."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def fail(message: str, code: int = EXIT_USAGE) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def run(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a command; anything unexpected becomes one error line, never a traceback."""
    try:
        return func(args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # last resort: never a traceback
        return fail(f"{type(exc).__name__}: {exc}")


__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "Parser", "fail", "run"]
