"""`python -m receipts verify RECEIPT ...`, `python -m receipts pubkey DATA_DIR`, `python -m receipts checkpoint DATA_DIR SESSION`.

With $DATABASE_URL set, `verify --data DATA_DIR` checks the receipt against the session's ledger in PostgreSQL (its
rows audited from a private copy: storage.files.receipts.ledger_copy; DATA_DIR still gives the deployment's own, untrusted key) and
`checkpoint` prints the latest checkpoint the database keeps; an erasure certificate with --data is checked against the
database's rows and receipts the same way. storage.pg is imported only then.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cli.support import (
    EXIT_FAILED,
    EXIT_OK,
    EXPECTED_DATA_DIR,
    CliError,
    Parser,
    entry_point,
    existing_data_dir,
    fail,
    given_path,
    run,
)
from ledger.event import EventError, validate_session_id
from receipts.body import MAX_RECEIPT_BYTES, MalformedReceipt, parse_receipt
from receipts.certificate import MalformedCertificate, is_certificate, parse_certificate
from receipts.certificate_check import render_text as render_certificate
from receipts.checkpoints import MalformedCheckpoint
from receipts.groups import group_report
from receipts.keys import KeyConfigError, SigningKey, format_public_key
from receipts.note import MalformedNote, NotSigned, parse_vkey, sign_checkpoint_note, verifier
from receipts.report import MARK
from receipts.show import render_text as render_show
from receipts.show import summarize
from receipts.tlog_proof import (
    MalformedTlogProof,
    NoProof,
    TlogProofReport,
    check_tlog_proof,
    parse_event_line,
    parse_tlog_proof,
    tlog_proof_for,
)
from receipts.verify import ERASED, FAIL, WITHHELD, Check, Report
from storage.local import keys_dir, legacy_keys_dir, load_existing
from storage.offline import checkpoint_path, latest, load_trust, verify_bytes, verify_certificate_bytes

# `receipts verify` exit codes: one per verdict, and 2 for input that is not a usable receipt.
EXIT_UNVERIFIED = 3
EXIT_BY_VERDICT = {"verified": EXIT_OK, "failed": EXIT_FAILED, "unverified": EXIT_UNVERIFIED}
VERIFY_EPILOG = (
    "exit status: 0 VERIFIED (nothing failed, both signatures checked against a --trust key); "
    "1 FAILED (a check failed: the receipt or the ledger does not match); "
    "3 UNVERIFIED (nothing failed, but something could not be checked here, e.g. no --trust key or no such session in --data); "
    "2 unusable input (not a receipt, unreadable, a directory, an empty path, a bad --trust or --data)."
)
VERIFY_PROOF_EPILOG = (
    "exit status: 0 VERIFIED (the note is signed by a --vkey key, its origin names the event's session, the event's digest "
    "recomputes, and the inclusion path leads to the signed root); 1 FAILED; 3 UNVERIFIED (no --vkey given); 2 unusable input."
)
POLICY_PROOF_HELP = "also check the note's witness cosignatures under this tlog-policy (its log keys are trusted as --vkey keys)"


def _row_lines(c: Check, indent: str) -> list[str]:
    lines = [f"{indent}{MARK[c.status]}  {c.name}: {c.message}"]
    if c.status == FAIL and (c.expected is not None or c.found is not None):
        pad = indent + " " * 6
        lines.append(f"{pad}expected {c.expected}\n{pad}found    {c.found}")
    return lines


def render_text(report: Report, *, rows: bool = False) -> str:
    """One line per group (the signature, the receipt, the question, memory 1…K, the answer, the ledger);
    a failed group lists its failed rows with expected and found; `rows` adds every raw row below."""
    mode = "with the ledger" if report.mode == "ledger" else "offline"
    lines = [f"receipt {report.receipt_id} (session {report.session}), checked {mode}"]
    by_name = {c.name: c for c in report.checks}
    groups = group_report(report)
    width = max((len(g.title) for g in groups), default=0)
    for g in groups:
        lines.append(f"  {MARK[g.status]}  {g.title.ljust(width)}  {g.sentence}")
        if g.status == FAIL and not rows:
            for name in g.checks:
                if by_name[name].status == FAIL:
                    lines.extend(_row_lines(by_name[name], " " * 10))
    if rows:
        lines.append(f"all {len(report.checks)} checks:")
        for c in report.checks:
            lines.extend(_row_lines(c, "  "))
    n_na = len(report.not_verifiable)
    tail = "" if rows else f"; --rows lists all {len(report.checks)} checks"
    counts = {s: sum(c.status == s for c in report.withheld) for s in (WITHHELD, ERASED)}
    held = "".join(f", {n} {s}" for s, n in counts.items() if n)
    lines.append(f"verdict: {report.verdict.upper()} ({len(report.failed)} failed, {n_na} not verifiable here{held}{tail})")
    return "\n".join(lines)


def _database() -> str | None:
    """$DATABASE_URL when set (CliError for one that is not a PostgreSQL URL); None: the files."""
    from cli.stores import database_for

    return database_for()


@contextmanager
def _database_stores(data: str, url: str | None) -> Iterator[Any]:
    """None on files (the ledger and receipts are in `data`); on PostgreSQL the database's stores, open for the block."""
    if url is None:
        yield None
        return
    from cli.stores import opened_stores

    with opened_stores(data, url) as stores:
        yield stores


