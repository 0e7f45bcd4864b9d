"""`python -m receipts replay RECEIPT --data DATA --trust KEY`: re-run the search a receipt's ranking commits to
(docs/FORMAT.md §24; chat.replay).

The receipt is verified first, against the data directory's ledger and under the trusted keys: a replay of a receipt
that does not verify would compare a ranking nobody signed. Then the search is rebuilt as it stood — the session's
events below the size the receipt names, that time's control state — and compared rank by rank.

Exit 0 "replayed" (same memories, order, matches, rules; scores within 1e-9 relative), 1 when the ranking differs (a
row per difference) or the receipt does not verify, 2 for unusable input, 3 when it cannot be replayed and why (an old
receipt without the commitment, an event the search saw erased since: the rest is still compared and shown).
"""

from __future__ import annotations

import argparse
import json
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from cli.support import EXIT_FAILED, CliError, existing_data_dir, fail, given_path
from receipts.body import MalformedReceipt, parse_receipt
from receipts.keys import KeyConfigError
from storage.offline import load_trust, verify_bytes

if TYPE_CHECKING:
    pass

EXPECTED = "expected a receipt file (the .json that `python -m chat` or the Chat tab's ⬇ button saves)"
EPILOG = (
    "exit status: 0 replayed (the same ranked memories, order and scores), 1 the ranking differs or the receipt does not "
    "verify, 2 unusable input, 3 cannot be replayed (and why)"
)


def cmd_replay(args: argparse.Namespace) -> int:
    from chat.citing import Cites
    from chat.replay import replay
    from cli.prog_receipts import read_receipt_file
    from cli.stores import data_stores

    path = given_path(args.receipt, what="receipt", expected=EXPECTED)
    if path.is_dir():
        return fail(f"{path}: is a directory; {EXPECTED}")
    data = existing_data_dir(args.data)
    if not args.trust:
        return fail("--trust PUBKEY: a replay checks only a receipt that verifies under a key you trust "
                    "(`python -m receipts pubkey DATA_DIR` prints the deployment's)")
    raw = read_receipt_file(path, EXPECTED)
    try:
        receipt = parse_receipt(raw)
        trusted = load_trust(args.trust)  # a --trust that is not a regular file (/dev/zero) is refused there, unread
    except MalformedReceipt as exc:
        return fail(f"{path}: {exc}")
    except KeyConfigError as exc:
        return fail(str(exc))
    with ExitStack() as stack:
        try:
            stores = stack.enter_context(data_stores(str(data)))
        except CliError:
            raise
        except Exception as exc:  # noqa: BLE001 - a read-only folder, a locked or broken index: unusable input, not a verdict
            return fail(f"{data}: its stores cannot be opened for a replay (it builds on the index's receipt_cites): "
                        f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        source: Any = stores.ledger if stores.ledger.kept_elsewhere() else None  # PostgreSQL's ledger is read as lines
        report = verify_bytes(raw, trusted=trusted, data_dir=str(data), source=source)
        if report.verdict != "verified":
            failed = [c.name for c in report.failed]
            why = f"{len(failed)} check(s) failed: {', '.join(failed[:5])}" if failed else f"verdict {report.verdict}"
            print(f"NOT REPLAYED: the receipt does not verify against {data} under the trusted key(s) ({why}); "
                  "run `python -m receipts verify` for the report")
            return EXIT_FAILED
        result = replay(stores, Cites(stores), receipt)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print("\n".join(result.lines()))
    return result.exit_code


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """`replay`, added to `python -m receipts` (cli.prog_receipts.build_parser)."""
    r = sub.add_parser("replay", help="re-run the search a receipt's ranking commits to, as the session stood, and compare", epilog=EPILOG)
    r.add_argument("receipt")
    r.add_argument("--data", metavar="DATA_DIR", required=True, help="the data directory (or, with $DATABASE_URL, the key folder) whose ledger the receipt cites")
    r.add_argument("--trust", metavar="PUBKEY", action="append", default=[], help="a trusted public key file (repeatable); the receipt must verify under one")
    r.add_argument("--json", action="store_true", help="the replay as JSON: verdict, reasons, differences, both lists, the events left out and why")
    r.set_defaults(func=cmd_replay)


__all__ = ["CliError", "add_parsers", "cmd_replay"]
