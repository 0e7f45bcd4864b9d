"""Command line: `python -m ledger import|verify ...` (a thin layer over the library)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from .cli_support import EXIT_FAILED as EXIT_BROKEN
from .cli_support import EXIT_OK, Parser, fail, run
from .event import EventError
from .store import ImportError_, Ledger, LedgerCorrupted


def _lines(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as f:
        yield from f


def cmd_import(args: argparse.Namespace) -> int:
    src = Path(args.file)
    if not src.is_file():
        return fail(f"{src}: no such file")
    ledger = Ledger(args.data_dir)
    progress = None
    if sys.stderr.isatty():
        from tqdm import tqdm

        progress = tqdm(desc="validating", unit=" lines", file=sys.stderr)
    try:
        events = ledger.import_jsonl(args.session, _lines(src), progress)
    except ImportError_ as exc:
        return fail(f"{src}: {exc}; nothing was imported")
    except EventError as exc:
        return fail(str(exc))
    except LedgerCorrupted as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"{exc.filename or args.data_dir}: {exc.strerror or exc}")
    finally:
        if progress is not None:
            progress.close()
    first, last = events[0].seq, events[-1].seq
    print(f"imported {len(events)} events into session {args.session} (seq {first}..{last}), head {events[-1].chain[:16]}")
    return EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    data = Path(args.data_dir)
    if not data.is_dir():
        return fail(f"{data}: not a readable data directory")
    ledger = Ledger(data)
    try:
        names = args.sessions or ledger.sessions()
        for name in names:
            if not ledger.exists(name):
                return fail(f"session {name}: no such session in {data}")
        reports = [ledger.verify(name) for name in names]
    except EventError as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"{exc.filename or data}: {exc.strerror or exc}")
    broken = [r for r in reports if not r.ok]
    if args.json:
        print(json.dumps({"ok": not broken, "sessions": [r.to_dict() for r in reports]}, indent=2))
    else:
        for r in reports:
            if r.ok:
                note = f" ({len(r.quarantined)} quarantined torn tail file(s))" if r.quarantined else ""
                print(f"ok      {r.session}: {r.events} events, head {r.head[:16]}{note}")
            else:
                b = r.brk
                assert b is not None
                print(f"BROKEN  {r.session}: line {b.line}, seq {b.seq}, {b.kind}: {b.message}")
                if b.expected is not None or b.found is not None:
                    print(f"        expected {b.expected}\n        found    {b.found}")
        print(f"{len(reports) - len(broken)} of {len(reports)} sessions verified")
    return EXIT_BROKEN if broken else EXIT_OK


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m ledger", description="The hash-chained session ledger.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    p = sub.add_parser("import", help="import a JSONL file of messages into a session")
    p.add_argument("data_dir")
    p.add_argument("session")
    p.add_argument("file", help='JSONL: {"role": ..., "text": ..., "meta": {...}?, "ts": "..."?} per line')
    p.set_defaults(func=cmd_import)
    v = sub.add_parser("verify", help="verify sessions (all when none is named)")
    v.add_argument("data_dir")
    v.add_argument("sessions", nargs="*")
    v.add_argument("--json", action="store_true", help="print a JSON report")
    v.set_defaults(func=cmd_verify)
    args = parser.parse_args(argv)
    return run(args.func, args)


if __name__ == "__main__":
    raise SystemExit(main())
