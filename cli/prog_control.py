"""`python -m control forget DATA_DIR SESSION SEQ [SEQ ...] [--reason TEXT] [--no-cascade]`,
`python -m control forget DATA_DIR SESSION --all`, and (issue 11)
`python -m control revoke DATA_DIR SESSION SEQ [--reason TEXT]` / `python -m control restore DATA_DIR SESSION SEQ`,
and (issue 12) `python -m control supersede DATA_DIR SESSION NEW_SEQ OLD_SEQ [--reason TEXT]` /
`python -m control history DATA_DIR SESSION SEQ [--json]`, and (issue 28)
`python -m control suggestions DATA_DIR SESSION [--json]`: what a model proposed and the rules did not confirm;
`python -m control ask-first DATA_DIR SESSION [on|off]`.

Prints what was erased and, as its last line, `certificate: <path>`. Exit 0 when done; 2 (one line, nothing
changed) for an unusable data directory, an unknown session, a bad seq, an event already erased or an
erasure record; 1 when the erasure began and stopped (an I/O error, a reader holding the index's old snapshot):
the ledger changed and the journal stays, so the next forget finishes it. An erasure a crash interrupted is
finished first (control.forget.recover).

With DATABASE_URL set (postgresql://…) every command works on the PostgreSQL stores (storage.stores.pg_stores):
DATA_DIR is then the folder that keeps the signing key, the erasure journals and the certificates, and must
exist; a server that cannot be reached is one line, exit 2. Without it the commands work on the files in DATA_DIR
as before (each opens its own handles there, the index only when a step needs it).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from cli.support import EXIT_FAILED, EXIT_OK, CliError, Parser, entry_point, fail, run, shown_arg
from control.forget import describe, forget, forget_session, pending, pending_sessions, recover, result_dict
from control.plan import PlanError
from control.revocation import restore, revoke
from control.settings import SettingsError, get_consent, set_consent
from control.suggestions import open_suggestions
from control.supersession import HistoryEntry, history, supersede
from ledger.event import EventError, validate_session_id
from receipts.keys import KeyConfigError
from retrieval.model import RetrievalError
from storage import BackendError, admin

if TYPE_CHECKING:
    from storage.stores import Stores

EPILOG = (
    "Every assistant answer whose receipt cited an erased event is erased with it (--no-cascade: only the named "
    "events); a user message only when named. Stored receipts citing an erased event are redacted (format 2) or "
    "withdrawn (format 1). Verify the certificate with `python -m receipts verify CERT --trust PUBKEY [--data DATA_DIR]`. "
    "exit status: 0 done; 1 the erasure began and stopped (an I/O error, a reader holding the index): the next "
    "forget finishes it; 2 unusable input, nothing changed."
)


def _data_dir(value: str) -> Path:
    """The DATA_DIR argument, refused in one line (exit 2) unless it is a data directory the app or chat wrote."""
    data = Path(value)
    if not value.strip() or not (data / "sessions").is_dir():
        raise CliError(f"{shown_arg(value)}: not a data directory (expected the DATA_DIR the app or `python -m chat` writes)")
    return data


@contextmanager
def _opened(value: str) -> Iterator[tuple[Path, Stores | None]]:
    """DATA_DIR and the stores a command uses: PostgreSQL's when DATABASE_URL names it (closed after), else None —
    the files in DATA_DIR, which each command opens itself as it always did."""
    from cli.stores import database_for, opened_stores  # light: psycopg only when a URL is set

    url = database_for()
    if url is None:
        yield _data_dir(value), None
        return
    data = Path(value)
    if not value.strip() or not data.is_dir():
        raise CliError(f"{value}: not a folder (with DATABASE_URL set, DATA_DIR is the folder of the signing key and erasure certificates)")
    with opened_stores(data, url) as stores:
        yield data, stores


def cmd_forget(args: argparse.Namespace) -> int:
    if args.all and args.seqs:
        return fail("give either SEQ ... or --all, not both")
    if not args.all and not args.seqs:
        return fail("say which events to forget: SEQ [SEQ ...], or --all for the whole session")
    with _opened(args.data_dir) as (data, stores):
        return _forget(args, data, stores)


def _forget(args: argparse.Namespace, data: Path, stores: Stores | None) -> int:
    try:
        recovered = recover(data, stores=stores)
        for path in recovered:
            print(f"finished an interrupted erasure: {path}", file=sys.stderr)
        if args.all:
            result = forget_session(data, args.session, stores=stores)
        else:
            result = forget(data, args.session, args.seqs, reason=args.reason, cascade=not args.no_cascade, stores=stores)
    except PlanError as exc:
        return fail(str(exc))
    except KeyConfigError as exc:
        return fail(str(exc))
    except (RetrievalError, OSError, BackendError) as exc:
        if _began(data, args.session, stores):  # the ledger changed: not exit 2
            return fail(f"{data}: the erasure began and stopped ({exc}); the next `python -m control forget` finishes it", EXIT_FAILED)
        return fail(f"{data}: the erasure stopped before anything changed ({exc})")
    print(json.dumps(result_dict(result, recovered), indent=2, sort_keys=True) if args.json else describe(result))
    return EXIT_OK


def _began(data: Path, session: str, stores: Stores | None) -> bool:
    """Whether a failed forget left its erasure pending: its journal in `data`, or on PostgreSQL in the database."""
    try:
        return session in pending_sessions(data, stores)
    except Exception:  # noqa: BLE001 - the database failed too: the journals in DATA_DIR only
        return any(p.name == f".pending-{session}.json" for p in pending(data))


CONTROL_EPILOG = (
    "Revoke is not erasure: the event stays in the ledger, unchanged, and is no longer handed to the model "
    "(forget destroys the words). Each revoke or restore is a control event appended to the ledger; receipts of "
    "later turns name the revocation that excluded a memory. exit status: 0 done; 2 unusable input, nothing appended."
)


def cmd_control(args: argparse.Namespace) -> int:
    with _opened(args.data_dir) as (data, stores):
        return _control(args, data, stores)


def _control(args: argparse.Namespace, data: Path, stores: Stores | None) -> int:
    try:
        do = revoke if args.command == "revoke" else restore
        result = do(data, args.session, args.seq, reason=args.reason, stores=stores)
    except (PlanError, KeyConfigError) as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"{data}: nothing was appended ({exc.strerror or exc})")
    print(result.summary())
    return EXIT_OK


SUPERSEDE_EPILOG = (
    "The older event stays in the ledger, unchanged, and is no longer served as the current fact; the newer one "
    "holds. The supersession is a record appended to the ledger (never a word of either statement: the reason must "
    "not quote them). `history` lists every statement of the fact, oldest first. exit status: 0 done; 2 unusable "
    "input, nothing appended."
)


def cmd_supersede(args: argparse.Namespace) -> int:
    with _opened(args.data_dir) as (data, stores):
        return _supersede(args, data, stores)


def _supersede(args: argparse.Namespace, data: Path, stores: Stores | None) -> int:
    try:
        result = supersede(data, args.session, args.new_seq, args.old_seq, reason=args.reason, stores=stores)
    except (PlanError, KeyConfigError) as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"{data}: nothing was appended ({exc.strerror or exc})")
    print(result.summary())
    return EXIT_OK


def history_line(row: HistoryEntry) -> str:
    """One statement of a fact as `python -m control history` prints it."""
    if row.superseded_by is None:
        state = "live"
    else:
        why = f"; {row.shown_reason}" if row.shown_reason else ""
        state = f"superseded by seq {row.superseded_by} ({row.decided_by}{why})"
    flags = "".join(f" [{f}]" for f, on in (("revoked", row.revoked), ("forgotten", row.erased)) if on)
    text = "(its words were forgotten)" if row.text is None else json.dumps(row.text, ensure_ascii=False)
    return f"seq {row.seq}  {row.ts}  {row.role}  {state}{flags}  {text}"


def cmd_history(args: argparse.Namespace) -> int:
    with _opened(args.data_dir) as (data, stores):
        return _history(args, data, stores)


def _history(args: argparse.Namespace, data: Path, stores: Stores | None) -> int:
    try:
        rows = history(data, args.session, args.seq, stores=stores)
    except PlanError as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"{data}: the history cannot be read ({exc.strerror or exc})")
    if args.json:
        print(json.dumps([r.to_dict() for r in rows], indent=2, ensure_ascii=False))
    else:
        print(f"session {args.session}: {len(rows)} statement(s) of this fact, oldest first")
        for r in rows:
            print(history_line(r))
    return EXIT_OK


def cmd_suggestions(args: argparse.Namespace) -> int:
    with _opened(args.data_dir) as (data, stores):
        return _suggestions(args, data, stores)


def _suggestions(args: argparse.Namespace, data: Path, stores: Stores | None) -> int:
    from storage.stores import file_stores

    try:
        validate_session_id(args.session)
    except EventError as exc:
        return fail(str(exc))
    own = stores is None
    st = file_stores(data) if stores is None else stores
    try:
        count, _head = st.ledger.head(args.session)
        if count == 0:
            return fail(f"session {args.session}: no such session")
        items = open_suggestions(st, args.session)
    except (PlanError, SettingsError) as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"session {args.session}: the suggestions cannot be read ({exc.strerror or exc})")
    finally:
        if own:
            st.close()
    if args.json:
        print(json.dumps([x.to_dict() for x in items], indent=2))
        return EXIT_OK
    print(f"session {args.session}: {len(items)} open suggestion(s); confirm one with `python -m control supersede DATA_DIR {args.session} NEW OLD`")
    for x in items:
        print(x.line())
    return EXIT_OK


ASK_FIRST_EPILOG = (
    "Ask me first: while it is on, the person approves the memories before a model sees them (propose, then answer); "
    "a one-step turn (the web chat, MCP ask, `python -m chat`) is refused. The setting is the one the app's Chat tab "
    "sets (control.settings: DATA_DIR/sessions/SESSION/settings.json, or the database with DATABASE_URL). Without "
    "on/off it prints the current state. exit status: 0 done; 2 unusable input, nothing changed."
)


def cmd_ask_first(args: argparse.Namespace) -> int:
    if args.value is not None and args.value not in ("on", "off"):
        return fail(f"ask-first: {shown_arg(args.value)}: expected on or off (or nothing, to show the setting)")
    with _opened(args.data_dir) as (data, stores):
        return _ask_first(args, data, stores)


def _ask_first(args: argparse.Namespace, data: Path, stores: Stores | None) -> int:
    where: Path | Stores = stores if stores is not None else data
    try:
        if args.value is None:
            on = get_consent(where, args.session)
            if not on and not (stores.ledger if stores is not None else admin.file_ledger(data, record_tails=False)).exists(args.session):
                return fail(f"settings: session {args.session} is unknown in {stores.where if stores is not None else data}")
        else:
            on = set_consent(where, args.session, args.value == "on")
    except SettingsError as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"{data}: the setting cannot be {'read' if args.value is None else 'written'} ({exc.strerror or exc})")
    print(f"session {args.session}: ask me first is {'on' if on else 'off'}")
    return EXIT_OK


def build_parser() -> Parser:
    """The parser of `python -m control` (built without running it: `mre` is checked against it)."""
    parser = Parser(prog="python -m control", description="The visitor's decisions about a memory: forget it (with a signed certificate), revoke or restore it, supersede it with a newer statement; ask me first for a session.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    f = sub.add_parser("forget", help="erase events of a session (or the whole session) and write an erasure certificate", epilog=EPILOG)
    f.add_argument("data_dir", metavar="DATA_DIR")
    f.add_argument("session", metavar="SESSION")
    f.add_argument("seqs", metavar="SEQ", nargs="*", help="the seqs of the events to forget")
    f.add_argument("--reason", metavar="TEXT", help="why (kept in the erasure record; never put the erased words here)")
    f.add_argument("--no-cascade", action="store_true", help="do not erase the answers whose receipts cited them")
    f.add_argument("--all", action="store_true", help="delete the whole session; the certificate holds only hashes")
    f.add_argument("--json", action="store_true", help="print what was erased and the certificate's path as JSON")
    f.set_defaults(func=cmd_forget)
    for name, what in (("revoke", "take an event out of retrieval (kept on record, unused)"), ("restore", "bring a revoked event back into retrieval")):
        c = sub.add_parser(name, help=what, epilog=CONTROL_EPILOG)
        c.add_argument("data_dir", metavar="DATA_DIR")
        c.add_argument("session", metavar="SESSION")
        c.add_argument("seq", metavar="SEQ", help="the event's seq (or its id, evt_…)")
        c.add_argument("--reason", metavar="TEXT", help="why (kept in the ledger for good; never repeat the memory's words)")
        c.set_defaults(func=cmd_control)
    s = sub.add_parser("supersede", help="record that a newer statement supersedes an older one (both kept on record)", epilog=SUPERSEDE_EPILOG)
    s.add_argument("data_dir", metavar="DATA_DIR")
    s.add_argument("session", metavar="SESSION")
    s.add_argument("new_seq", metavar="NEW_SEQ", help="the newer statement's seq (or its id, evt_…): a user statement")
    s.add_argument("old_seq", metavar="OLD_SEQ", help="the older statement's seq (or its id, evt_…)")
    s.add_argument("--reason", metavar="TEXT", help="why (kept in the ledger for good; never repeat either statement's words)")
    s.set_defaults(func=cmd_supersede)
    h = sub.add_parser("history", help="every statement of the fact an event states, oldest first, each live or superseded", epilog=SUPERSEDE_EPILOG)
    h.add_argument("data_dir", metavar="DATA_DIR")
    h.add_argument("session", metavar="SESSION")
    h.add_argument("seq", metavar="SEQ", help="any statement of the fact: its seq (or its id, evt_…)")
    h.add_argument("--json", action="store_true", help="print the statements as JSON")
    h.set_defaults(func=cmd_history)
    g = sub.add_parser(
        "suggestions",
        help="supersessions a model proposed that the rules did not confirm (nothing recorded): confirm one with supersede",
        epilog=SUPERSEDE_EPILOG,
    )
    g.add_argument("data_dir", metavar="DATA_DIR")
    g.add_argument("session", metavar="SESSION")
    g.add_argument("--json", action="store_true", help="print the suggestions as JSON")
    g.set_defaults(func=cmd_suggestions)
    a = sub.add_parser("ask-first", help="turn ask me first on or off for a session, or show it (the app's setting)", epilog=ASK_FIRST_EPILOG)
    a.add_argument("data_dir", metavar="DATA_DIR")
    a.add_argument("session", metavar="SESSION")
    a.add_argument("value", metavar="on|off", nargs="?", help="on: memories need the person's approval; off: they do not (default: show the setting)")
    a.set_defaults(func=cmd_ask_first)
    return parser


@entry_point
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run(args.func, args)


if __name__ == "__main__":
    raise SystemExit(main())