def stored_in(path: Path) -> tuple[Path, str] | None:
    """(data directory, session) when `path` is a receipt the store keeps (DATA_DIR/sessions/<S>/receipts/rcpt_*.json,
    symlinks resolved), else None (a download, a copy elsewhere)."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError):
        return None
    folder = real.parent
    if folder.name != "receipts" or folder.parent.parent.name != "sessions" or not real.name.startswith("rcpt_"):
        return None
    try:
        session = validate_session_id(folder.parent.name)
    except EventError:
        return None
    return folder.parent.parent.parent, session


def settle_stored(path: Path) -> None:
    """Before `show` prints a stored receipt: an erasure of its session that stopped half way (its journal
    in DATA_DIR/erasures) is finished first (control.settle), so no forgotten word is printed; CliError (one line) when
    it cannot be finished now. Nothing is done for a receipt kept anywhere else, nor with nothing pending."""
    where = stored_in(path)
    if where is None:
        return
    data, session = where
    from control.settle import ErasureUnfinished, settle, unfinished

    if not unfinished(data, session):
        return
    try:
        with _database_stores(str(data), _database()) as stores:
            settle(data, session, stores=stores)
    except ErasureUnfinished as exc:
        raise CliError(str(exc)) from None


def cmd_verify(args: argparse.Namespace) -> int:
    expected = "expected a receipt file (the .json that `python -m chat` or the Chat tab's ⬇ button saves)"
    path = given_path(args.receipt, what="receipt", expected=expected)
    if path.is_dir():
        return fail(f"{path}: is a directory; {expected}")
    if args.data is not None:
        given_path(args.data, what="--data", expected=EXPECTED_DATA_DIR)
    raw = read_receipt_file(path, expected)
    url = None
    if args.data is not None:
        existing_data_dir(args.data)
        url = _database()
    if (other := _not_a_receipt(raw)) is not None:  # a bundle or a checkpoint: name the command that checks it
        return fail(f"{path}: {other}")
    if is_certificate(raw):  # an erasure certificate (docs/FORMAT.md §16): dispatch on payloadType
        return _verify_certificate(path, raw, args, url)
    policy = None
    if getattr(args, "policy", None) is not None:  # witness cosignatures (§22): checked under a tlog-policy
        from cli.prog_witness import _policy

        policy = _policy(args.policy)
    try:
        trusted = load_trust(args.trust)
        parse_receipt(raw)  # a receipt first: nothing is asked of the database for input that is not one
        with _database_stores(args.data, url) as stores:
            source = None if stores is None else stores.ledger
            report = verify_bytes(raw, trusted=trusted, data_dir=args.data, full=args.full, source=source, policy=policy)
    except MalformedReceipt as exc:
        return fail(f"{path}: {exc}")
    except KeyConfigError as exc:
        return fail(str(exc))
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(render_text(report, rows=args.rows))
    return EXIT_BY_VERDICT[report.verdict]


def read_receipt_file(path: Path, expected: str) -> bytes:
    """The bytes of a receipt file (`receipts verify`, `receipts replay`): at most the limit + 1 bytes of a regular file,
    since /dev/zero or a FIFO says it holds 0 bytes and never ends. CliError, one line naming the file, otherwise."""
    try:
        if path.exists() and not path.is_file():
            raise CliError(f"{path}: not a regular file; {expected}")
        with open(path, "rb") as f:
            raw = f.read(MAX_RECEIPT_BYTES + 1)
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_RECEIPT_BYTES:
        raise CliError(f"{path}: over the {MAX_RECEIPT_BYTES}-byte receipt limit")
    return raw


def _not_a_receipt(raw: bytes) -> str | None:
    """What `raw` is when it is another of the project's files that `receipts verify` does not check, and the
    command that does; None for anything else (a receipt, a certificate, or input its parser will refuse)."""
    from receipts.checkpoints import MalformedCheckpoint, parse_checkpoint

    if raw.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "a session bundle (a zip), not a receipt; check it with `python -m bundle verify FILE`"
    try:
        parse_checkpoint(raw)
    except MalformedCheckpoint:
        return None
    return "a signed checkpoint, not a receipt; check it with `python -m ledger verify DATA_DIR SESSION --since FILE`"


def _verify_certificate(path: Path, raw: bytes, args: argparse.Namespace, url: str | None) -> int:
    try:
        trusted = load_trust(args.trust)
        parse_certificate(raw)  # a certificate first: nothing is asked of the database for input that is not one
        with _database_stores(args.data, url) as stores:
            source, receipts = (None, None) if stores is None else (stores.ledger, stores.receipts)
            report = verify_certificate_bytes(raw, trusted=trusted, data_dir=args.data, full=args.full, source=source, receipts=receipts)
    except MalformedCertificate as exc:
        return fail(f"{path}: {exc}")
    except KeyConfigError as exc:
        return fail(str(exc))
    print(json.dumps(report.to_dict(), indent=2) if args.json else render_certificate(report))
    return EXIT_BY_VERDICT[report.verdict]


def cmd_show(args: argparse.Namespace) -> int:
    """Print what a receipt says (it verifies nothing; `receipts verify` does)."""
    expected = "expected a receipt file (the .json that `python -m chat` or the Chat tab's ⬇ button saves)"
    path = given_path(args.receipt, what="receipt", expected=expected)
    if path.is_dir():
        return fail(f"{path}: is a directory; {expected}")
    settle_stored(path)  # a stored receipt of a session whose erasure stopped half way: finished first, or refused
    try:
        size = path.stat().st_size
        if size > MAX_RECEIPT_BYTES:
            return fail(f"{path}: {size} bytes is over the {MAX_RECEIPT_BYTES}-byte receipt limit")
        raw = path.read_bytes()
        summary = summarize(parse_receipt(raw).body)
    except OSError as exc:
        return fail(f"{path}: {exc.strerror or exc}")
    except MalformedReceipt as exc:
        return fail(f"{path}: {exc}")
    if args.json:
        print(json.dumps(summary, indent=2, ensure_ascii=True))
    else:
        print(render_show(summary))
    return EXIT_OK


def cmd_pubkey(args: argparse.Namespace) -> int:
    data = existing_data_dir(args.data_dir)
    try:
        key = load_existing(data)
    except (KeyConfigError, OSError) as exc:
        return fail(str(exc))
    if key is None:
        return fail(f"{data}: no signing key (looked in {keys_dir(data)} and {legacy_keys_dir(data)}); none was created")
    print(verifier(key.public_key).vkey() if args.vkey else format_public_key(key.public_key).rstrip("\n"))
    print(f"key id: {key.key_id}", file=sys.stderr)
    return EXIT_OK


def cmd_checkpoint(args: argparse.Namespace) -> int:
    """Print the session's latest signed checkpoint (JSON, or with --note as a C2SP signed note), to publish or to
    keep for `ledger verify --since`."""
    data = existing_data_dir(args.data_dir)
    note_key = _note_key(data) if args.note else None
    url = _database()
    if url is not None:
        return _checkpoint_database(data, url, args.session, note_key)
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
    return _print_checkpoint(cp, note_key)


def _note_key(data: Path) -> SigningKey:
    """The data directory's existing signing key, which signs a checkpoint as a note (CliError when there is none)."""
    try:
        key = load_existing(data)
    except (KeyConfigError, OSError) as exc:
        raise CliError(str(exc)) from None
    if key is None:
        raise CliError(f"{data}: no signing key (looked in {keys_dir(data)} and {legacy_keys_dir(data)}); a note is signed with the key that signed the checkpoint")
    return key


