"""`python -m chat DATA_DIR SESSION MESSAGE [-k K] [--create]`: one turn; the last line names the receipt.

Ask me first (issue 11), the same turn in two steps:
`python -m chat propose DATA_DIR SESSION MESSAGE [-k K]` lists the candidates, one a line — rank, seq, id, role,
when, score (a share of the best candidate's, 1.00 = best, as the app and `python -m retrieval search` show it),
text — and prints `token: ct1.…` last; nothing is appended. `python -m chat answer DATA_DIR TOKEN [ID ...]` answers with
only the approved memories (event ids or seqs; none is allowed); `--cancel` ends it with no turn at all.

With $DATABASE_URL set, every step reads and writes PostgreSQL (the engine opens storage.stores.open_stores); DATA_DIR
keeps the signing key and the receipt copy the last line names (DATA_DIR/receipt-copies/<session>/<id>.json), a file
the visitor can keep and check with `python -m receipts verify RECEIPT --data DATA_DIR`. A server that cannot be
reached is one error line naming it (never its password), exit 2.
"""

from __future__ import annotations

import argparse
import os
from contextlib import closing
from typing import Any

from cli.support import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Parser,
    describe_os_error,
    entry_point,
    existing_data_dir,
    fail,
    make_data_dir,
    note,
    writable_data_dir,
)

STEPS = ("propose", "answer")
# The three forms, as `main` reads them: a first word `propose` or `answer` picks a step, anything else is DATA_DIR.
USAGE = """python -m chat [-h] [-k K] [--create] DATA_DIR SESSION MESSAGE
       python -m chat propose [-h] [-k K] DATA_DIR SESSION MESSAGE
       python -m chat answer [-h] [--session SESSION] [--cancel] DATA_DIR TOKEN [ID ...]"""


def _guarded(action: Any) -> int:
    """Run `action()` with the CLI's one-line refusals (never a traceback, never an internal class name)."""
    from chat.engine import InputError, TurnError
    from chat.shown import turn_error_text
    from ledger.corrupted import LedgerCorrupted
    from receipts.keys import KeyConfigError
    from retrieval.model import RetrievalError
    from storage import BackendError

    try:
        result: int = action()
        return result
    except CliError as exc:
        return fail(str(exc), exc.code)
    except (InputError, KeyConfigError, RetrievalError, BackendError) as exc:
        return fail(str(exc), EXIT_USAGE)
    except (TurnError, LedgerCorrupted) as exc:
        return fail(turn_error_text(exc), EXIT_FAILED)  # a wrapped exception's class and message never shown
    except BrokenPipeError:
        raise  # entry_point ends quietly when the reader stopped early
    except OSError as exc:
        return fail(describe_os_error(exc), EXIT_USAGE)
    except Exception as exc:  # noqa: BLE001
        return fail(f"unexpected failure: {exc or 'no details'}", EXIT_FAILED)


def _print_turn(turn: Any, k: int) -> None:
    print(turn.answer)
    c = turn.completion
    print(f"answered by: {c.provider} ({c.model})" + (f" — {c.fallback_reason}" if c.fallback_reason else ""))
    print(f"memories: {len(turn.hits)} of k={k}")
    print(f"receipt: {turn.receipt_path}")


def _engine(data_raw: str, *, create: bool, write: bool, token: str | None = None) -> Any:
    """The engine on DATA_DIR's stores (PostgreSQL when $DATABASE_URL is set); the caller closes it (`closing`).
    `token` (answer, --cancel): refused (ConsentError, exit 2) unless its proposal waits in those stores, checked
    before the signing key is loaded or created and before anything is written (chat.consent.check_issued)."""
    from chat.engine import Engine
    from cli.stores import database_for, quiet_pool
    from storage.local import load_existing, new_key_note
    pass

    witnesses = None
    if os.environ.get("WITNESS_POLICY", "").strip():  # §22: witnesses cosign each turn's checkpoint; read first,
        from cli.prog_witness import _policy  # so a bad policy creates nothing

        witnesses = _policy(os.environ["WITNESS_POLICY"].strip())
    data = writable_data_dir(data_raw, create=create) if write else existing_data_dir(data_raw)
    stores = None
    if database_for() is not None:  # the database first: a bad URL or no server leaves no new DATA_DIR or key
        from storage.stores import open_stores

        quiet_pool()
        stores = open_stores(data, receipt_copies=True)  # `receipt: <path>` names a file this visitor keeps
    try:
        if token is not None:  # a token not issued here: refused before a key or folder is made for this DATA_DIR
            import time

            from chat.consent import TOKEN_TTL, check_issued, proposal_store
            from storage.api_faces import proposals_at

            check_issued(proposal_store(stores) if stores is not None else proposals_at(data, TOKEN_TTL), token, time.time())
        had_key = load_existing(data) is not None  # reads only: a new key is announced below, never made silently
        make_data_dir(data)
        engine = Engine(data, stores=stores)
        engine.witnesses = witnesses
    except BaseException:
        if stores is not None:
            stores.close()
        raise
    if not had_key:
        note(new_key_note(data, engine.key.key_id))  # the app says the same (webui.config.open_engine)
    return engine


