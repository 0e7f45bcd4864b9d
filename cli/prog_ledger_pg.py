"""`python -m ledger` against PostgreSQL: export, migrate, and the database side of verify, list and import.

cli/prog_ledger.py decides which backend a command uses (cli.stores.database_for): a DATA argument that is a
postgresql:// URL, or $DATABASE_URL when set. These functions print what the file commands print;
a server that cannot be reached is one `error:` line naming it (never the password), exit 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.stores import quiet_pool
from cli.support import EXIT_FAILED, EXIT_OK, CliError, existing_data_dir, fail, given_path
from ledger import importer
from ledger.event import EventError, validate_session_id
from ledger.imports import already_imported
from ledger.listing import SessionSummary
from ledger.messages import ImportError_
from ledger.verify import SessionReport
from storage import BackendError, admin, is_database_url, redact
from storage.local import fsync_dir, open_private

if TYPE_CHECKING:
    from storage.admin import DatabaseLedger

CONNECT_TIMEOUT_S = 5  # a command line waits this long for an unreachable server


@contextmanager
def opened(url: str) -> Iterator[DatabaseLedger]:
    """The database's ledger over its own pool, closed after (storage.admin.database_ledger); CliError (one line)
    when the server cannot be used.

    The pool's own log of each failed attempt is silenced: the one error line says what failed.
    """
    quiet_pool()
    try:
        with admin.database_ledger(url, timeout=CONNECT_TIMEOUT_S) as led:
            yield led
    except BackendError as exc:
        raise CliError(str(exc)) from None


def verify_reports(url: str, sessions: list[str], progress: Callable[[int], Any]) -> list[SessionReport]:
    """Verify the named sessions (all when none) in the database; CliError for an unknown one."""
    with opened(url) as led:
        names = sessions or led.sessions()
        for name in names:
            if not led.exists(name):
                raise CliError(f"session {name}: no such session in {redact(url)}")
        bar = progress(admin.session_bytes(led, names))
        try:
            return [led.verify(name, progress=bar) for name in names]
        finally:
            if bar is not None:
                bar.close()


def list_rows(url: str, progress: Callable[[int], Any]) -> list[SessionSummary]:
    """`python -m ledger list` rows for every session of the database (verified from genesis)."""
    with opened(url) as led:
        bar = progress(admin.session_bytes(led, led.sessions()))
        try:
            return admin.list_sessions(led, bar)
        finally:
            if bar is not None:
                bar.close()


UNSIGNED = "no checkpoint signed (no signing key: DATA is the database's URL and RECEIPT_SIGNING_KEY is not set)"


def cmd_import(
    url: str, args: argparse.Namespace, src: Path, lines: Iterator[bytes], progress: Any, *, key: Any = None, unsigned: str = UNSIGNED
) -> int:
    """Import into the database: every line validated first, then one transaction (COPY). With a signing `key`,
    the duplicate check, the append and a checkpoint over the session run under the session's turn lock (as a
    turn's do), and the checkpoint is kept as the latest; without one, `unsigned` says why none was signed."""
    try:
        validate_session_id(args.session)
    except EventError as exc:
        return fail(str(exc))
    with opened(url) as led:
        try:
            staged = admin.stage_import(led, args.session, lines, progress, allow_system=args.allow_system, content=True)
        except ImportError_ as exc:
            return fail(f"{src}: {exc}; nothing was imported")
        except OSError as exc:
            return fail(f"{exc.filename or src}: {exc.strerror or exc}; nothing was imported")
        finally:
            if progress is not None:
                progress.close()
        digest = staged.sha256
        assert digest is not None
        with ExitStack() as stack:
            sign = None
            if key is not None:
                sign = stack.enter_context(admin.signing(led, args.session))  # no turn signs in between
            if not args.allow_duplicates and (seen := admin.previous_import(led, args.session, digest)):
                return fail(already_imported(src, seen, args.session))
            events = importer.commit(led, staged)
            admin.record_import(led, args.session, digest, events, src.name)
            if sign is not None:
                try:
                    cp = sign(key)
                except (OSError, ValueError) as exc:
                    print(f"{_imported(events, args.session)}, head {events[-1].chain[:16]}")
                    return fail(f"session {args.session}: the checkpoint could not be signed ({exc})", EXIT_FAILED)
                unsigned = f"signed checkpoint of {cp['body']['tree_size']} events by {cp['key_id']}"
        from cli.prog_ledger import index_imported  # the same bar and warnings as on files

        index_imported(led, args.session, events, model=getattr(args, "semantic_model", None))
    print(f"{_imported(events, args.session)} (seq {events[0].seq}..{events[-1].seq}), head {events[-1].chain[:16]}; {unsigned}")
    return EXIT_OK


