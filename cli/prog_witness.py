"""`python -m receipts cosign` and `verify-note`: witnesses for a session's checkpoints (c2sp.org/tlog-witness,
tlog-cosignature, tlog-policy; docs/guides/witnesses.md).

`cosign DATA SESSION --policy FILE` signs the session's latest checkpoint as a note, asks every witness of the policy
that has a submission URL to cosign it (with the consistency proof from the size it last cosigned), and prints the
note with the cosignatures that verify; one line per witness on stderr. Exit 0 when the policy's quorum holds, 1 when
it does not (the note is printed all the same), 2 for unusable input. A witness that is down is a line, never a stop.

`verify-note NOTE --policy FILE` checks a checkpoint note (with its cosignatures) under a policy: a policy log signed
it, one row per witness, the quorum. Exit 0 VERIFIED, 1 FAILED, 3 UNVERIFIED (the policy names no log), 2 unusable.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from cli.support import EXIT_OK, CliError, existing_data_dir, fail
from ledger.event import EventError, validate_session_id
from receipts.checkpoints import MalformedCheckpoint
from receipts.cosignature import CosignedReport, Policy, check_cosigned, parse_policy, policy_rows, with_cosignatures
from receipts.note import MalformedNote, NotSigned, parse_note, sign_checkpoint_note
from receipts.report import MARK, Rows

EXIT_NO_QUORUM = 1
MAX_FILE_BYTES = 1024 * 1024


def _read(raw: str, what: str) -> bytes:
    from cli.prog_receipts import _read_small

    return _read_small(raw, what=what, expected=f"expected a {what} file", limit=MAX_FILE_BYTES)[1]


def _policy(raw: str) -> Policy:
    try:
        return parse_policy(_read(raw, "policy"))
    except MalformedNote as exc:
        raise CliError(f"{raw}: {exc}") from None


def cmd_cosign(args: argparse.Namespace) -> int:
    """Ask the policy's witnesses to cosign the session's latest checkpoint; print the cosigned note."""
    from cli.prog_receipts import _database, _note_key
    from storage.api import open_stores
    from storage.witness import ask_all

    data = existing_data_dir(args.data_dir)
    policy = _policy(args.policy)
    if not 0 < args.timeout <= 120:
        return fail(f"--timeout {args.timeout}: expected seconds between 0 and 120")
    try:
        session = validate_session_id(args.session)
    except EventError as exc:
        return fail(str(exc))
    key = _note_key(data)
    with open_stores(data, _database()) as stores:
        if not stores.ledger.exists(session):
            return fail(f"session {session}: no such session in {stores.where}")
        try:
            cp = stores.receipts.latest_checkpoint(session)
        except MalformedCheckpoint as exc:
            return fail(str(exc))
        if cp is None:
            return fail(f"session {session}: no signed checkpoint yet (one is signed after every append through the engine)")
        try:
            note = parse_note(sign_checkpoint_note(cp, key))
        except NotSigned as exc:
            return fail(f"session {session}: {exc}")
        size = int(cp["body"]["tree_size"])
        tree = stores.receipts.synced_tree(stores.ledger, session)
        try:
            outcomes = ask_all(note, size, list(policy.witnesses.values()), lambda m: tree.consistency_proof(m, size), timeout=args.timeout)
        finally:
            tree.close()
    cosigned = with_cosignatures(note, [s for o in outcomes for s in o.cosignatures])
    sys.stdout.write(cosigned.encode())
    for o in outcomes:
        print(o.line(), file=sys.stderr)
    r = Rows()
    ok = policy_rows(r, cosigned, policy)
    quorum = r.rows[-1]
    print(f"quorum: {quorum.message}", file=sys.stderr)
    return EXIT_OK if ok else EXIT_NO_QUORUM


def render(report: CosignedReport) -> str:
    lines = [f"checkpoint note of {report.origin} ({report.tree_size} events)"]
    for c in report.checks:
        lines.append(f"  [{MARK[c.status]}] {c.name}: {c.message}")
        if c.expected is not None or c.found is not None:
            lines.append(f"         expected {c.expected}; found {c.found}")
    lines.append(f"verdict: {report.verdict.upper()} ({len(report.failed)} failed, {len(report.not_verifiable)} not verifiable here)")
    return "\n".join(lines)


def cmd_verify_note(args: argparse.Namespace) -> int:
    """Check a checkpoint note and its cosignatures under a policy."""
    policy = _policy(args.policy)
    raw = _read(args.note, "checkpoint note")
    checkpoint = None
    if args.receipt is not None:
        from receipts.body import MalformedReceipt, parse_receipt

        try:
            checkpoint = parse_receipt(_read(args.receipt, "receipt")).signed_body["checkpoint"]
        except MalformedReceipt as exc:
            return fail(f"{args.receipt}: {exc}")
    try:
        report = check_cosigned(raw, policy, checkpoint=checkpoint)
    except MalformedNote as exc:
        return fail(f"{args.note}: {exc}")
    from cli.prog_receipts import EXIT_BY_VERDICT

    print(json.dumps(report.to_dict(), indent=2) if args.json else render(report))
    return EXIT_BY_VERDICT[report.verdict]


def add_parsers(sub: Any) -> None:
    """`cosign` and `verify-note`, added to `python -m receipts` (cli.prog_receipts.build_parser)."""
    c = sub.add_parser("cosign", help="ask a policy's witnesses to cosign a session's latest checkpoint; print the cosigned note")
    c.add_argument("data_dir")
    c.add_argument("session")
    c.add_argument("--policy", required=True, metavar="FILE", help="a tlog-policy file (c2sp.org/tlog-policy): witness keys and URLs, the quorum")
    c.add_argument("--timeout", type=float, default=5.0, metavar="S", help="seconds to wait for each witness (default 5)")
    c.set_defaults(func=cmd_cosign)
    v = sub.add_parser("verify-note", help="check a checkpoint note and its witness cosignatures under a tlog-policy")
    v.add_argument("note")
    v.add_argument("--policy", required=True, metavar="FILE", help="a tlog-policy file: the log keys, the witnesses, the quorum")
    v.add_argument("--receipt", metavar="RECEIPT", help="also check that the note is this receipt's signed checkpoint")
    v.add_argument("--json", action="store_true", help="the report as JSON: verdict and every check row")
    v.set_defaults(func=cmd_verify_note)


__all__ = ["add_parsers", "cmd_cosign", "cmd_verify_note", "render"]
