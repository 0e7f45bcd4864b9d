"""`python -m chat DATA_DIR SESSION MESSAGE [-k K]`: one turn; the last line names the receipt."""

from __future__ import annotations

import sys

from ledger.cli_support import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Parser


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m chat", description="Run one chat turn with a signed receipt.")
    parser.add_argument("data_dir")
    parser.add_argument("session")
    parser.add_argument("message")
    parser.add_argument("-k", type=int, default=8, help="memories handed to the model (1-50, default 8)")
    args = parser.parse_args(argv)
    from .engine import Engine, InputError, TurnError

    try:
        engine = Engine(args.data_dir)
        turn = engine.turn(args.session, args.message, args.k)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except TurnError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:  # never a traceback
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(turn.answer)
    c = turn.completion
    print(f"answered by: {c.provider} ({c.model})" + (f" — {c.fallback_reason}" if c.fallback_reason else ""))
    print(f"memories: {len(turn.hits)} of k={args.k}")
    print(f"receipt: {turn.receipt_path}")
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