def _imported(events: Sequence[Any], session: str) -> str:
    n = len(events)
    return f"imported {n} event{'' if n == 1 else 's'} into session {session}"


def cmd_export(args: argparse.Namespace) -> int:
    """Write a session's JSONL from the database: the bytes the file backend would hold."""
    if not is_database_url(args.database_url):
        return fail(f"{redact(args.database_url)!r}: expected a postgresql:// URL (DATABASE_URL)")
    try:
        validate_session_id(args.session)
    except EventError as exc:
        return fail(str(exc))
    with opened(args.database_url) as led:
        if not led.exists(args.session):
            return fail(f"session {args.session}: no such session in {redact(args.database_url)}")
        if args.output is None:
            led.export(args.session, sys.stdout.buffer)
            return EXIT_OK
        out = given_path(args.output, what="-o", expected="expected a file to write the JSONL to")
        if out.is_dir():
            return fail(f"{out}: is a directory; expected a file to write the JSONL to")
        tmp = out.with_name(out.name + ".exporting")
        tmp.unlink(missing_ok=True)
        fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            with os.fdopen(fd, "wb") as f:
                n = led.export(args.session, f)
                f.flush()
                os.fsync(f.fileno())
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, out)
        fsync_dir(out.parent if str(out.parent) else Path("."))
        size, head = led.head(args.session)
    print(f"exported session {args.session}: {size} events, {n} bytes, head {head[:16]}, to {out}", file=sys.stderr)
    return EXIT_OK


def cmd_migrate(args: argparse.Namespace, progress: Callable[[int], Any]) -> int:
    """Move a file-backed data directory's ledgers into the database (verified, resumable)."""
    from storage.migrate import migrate

    try:  # the receipts' step (another package above the ledger): registered when it is there
        from storage.migrate_receipts import register
    except ImportError:  # pragma: no cover - the ledger used on its own
        pass
    else:
        register()

    data = existing_data_dir(args.data_dir)
    if not is_database_url(args.database_url):
        return fail(f"{redact(args.database_url)!r}: expected a postgresql:// URL (DATABASE_URL)")
    files = admin.file_ledger(data, record_tails=False)
    names = args.sessions or files.sessions()
    for name in names:
        try:
            if not files.exists(name):
                return fail(f"session {name}: no such session in {data}")
        except EventError as exc:
            return fail(str(exc))
    total = admin.session_bytes(files, names)
    with opened(args.database_url) as led:
        bar = progress(2 * total)  # each byte read twice: verified, then compared or copied
        try:
            done = migrate(data, led, bar, names)
        finally:
            if bar is not None:
                bar.close()
        refused = [m for m in done if m.status == "refused"]
        from cli.prog_ledger import index_imported  # the migrated sessions searchable at once, as after an import

        for m in done:
            if m.status in ("copied", "resumed", "already"):
                index_imported(led, m.session, (), total=m.events)
        _print_migrated(done)
        extra = admin.migrate_extras(data, led)
    failed = [line for ok, line in extra if not ok]
    for ok, line in extra:
        print(line if ok else f"FAILED  {line}")
    if not extra:
        print("receipts, checkpoints and Merkle trees: not migrated by this version (storage/migrate.py EXTRA_STEPS)")
    print(f"{len(done) - len(refused)} of {len(done)} sessions in {redact(args.database_url)}" + (", run again after repairing the refused ones" if refused else ""))
    return EXIT_FAILED if refused or failed else EXIT_OK


def _print_migrated(done: list[Any]) -> None:
    """One line per session, as soon as the ledgers are done (before the other stores' steps)."""
    for m in done:
        if m.status == "refused":
            print(f"REFUSED {m.session}: {m.message}")
        else:
            what = {"copied": f"copied {m.copied} events", "resumed": f"resumed: copied {m.copied} more events",
                    "already": "already migrated (checked equal)", "empty": "no events"}[m.status]
            print(f"ok      {m.session}: {what}; the database holds {m.events}")
    sys.stdout.flush()


__all__ = ["cmd_export", "cmd_import", "cmd_migrate", "list_rows", "opened", "verify_reports"]