def _checkpoint_database(data: Path, url: str, session: str, note_key: SigningKey | None = None) -> int:
    """`checkpoint` on PostgreSQL: the latest checkpoint the database keeps for the session."""
    from cli.stores import opened_stores

    try:
        validate_session_id(session)
        with opened_stores(data, url) as stores:
            if not stores.ledger.exists(session):
                return fail(f"session {session}: no such session in {stores.where}")
            cp = stores.receipts.latest_checkpoint(session)
    except (MalformedCheckpoint, EventError) as exc:
        return fail(str(exc))
    if cp is None:
        return fail(f"session {session}: no signed checkpoint yet (one is signed after every append through the engine)")
    return _print_checkpoint(cp, note_key)


def _print_checkpoint(cp: dict[str, Any], note_key: SigningKey | None = None) -> int:
    if note_key is None:
        print(json.dumps(cp, indent=2, sort_keys=True))
    else:
        try:
            sys.stdout.write(sign_checkpoint_note(cp, note_key))
        except NotSigned as exc:
            return fail(f"session {cp['body']['session']}: {exc}")
    b = cp["body"]
    print(f"session {b['session']}: {b['tree_size']} events, root {b['root'][:16]}…, signed by {cp['key_id']} at {b['issued_at']}", file=sys.stderr)
    return EXIT_OK


