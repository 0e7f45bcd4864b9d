"""`python -m chat DATA_DIR SESSION MESSAGE [-k K] [--create]`: one turn; the last line names the receipt."""

from __future__ import annotations

from ledger.cli_support import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Parser,
    describe_os_error,
    entry_point,
    fail,
    make_data_dir,
    note,
    writable_data_dir,
)


@entry_point
def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m chat", description="Run one chat turn with a signed receipt.")
    parser.add_argument("data_dir")
    parser.add_argument("session")
    parser.add_argument("message")
    parser.add_argument("-k", type=int, default=8, help="memories handed to the model (1-50, default 8)")
    parser.add_argument("--create", action="store_true", help="create DATA_DIR and any missing folders above it (by default only its last component)")
    args = parser.parse_args(argv)
    from ledger import LedgerCorrupted
    from receipts.keys import KeyConfigError, keys_dir, load_existing
    from retrieval.model import RetrievalError

    from .engine import Engine, InputError, TurnError

    try:
        data = writable_data_dir(args.data_dir, create=args.create)
        had_key = load_existing(data) is not None  # reads only: a new key is announced below, never made silently
        make_data_dir(data)
        engine = Engine(data)
        if not had_key:
            note(
                f"created a new receipt signing key {engine.key.key_id} in {keys_dir(data)} "
                f"(keep it private; `python -m receipts pubkey {data}` prints its public key for --trust)"
            )
        turn = engine.turn(args.session, args.message, args.k)
    except CliError as exc:
        return fail(str(exc), exc.code)
    except (InputError, KeyConfigError, RetrievalError) as exc:
        return fail(str(exc), EXIT_USAGE)
    except (TurnError, LedgerCorrupted) as exc:
        return fail(str(exc), EXIT_FAILED)
    except OSError as exc:
        return fail(describe_os_error(exc), EXIT_USAGE)
    except Exception as exc:  # never a traceback, never an internal class name
        return fail(f"unexpected failure: {exc or 'no details'}", EXIT_FAILED)
    print(turn.answer)
    c = turn.completion
    print(f"answered by: {c.provider} ({c.model})" + (f" — {c.fallback_reason}" if c.fallback_reason else ""))
    print(f"memories: {len(turn.hits)} of k={args.k}")
    print(f"receipt: {turn.receipt_path}")
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
