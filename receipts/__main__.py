"""`python -m receipts verify RECEIPT ...`, `python -m receipts pubkey DATA_DIR`, `python -m receipts checkpoint DATA_DIR SESSION`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ledger.cli_support import EXIT_FAILED, EXIT_OK, Parser, fail, run
from ledger.event import EventError

from .api import load_trust, verify_bytes
from .body import MAX_RECEIPT_BYTES, MalformedReceipt
from .checkpoints import MalformedCheckpoint, checkpoint_path, latest
from .keys import KeyConfigError, format_public_key, keys_dir, legacy_keys_dir, load_existing
from .verify import FAIL, NOT_VERIFIABLE, PASS, Report

MARK = {PASS: "ok  ", FAIL: "FAIL", NOT_VERIFIABLE: "n/a "}


def render_text(report: Report) -> str:
    lines = [f"receipt {report.receipt_id} (session {report.session}), checked {report.mode}"]
    for c in report.checks:
        lines.append(f"  {MARK[c.status]}  {c.name}: {c.message}")
        if c.status == FAIL and (c.expected is not None or c.found is not None):
            lines.append(f"          expected {c.expected}\n          found    {c.found}")
    n_na = len(report.not_verifiable)
    lines.append(f"verdict: {report.verdict.upper()} ({len(report.failed)} failed, {n_na} not verifiable here)")
    return "\n".join(lines)


def cmd_verify(args: argparse.Namespace) -> int:
    path = Path(args.receipt)
    try:
        size = path.stat().st_size
        if size > MAX_RECEIPT_BYTES:
            return fail(f"{path}: {size} bytes is over the {MAX_RECEIPT_BYTES}-byte receipt limit")
        raw = path.read_bytes()
    except OSError as exc:
        return fail(f"{path}: {exc.strerror or exc}")
    if args.data is not None and not Path(args.data).is_dir():
        return fail(f"{args.data}: not a readable data directory")
    try:
        trusted = load_trust(args.trust)
        report = verify_bytes(raw, trusted=trusted, data_dir=args.data, full=args.full)
    except MalformedReceipt as exc:
        return fail(f"{path}: {exc}")
    except KeyConfigError as exc:
        return fail(str(exc))
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(render_text(report))
    return EXIT_OK if report.verdict == "verified" else EXIT_FAILED


def cmd_pubkey(args: argparse.Namespace) -> int:
    data = Path(args.data_dir)
    if not data.is_dir():
        return fail(f"{data}: not a readable data directory")
    try:
        key = load_existing(data)
    except (KeyConfigError, OSError) as exc:
        return fail(str(exc))
    if key is None:
        return fail(f"{data}: no signing key (looked in {keys_dir(data)} and {legacy_keys_dir(data)}); none was created")
    print(format_public_key(key.public_key).rstrip("\n"))
    print(f"key id: {key.key_id}", file=sys.stderr)
    return EXIT_OK


def cmd_checkpoint(args: argparse.Namespace) -> int:
    """Print the session's latest signed checkpoint (JSON), to publish or to keep for `ledger verify --since`."""
    data = Path(args.data_dir)
    if not data.is_dir():
        return fail(f"{data}: not a readable data directory")
    try:
        path = checkpoint_path(data, args.session)
        if not (path.parent / "events.jsonl").is_file():
            return fail(f"session {args.session}: no such session in {data}")
        cp = latest(data, args.session)
    except MalformedCheckpoint as exc:
        return fail(str(exc))
    except EventError as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"{exc.filename or data}: {exc.strerror or exc}")
    if cp is None:
        return fail(f"session {args.session}: no signed checkpoint yet (one is signed after every append through the engine or an import with a signing key)")
    print(json.dumps(cp, indent=2, sort_keys=True))
    b = cp["body"]
    print(f"session {b['session']}: {b['tree_size']} events, root {b['root'][:16]}…, signed by {cp['key_id']} at {b['issued_at']}", file=sys.stderr)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m receipts", description="Verify signed receipts; show the signing key or a session's latest signed checkpoint.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    v = sub.add_parser("verify", help="verify a receipt offline, or with its ledger")
    v.add_argument("receipt")
    v.add_argument("--data", metavar="DATA_DIR", help="also check against this data directory's ledger (its own key is never trusted)")
    v.add_argument(
        "--trust", metavar="PUBKEY", action="append", default=[], help="a trusted public key file (repeatable); needed for VERIFIED"
    )
    v.add_argument("--json", action="store_true")
    v.add_argument("--full", action="store_true", help="re-walk the ledger from genesis, ignoring the audit cache")
    v.set_defaults(func=cmd_verify)
    p = sub.add_parser("pubkey", help="print the data directory's existing public key (a --trust file); never creates one")
    p.add_argument("data_dir")
    p.set_defaults(func=cmd_pubkey)
    c = sub.add_parser("checkpoint", help="print a session's latest signed checkpoint (JSON, to publish or keep)")
    c.add_argument("data_dir")
    c.add_argument("session")
    c.set_defaults(func=cmd_checkpoint)
    args = parser.parse_args(argv)
    return run(args.func, args)


if __name__ == "__main__":
    raise SystemExit(main())