_SEQ_RE = re.compile(r"0|[1-9][0-9]{0,15}")
MAX_TEXT_FILE_BYTES = 1024 * 1024


def _read_small(raw: str, *, what: str, expected: str, limit: int = MAX_TEXT_FILE_BYTES) -> tuple[Path, bytes]:
    """A small file named on the command line, read whole (CliError, one line, for a directory, a missing or a big one)."""
    path = given_path(raw, what=what, expected=expected)
    if path.is_dir():
        raise CliError(f"{path}: is a directory; {expected}")
    try:
        size = path.stat().st_size
        if size > limit:
            raise CliError(f"{path}: {size} bytes is over the {limit}-byte limit for {what}")
        return path, path.read_bytes()
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror or exc}") from None


def cmd_tlog_proof(args: argparse.Namespace) -> int:
    """Print the tlog-proof (c2sp.org/tlog-proof@v1) of one event a receipt cites: its seq, the inclusion path the
    receipt carries, and the receipt's checkpoint as a signed note (signed by the key that signed the checkpoint:
    the data directory's, from --data or from where the receipt is kept)."""
    expected = "expected a receipt file (the .json that `python -m chat` or the Chat tab's ⬇ button saves)"
    path, raw = _read_small(args.receipt, what="receipt", expected=expected, limit=MAX_RECEIPT_BYTES)
    if not _SEQ_RE.fullmatch(args.seq):
        return fail(f"SEQ: expected the seq of an event the receipt cites (a non-negative integer), found {args.seq!r}")
    try:
        receipt = parse_receipt(raw)
    except MalformedReceipt as exc:
        return fail(f"{path}: {exc}")
    if args.data is not None:
        data = existing_data_dir(args.data)
    else:
        where = stored_in(path)
        if where is None:
            return fail(f"{path}: not a receipt kept in a data directory; give --data DATA_DIR, whose key signed its checkpoint and signs the note")
        data = where[0]
    key = _note_key(data)
    try:
        proof = tlog_proof_for(receipt, int(args.seq), key)
    except (NoProof, NotSigned) as exc:
        return fail(f"{path}: {exc}")
    sys.stdout.write(proof)
    cp = receipt.signed_body["checkpoint"]
    print(f"seq {args.seq} of receipt {receipt.receipt_id} (session {receipt.session}): in the tree of {cp['body']['tree_size']} events, checkpoint signed as a note by {key.key_id}", file=sys.stderr)
    return EXIT_OK


def render_proof_text(report: TlogProofReport) -> str:
    lines = [f"tlog-proof of index {report.index} in {report.origin or 'an unread checkpoint'} ({report.tree_size or '?'} events)"]
    for c in report.checks:
        lines.extend(_row_lines(c, "  "))
    lines.append(f"verdict: {report.verdict.upper()} ({len(report.failed)} failed, {len(report.not_verifiable)} not verifiable here)")
    return "\n".join(lines)


