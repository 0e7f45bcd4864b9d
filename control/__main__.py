"""`python -m control forget DATA_DIR SESSION SEQ [SEQ ...] [--reason TEXT] [--no-cascade]` and
`python -m control forget DATA_DIR SESSION --all`.

Prints what was erased and, as its last line, `certificate: <path>`. Exit 0 when done; 2 (one line, nothing
changed) for an unusable data directory, an unknown session, a bad seq, an event already erased or an
erasure record. An erasure a crash interrupted is finished first (control.forget.recover).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ledger.cli_support import EXIT_OK, Parser, entry_point, fail, run
from receipts.keys import KeyConfigError
from retrieval.model import RetrievalError

from .forget import describe, forget, forget_session, recover
from .plan import PlanError

EPILOG = (
    "Every assistant answer whose receipt cited an erased event is erased with it (--no-cascade: only the named "
    "events); a user message only when named. Stored receipts citing an erased event are redacted (format 2) or "
    "withdrawn (format 1). Verify the certificate with `python -m receipts verify CERT --trust PUBKEY [--data DATA_DIR]`. "
    "exit status: 0 done; 2 unusable input, nothing changed."
)


def cmd_forget(args: argparse.Namespace) -> int:
    data = Path(args.data_dir)
    if not args.data_dir.strip() or not (data / "sessions").is_dir():
        return fail(f"{args.data_dir}: not a data directory (expected the DATA_DIR the app or `python -m chat` writes)")
    if args.all and args.seqs:
        return fail("give either SEQ ... or --all, not both")
    if not args.all and not args.seqs:
        return fail("say which events to forget: SEQ [SEQ ...], or --all for the whole session")
    try:
        for path in recover(data):
            print(f"finished an interrupted erasure: {path}", file=sys.stderr)
        if args.all:
            result = forget_session(data, args.session)
        else:
            result = forget(data, args.session, args.seqs, reason=args.reason, cascade=not args.no_cascade)
    except PlanError as exc:
        return fail(str(exc))
    except KeyConfigError as exc:
        return fail(str(exc))
    except (RetrievalError, OSError) as exc:
        return fail(f"{data}: the erasure stopped ({exc}); whatever it began is finished by the next `python -m control forget`")
    print(describe(result))
    return EXIT_OK


@entry_point
def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m control", description="The visitor's decisions about a memory: forget it, with a signed certificate.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    f = sub.add_parser("forget", help="erase events of a session (or the whole session) and write an erasure certificate", epilog=EPILOG)
    f.add_argument("data_dir", metavar="DATA_DIR")
    f.add_argument("session", metavar="SESSION")
    f.add_argument("seqs", metavar="SEQ", nargs="*", help="the seqs of the events to forget")
    f.add_argument("--reason", metavar="TEXT", help="why (kept in the erasure record; never put the erased words here)")
    f.add_argument("--no-cascade", action="store_true", help="do not erase the answers whose receipts cited them")
    f.add_argument("--all", action="store_true", help="delete the whole session; the certificate holds only hashes")
    f.set_defaults(func=cmd_forget)
    args = parser.parse_args(argv)
    return run(args.func, args)


if __name__ == "__main__":
    raise SystemExit(main())
