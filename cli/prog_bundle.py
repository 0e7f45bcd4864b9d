"""`python -m bundle export DATA_DIR SESSION OUT`, `verify FILE [--trust PUBKEY]`, `import DATA_DIR FILE [--as SESSION]
[--trust PUBKEY] [--allow-untrusted] [--create]`, `markdown DATA_DIR SESSION OUT.md`, `list DATA_DIR` (docs/FORMAT.md §21).

Exit status, as for receipts: 0 verified / done; 1 failed (a check failed: the bundle does not prove itself);
3 unverified (nothing failed, but no --trust key was given, or some row could not be checked); 2 unusable input
(a bundle refused for its structure — a path that leaves it, a symlink, a bomb, a truncated file — a bad path or
data directory). An import changes nothing unless it prints `imported`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bundle.export import export_session
from bundle.format import BundleError
from bundle.importer import ImportRefused, import_bundle, list_imported
from bundle.markdown import write_markdown
from bundle.verify import VERDICT_EXIT, BundleReport, verify_file
from cli.stores import database_for, opened_stores
from cli.support import (
    EXIT_OK,
    CliError,
    Parser,
    count,
    entry_point,
    existing_data_dir,
    fail,
    given_path,
    make_data_dir,
    note,
    run,
    writable_data_dir,
)
from receipts.keys import KeyConfigError
from receipts.report import FAIL, MARK
from storage.offline import load_trust
from storage.stores import Stores

EPILOG = (
    "exit status: 0 VERIFIED (or done); 1 FAILED (a check failed); 3 UNVERIFIED (nothing failed, but no --trust key "
    "was given or something could not be checked); 2 unusable input (a bundle refused for its structure, a bad path)."
)


def _trust(paths: list[str] | None) -> list:  # type: ignore[type-arg]
    try:
        return load_trust(paths or [])
    except KeyConfigError as exc:
        raise CliError(f"--trust: {exc}") from None


def render(report: BundleReport) -> str:
    lines = [f"bundle {report.path} (session {report.session}, {count(report.events, 'event')}): {report.verdict.upper()}" if report.events else f"bundle {report.path}: {report.verdict.upper()}"]
    for c in report.checks:
        lines.append(f"  {MARK.get(c.status, c.status)}  {c.name}: {c.message}")
        if c.status == FAIL and (c.expected is not None or c.found is not None):
            lines.append(f"        expected {c.expected}\n        found    {c.found}")
    return "\n".join(lines)


@contextmanager
def _stores(data: Path) -> Iterator[Stores | None]:
    """The data directory's stores: PostgreSQL when DATABASE_URL is set (cli.stores.opened_stores: one line when it cannot be used), else its files.
    On files nothing is opened beyond what the commands open themselves (None: their default)."""
    url = database_for()
    if not url:
        yield None
        return
    with opened_stores(data, url) as stores:
        yield stores


def cmd_export(args: argparse.Namespace) -> int:
    data = existing_data_dir(args.data_dir)
    out = given_path(args.out, what="OUT", expected="the bundle file to write")
    try:
        with _stores(data) as stores:
            done = export_session(data, args.session, out, stores=stores)
    except BundleError as exc:
        raise CliError(str(exc)) from None
    print(f"exported session {done.session}: {count(done.events, 'event')}, {count(done.receipts, 'receipt')}, {count(done.certificates, 'certificate')}")
    print(f"sha256 {done.sha256}  {done.bytes:,} bytes")
    print(f"bundle: {done.path}")
    return EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    path = given_path(args.file, what="FILE", expected="a bundle file")
    trusted = _trust(args.trust)
    policy = None
    if args.policy is not None:  # §21.1: the witnesses' cosignatures the bundle carries, checked under a tlog-policy
        from cli.prog_witness import _policy

        policy = _policy(args.policy)
    try:
        report = verify_file(path, trusted, policy=policy)
    except BundleError as exc:
        raise CliError(f"refused: {exc}") from None
    print(json.dumps(report.to_dict(), indent=1) if args.json else render(report))
    return VERDICT_EXIT[report.verdict]


DETECT_HELP = ("run the change detector over the imported user statements in order, recording its supersessions as chat turns do "
               "(only for a bundle this DATA_DIR's key signed, on files)")


def _detect_signer(data: Path) -> Any:
    """`--detect-changes`: DATA_DIR's own signing key, which must have signed the bundle (the records the detector
    appends to the imported ledger are signed into its checkpoints with it); refused in one line without one."""
    from storage.local import load_existing

    key = load_existing(data) if data.is_dir() else None
    if key is None:
        raise CliError(f"--detect-changes: {data} holds no signing key, so the supersession records could not be signed; nothing was imported")
    return key


def cmd_import(args: argparse.Namespace) -> int:
    data = writable_data_dir(args.data_dir, create=args.create)  # a missing one only with --create (or ./data)
    path = given_path(args.file, what="FILE", expected="a bundle file")
    trusted = _trust(args.trust)
    detect = getattr(args, "detect_changes", False)
    key = _detect_signer(data) if detect else None
    made = _first_missing(data)
    make_data_dir(data)
    try:
        with _stores(data) as stores:
            if detect and stores is not None:
                raise CliError(
                    "--detect-changes: on PostgreSQL an imported session is kept in a schema of its own that no turn or record "
                    "is appended to; nothing was imported (import it without --detect-changes)"
                )
            done = import_bundle(
                data, path, as_session=args.as_session, trusted=trusted, allow_untrusted=args.allow_untrusted, stores=stores,
                signed_by=key.key_id if key is not None else None,
            )
    except BaseException as exc:
        if made is not None:  # a refused import leaves no data directory it made: nothing changed
            shutil.rmtree(made, ignore_errors=True)
            note(f"removed {made} again: nothing was imported")
        if isinstance(exc, ImportRefused):  # refused by its checks: 1 failed, 3 unverified, as `verify` says
            raise CliError(str(exc), VERDICT_EXIT[exc.verdict]) from None
        if isinstance(exc, BundleError):
            raise CliError(str(exc)) from None
        raise
    print(render(done.report))
    if done.duplicate:
        print(f"already imported as {done.local} (same session, signer, events and chain head): nothing changed")
        if key is not None:
            print("--detect-changes: nothing was imported, so nothing was detected")
    else:
        label = "" if done.origin.verdict == "verified" else " — UNVERIFIED (no trusted key signed it)"
        print(f"imported session {done.origin.session} as {done.local}: {count(done.indexed, 'event')} indexed{label}")
        if stores is not None:  # on PostgreSQL: in a schema of its own (storage/pg/imports.py)
            print(f"kept in the database, beside its sessions (bundle_imports row {done.local})")
            return EXIT_OK
        print(f"its receipts verify with: python -m receipts verify RECEIPT --data {data}/imported/{done.local} --trust {data}/imported/{done.local}/bundle-keys/{done.origin.signer.replace(':', '-')}.pub")
        if key is not None:
            return _detect_imported(data, done.local, done.origin.session, key)
    return EXIT_OK


def _detect_imported(data: Path, local: str, session: str, key: Any) -> int:
    """`bundle import --detect-changes`, after the import is in place: the change detector over the imported user
    statements in order, as `ledger import --detect-changes` runs it (chat.engine.Engine.detect_imported), in the
    imported session's own data directory, its checkpoint signed with DATA_DIR's key (the bundle's signer)."""
    from bundle.importer import imported_dir
    from chat.engine import Engine, InputError
    from chat.llm import LLM
    from storage.stores import file_stores

    there = imported_dir(data, local)
    eng = Engine(there, llm=LLM(api_key=""), key=key, stores=file_stores(there))
    try:
        events = eng.ledger.read_events(session, range(eng.ledger.head(session)[0]))
        n = eng.detect_imported(session, events)
    except InputError as exc:
        return fail(f"--detect-changes: {exc}; the import stands, no supersession was recorded")
    except Exception as exc:  # half way: the import stands, and what was appended is signed (Engine.detect_imported)
        return fail(f"--detect-changes: the detector failed ({exc or type(exc).__name__}); the import stands as {local} "
                    f"(its ledger: python -m ledger verify {there} {session})")
    finally:
        eng.close()
    print(f"detected changes: {n} supersession record{'' if n == 1 else 's'} appended")
    return EXIT_OK


def cmd_markdown(args: argparse.Namespace) -> int:
    data = existing_data_dir(args.data_dir)
    out = given_path(args.out, what="OUT", expected="the Markdown file to write")
    try:
        with _stores(data) as stores:
            n = write_markdown(data, args.session, out, stores=stores)
    except BundleError as exc:
        raise CliError(str(exc)) from None
    print(f"wrote {count(n, 'event')} of session {args.session} to {out}")
    return EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    data = existing_data_dir(args.data_dir)
    with _stores(data) as stores:
        origins = list_imported(data, stores=stores)
    for o in origins:
        print(f"{o.local}\t{o.session}\t{count(o.events, 'event')}\t{o.verdict}\t{o.imported_at}")
    return EXIT_OK


def _first_missing(path: Path) -> Path | None:
    """The outermost folder of `path` that does not exist yet (what `make_data_dir` will create), or None."""
    missing = None
    for folder in (path, *path.parents):
        if folder.is_dir():
            break
        missing = folder
    return missing


def build_parser() -> Parser:
    """The parser of `python -m bundle` (built without running it: `mre` is checked against it)."""
    parser = Parser(prog="python -m bundle", description="Session bundles: export, verify, import; a readable Markdown export.", epilog=EPILOG)
    sub = parser.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="write one session as a signed bundle", epilog=EPILOG)
    e.add_argument("data_dir")
    e.add_argument("session")
    e.add_argument("out")
    e.set_defaults(func=cmd_export)
    v = sub.add_parser("verify", help="check a bundle: signature, members, ledger, checkpoint, every receipt and certificate", epilog=EPILOG)
    v.add_argument("file")
    v.add_argument("--trust", action="append", default=[], metavar="PUBKEY", help="a public key to trust (repeatable)")
    v.add_argument("--json", action="store_true")
    v.add_argument("--policy", metavar="FILE", help="check the witness cosignatures the bundle carries under this tlog-policy (logs, witnesses, quorum)")
    v.set_defaults(func=cmd_verify)
    i = sub.add_parser("import", help="verify a bundle, then import it under a new session id", epilog=EPILOG)
    i.add_argument("data_dir")
    i.add_argument("file")
    i.add_argument("--as", dest="as_session", metavar="SESSION")
    i.add_argument("--trust", action="append", default=[], metavar="PUBKEY")
    i.add_argument("--allow-untrusted", action="store_true", help="import a bundle no --trust key signed (recorded as unverified)")
    i.add_argument("--create", action="store_true", help="create DATA_DIR and any missing folders above it (without it only the default ./data is made)")
    i.add_argument("--detect-changes", action="store_true", help=DETECT_HELP)
    i.set_defaults(func=cmd_import)
    m = sub.add_parser("markdown", help="the conversation as one readable Markdown file")
    m.add_argument("data_dir")
    m.add_argument("session")
    m.add_argument("out")
    m.set_defaults(func=cmd_markdown)
    ls = sub.add_parser("list", help="the imported sessions of a data directory")
    ls.add_argument("data_dir")
    ls.set_defaults(func=cmd_list)
    return parser


@entry_point
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