def cmd_verify_proof(args: argparse.Namespace) -> int:
    """Check a tlog-proof with the event's ledger line as evidence, under the given verifier keys."""
    path, raw = _read_small(args.proof, what="tlog-proof", expected="expected a .tlog-proof file (`receipts tlog-proof` prints one)")
    epath, event_raw = _read_small(args.event, what="event line", expected="expected a file holding the event's ledger line (JSON)")
    try:
        trusted = [parse_vkey(line) for line in args.vkey]
    except MalformedNote as exc:
        return fail(f"--vkey: {exc}")
    try:
        proof = parse_tlog_proof(raw)
    except MalformedTlogProof as exc:
        return fail(f"{path}: {exc}")
    try:
        event = parse_event_line(event_raw)
    except MalformedTlogProof as exc:
        return fail(f"{epath}: {exc}")
    policy = None
    if args.policy is not None:  # §22.1: the note's witness cosignatures under a tlog-policy (its logs trusted too)
        from cli.prog_witness import _policy

        policy = _policy(args.policy)
    report = check_tlog_proof(proof, event, trusted, policy=policy)
    print(json.dumps(report.to_dict(), indent=2) if args.json else render_proof_text(report))
    return EXIT_BY_VERDICT[report.verdict]


def build_parser() -> Parser:
    """The parser of `python -m receipts` (built without running it: `mre` is checked against it)."""
    parser = Parser(prog="python -m receipts", description="Verify signed receipts; show the signing key or a session's latest signed checkpoint; tlog-proofs.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    v = sub.add_parser("verify", help="verify a receipt offline, or with its ledger", epilog=VERIFY_EPILOG)
    v.add_argument("receipt")
    v.add_argument("--data", metavar="DATA_DIR", help="also check against this data directory's ledger (its own key is never trusted)")
    v.add_argument(
        "--trust", metavar="PUBKEY", action="append", default=[], help="a trusted public key file (repeatable); needed for VERIFIED"
    )
    v.add_argument("--json", action="store_true", help="the report as JSON: verdict, groups (one sentence each) and every check row")
    v.add_argument("--rows", "--verbose", action="store_true", help="also list every raw check row (the table the groups summarise)")
    v.add_argument("--full", action="store_true", help="re-walk the ledger from genesis, ignoring the audit cache")
    v.add_argument("--policy", metavar="FILE", help="check the witness cosignatures the receipt carries under this tlog-policy (logs, witnesses, quorum)")
    v.set_defaults(func=cmd_verify)
    s = sub.add_parser("show", help="print what a receipt says: the question, the memories, the answer (verifies nothing)")
    s.add_argument("receipt")
    s.add_argument("--json", action="store_true", help="the summary as JSON (stable keys; full texts)")
    s.set_defaults(func=cmd_show)
    p = sub.add_parser("pubkey", help="print the data directory's existing public key (a --trust file); never creates one")
    p.add_argument("data_dir")
    p.add_argument("--vkey", action="store_true", help="print the C2SP note verifier key line (name+hash+base64 key) instead")
    p.set_defaults(func=cmd_pubkey)
    c = sub.add_parser("checkpoint", help="print a session's latest signed checkpoint (JSON, to publish or keep)")
    c.add_argument("data_dir")
    c.add_argument("session")
    c.add_argument("--note", action="store_true", help="print it as a C2SP signed note (c2sp.org/tlog-checkpoint) instead of JSON")
    c.set_defaults(func=cmd_checkpoint)
    t = sub.add_parser("tlog-proof", help="print a .tlog-proof (c2sp.org/tlog-proof@v1) of one event a receipt cites")
    t.add_argument("receipt")
    t.add_argument("seq")
    t.add_argument("--data", metavar="DATA_DIR", help="the data directory whose key signed the receipt's checkpoint (default: the one the receipt is kept in)")
    t.set_defaults(func=cmd_tlog_proof)
    vp = sub.add_parser("verify-proof", help="check a .tlog-proof with the event's ledger line, under a note verifier key", epilog=VERIFY_PROOF_EPILOG)
    vp.add_argument("proof")
    vp.add_argument("event")
    vp.add_argument("--vkey", metavar="KEYLINE", action="append", default=[], help="a trusted note verifier key line (`receipts pubkey DATA_DIR --vkey`; repeatable); needed for VERIFIED")
    vp.add_argument("--json", action="store_true", help="the report as JSON: verdict and every check row")
    vp.add_argument("--policy", metavar="FILE", help=POLICY_PROOF_HELP)
    vp.set_defaults(func=cmd_verify_proof)
    from cli.prog_witness import add_parsers  # cosign, verify-note (witnesses: c2sp.org/tlog-witness)

    add_parsers(sub)
    from cli.prog_replay import add_parsers as add_replay  # replay (docs/FORMAT.md §24)

    add_replay(sub)
    return parser


@entry_point
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run(args.func, args)


if __name__ == "__main__":
    raise SystemExit(main())