def build_propose_parser() -> Parser:
    parser = Parser(prog="python -m chat propose", description="Ask me first, step 1: the memories retrieval would hand the model, and a one-time token. Nothing is appended.")
    parser.add_argument("data_dir", metavar="DATA_DIR")
    parser.add_argument("session", metavar="SESSION")
    parser.add_argument("message", metavar="MESSAGE")
    parser.add_argument("-k", type=int, default=8, help="memories proposed (1-50, default 8)")
    parser.set_defaults(func=cmd_propose)
    return parser


def cmd_propose(args: argparse.Namespace) -> int:
    def go() -> int:
        from retrieval.scoring import relative

        with closing(_engine(args.data_dir, create=False, write=True)) as engine:
            p = engine.propose(args.session, args.message, args.k)
        shares = relative([c.score for c in p.candidates])  # the candidates are the hits, best first: Hit.relative
        for c, share in zip(p.candidates, shares, strict=True):
            print(f"#{c.rank}  seq {c.seq}  {c.event_id}  {c.role}  {c.ts}  score {share:.2f}  {c.text[:200]!r}")
        if not p.candidates:
            print("no memories proposed (answer with no ids to send the question alone)")
        if p.excluded:
            print(f"left out (revoked): seq {', '.join(map(str, p.excluded))}")
        print(f"expires: {p.expires_at}")
        print(f"token: {p.token}")
        return EXIT_OK

    return _guarded(go)


def build_answer_parser() -> Parser:
    parser = Parser(prog="python -m chat answer", description="Ask me first, step 2: answer with only the approved memories (or --cancel: no turn).")
    parser.add_argument("data_dir", metavar="DATA_DIR")
    parser.add_argument("token", metavar="TOKEN")
    parser.add_argument("ids", metavar="ID", nargs="*", help="the approved memories' event ids (or seqs); none: the question alone")
    parser.add_argument("--session", metavar="SESSION", help="refuse the token unless it was issued for this session")
    parser.add_argument("--cancel", action="store_true", help="end the turn: nothing is sent to the model, nothing appended")
    parser.set_defaults(func=cmd_answer)
    return parser


def cmd_answer(args: argparse.Namespace) -> int:
    def go() -> int:
        from chat.consent import parse_token

        if args.cancel and args.ids:
            raise CliError("--cancel takes no ids")
        parse_token(args.token)  # its shape first: a malformed token is refused before DATA_DIR is even looked at
        with closing(_engine(args.data_dir, create=False, write=False, token=args.token)) as engine:
            if args.cancel:
                engine.cancel(args.token, session=args.session)
                print("cancelled: nothing was sent to the model and nothing was appended")
                return EXIT_OK
            turn = engine.answer(args.token, args.ids, session=args.session)
        _print_turn(turn, turn.body["k"])
        return EXIT_OK

    return _guarded(go)


def build_parser() -> Parser:
    """The parser of the one-turn `python -m chat DATA_DIR SESSION MESSAGE` (`propose` / `answer` have their own)."""
    parser = Parser(
        prog="python -m chat",
        usage=USAGE,
        description="Run one chat turn with a signed receipt. The same turn in two steps, a person approving the "
        "memories first: `python -m chat propose DATA_DIR SESSION MESSAGE`, then `python -m chat answer DATA_DIR "
        "TOKEN [ID ...]` (each with its own --help).",
    )
    parser.add_argument("data_dir", metavar="DATA_DIR")
    parser.add_argument("session", metavar="SESSION")
    parser.add_argument("message", metavar="MESSAGE")
    parser.add_argument("-k", type=int, default=8, help="memories handed to the model (1-50, default 8)")
    parser.add_argument("--create", action="store_true", help="create DATA_DIR and any missing folders above it (without it only the default ./data is made)")
    parser.set_defaults(func=cmd_turn)
    return parser


def cmd_turn(args: argparse.Namespace) -> int:
    def go() -> int:
        with closing(_engine(args.data_dir, create=args.create, write=True)) as engine:
            turn = engine.turn(args.session, args.message, args.k)
        _print_turn(turn, args.k)
        return EXIT_OK

    return _guarded(go)


PARSERS = {"propose": build_propose_parser, "answer": build_answer_parser}


def quiet_logs() -> None:
    """The CLI says what failed in its own one line (_guarded); without a handler Python's last resort would print
    the engine's log records (an exception's class, for the operator's log) to the person's terminal as well."""
    import logging

    logging.getLogger("chat").addHandler(logging.NullHandler())


@entry_point
def main(argv: list[str] | None = None) -> int:
    import sys

    quiet_logs()
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw and raw[0] in STEPS:
        parser, raw = PARSERS[raw[0]](), raw[1:]
    else:
        parser = build_parser()
    args: argparse.Namespace = parser.parse_args(raw)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
