"""Command line: `python -m ledger import|list|verify|repair|export|migrate ...` (a thin layer over the library).

import (signing a checkpoint with DATA_DIR's key), list, verify (--since too) and repair use PostgreSQL when their
DATA argument is a postgresql:// URL or $DATABASE_URL is set (cli/prog_ledger_pg.py; what differs per backend is dispatched in storage/admin.py); export and
migrate are PostgreSQL's own.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.support import EXIT_FAILED as EXIT_BROKEN
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
    run,
    writable_data_dir,
)
from ledger import importer
from ledger.corrupted import LedgerCorrupted
from ledger.event import Event, EventError, validate_session_id
from ledger.imports import ImportRecordError, already_imported
from ledger.messages import ImportError_
from ledger.repair import CUT_PREFIX, Cut, Diagnosis, RepairRefused
from ledger.verify import SessionReport, erased_words
from storage import admin

if TYPE_CHECKING:
    from storage.admin import FileLedger, LedgerStore


def _lines(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as f:
        yield from f


def _import_signer(data_dir: Path) -> tuple[Any, str]:
    """The data directory's signing key (or None) and why not. Never creates a key."""
    from storage.local import load_existing

    key = load_existing(data_dir)
    return key, "" if key is not None else f"no checkpoint signed (no signing key for {data_dir})"


def _database_signer(raw: str) -> tuple[Any, str]:
    """The key an import into the database signs with: DATA_DIR's (or RECEIPT_SIGNING_KEY's), and why none;
    with DATA the database's URL itself there is no folder, so only the variable's."""
    if not _is_url(raw):
        return _import_signer(Path(raw))
    import os

    from cli.prog_ledger_pg import UNSIGNED
    from receipts.keys import ENV_VAR, parse_private_key

    value = os.environ.get(ENV_VAR)
    return (None, UNSIGNED) if value is None else (parse_private_key(value, source=ENV_VAR), "")


def cmd_import(args: argparse.Namespace) -> int:
    expected = "expected a JSONL file of messages"
    src = given_path(args.file, what="import file", expected=expected)
    if not src.is_file():
        return fail(f"{src}: {'a directory' if src.is_dir() else 'no such file'}; {expected}")
    args.semantic_model = _semantic_model(args)
    url = _database_for(args.data_dir)
    if url is not None:
        from cli import prog_ledger_pg as pg_cli

        try:
            key, unsigned = _database_signer(args.data_dir)
        except ValueError as exc:  # a key that exists but cannot be used: import nothing unsigned
            return fail(f"{exc}; nothing was imported")
        detect = getattr(args, "detect_changes", False)
        before = 0
        if detect:  # the records are signed into a checkpoint with the key the import signs with
            if _is_url(args.data_dir) or key is None:
                return fail(
                    "--detect-changes on PostgreSQL: give the DATA_DIR whose signing key signs the session (with "
                    "$DATABASE_URL set); nothing was imported"
                )
            try:
                validate_session_id(args.session)
            except EventError as exc:
                return fail(str(exc))
            with pg_cli.opened(url) as led:
                before = led.head(args.session)[0]
        code = pg_cli.cmd_import(url, args, src, _lines(src), _progress("importing", " lines"), key=key, unsigned=unsigned)
        if code != EXIT_OK or not detect:
            return code
        return _detect_imported_database(Path(args.data_dir), url, args.session, before, key)
    data = writable_data_dir(args.data_dir, create=args.create)
    try:
        validate_session_id(args.session)
    except EventError as exc:
        return fail(str(exc))
    try:
        key, unsigned = _import_signer(data)
    except ValueError as exc:  # a key that exists but cannot be used: import nothing unsigned
        return fail(f"{exc}; nothing was imported")
    ledger = admin.file_ledger(data)
    progress = _progress("importing", " lines")
    try:  # every line is validated (and encoded) before the data directory is created or anything is written
        with _no_gc():
            staged = admin.stage_import(ledger, args.session, _lines(src), progress, allow_system=args.allow_system, content=True)
    except ImportError_ as exc:
        return fail(f"{src}: {exc}; nothing was imported")
    except OSError as exc:
        return fail(f"{exc.filename or src}: {exc.strerror or exc}; nothing was imported")
    finally:
        if progress is not None:
            progress.close()
    digest = staged.sha256
    assert digest is not None
    lock: AbstractContextManager[admin.Signer | None] = nullcontext()
    if key is not None:
        lock = admin.signing(ledger, args.session)  # the engine's lock: no turn signs in between
    try:
        if not args.allow_duplicates and data.is_dir() and (seen := admin.previous_import(ledger, args.session, digest)):
            return fail(already_imported(src, seen, args.session))
        make_data_dir(data)
        with lock as sign:
            with _no_gc():
                events = importer.commit(ledger, staged)
            admin.record_import(ledger, args.session, digest, events, src.name)
            if sign is not None:
                try:
                    cp = sign(key)
                except (OSError, ValueError) as exc:
                    print(f"{_imported(events, args.session)}, head {events[-1].chain[:16]}")
                    return fail(f"session {args.session}: the checkpoint could not be signed ({exc})", EXIT_BROKEN)
    except (EventError, LedgerCorrupted, ImportRecordError) as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"{exc.filename or args.data_dir}: {exc.strerror or exc}")
    index_imported(ledger, args.session, events, model=args.semantic_model)
    _save_control_state(ledger, args.session)
    first, last = events[0].seq, events[-1].seq
    signed = unsigned if key is None else f"signed checkpoint of {cp['body']['tree_size']} events by {cp['key_id']}"
    print(f"{_imported(events, args.session)} (seq {first}..{last}), head {events[-1].chain[:16]}; {signed}")
    if getattr(args, "detect_changes", False):
        return _detect_imported(data, args.session, events)
    return EXIT_OK


def _save_control_state(ledger: LedgerStore, session: str) -> None:
    """An import is a writer's command: leave the session's control-state.json level with its ledger (as `rebuild`
    does), so the first search in a fresh process reads that file instead of scanning the whole log (2.2 s at 1M
    events). Derived data: a failure to write it is a warning, and the next writer writes it."""
    from control.revocation import current  # the edge only

    try:
        current(ledger, session, save=True)
    except OSError as exc:
        print(f"warning: session {session}: the control state was not saved ({exc.strerror or exc})", file=sys.stderr)


def index_imported(
    ledger: LedgerStore, session: str, events: Sequence[Event], total: int | None = None, model: Any = None
) -> None:
    """The imported (or migrated: no `events`, `total` of them) session indexed at once (a bar on a terminal), so
    that no search has to index it; with `model` (--semantic) then embedded, with a bar of its own. The import stands
    whatever happens here (the index and the vectors are derived data): a failure is a warning, and the first search
    indexes (a hybrid search, or `rebuild --semantic`, embeds)."""
    n = len(events) if total is None else total
    bar = _progress("indexing", " ev", total=n)
    try:
        with _no_gc():
            warnings = admin.index_imported(ledger, session, events, None if bar is None else bar.update)
    finally:
        if bar is not None:
            bar.close()
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    if model is not None and not warnings:
        bar = _progress("embedding", " ev", total=n)
        try:
            done = admin.embed_imported(ledger, session, model, None if bar is None else bar.update)
        except Exception as exc:  # noqa: BLE001 - derived data: the import stands; one line says why
            print(f"warning: session {session}: imported but not embedded ({type(exc).__name__}); `rebuild --semantic` embeds it", file=sys.stderr)
        else:
            print(f"embedded {done} event{'' if done == 1 else 's'} with {model.describe()['model']}", file=sys.stderr)
        finally:
            if bar is not None:
                bar.close()


def _semantic_model(args: argparse.Namespace) -> Any:
    """--semantic: the extra's model, loaded (its sha256 checked) before anything is imported; None without it."""
    if not getattr(args, "semantic", False):
        return None
    from storage.api import SemanticUnavailable, semantic_model

    try:
        return semantic_model(threads=0)
    except SemanticUnavailable as exc:
        raise CliError(f"{exc}; nothing was imported") from None


def _progress(desc: str, unit: str, total: int | None = None) -> Any:
    """A tqdm bar on stderr when it is a terminal; None (no output at all) otherwise."""
    if not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(desc=desc, unit=unit, total=total, file=sys.stderr, unit_scale=True)


@contextmanager
def _bytes_progress(desc: str, ledger: LedgerStore, sessions: list[str]) -> Iterator[Any]:
    """A bar over the bytes of the sessions' ledgers on a terminal (closed after); None when stderr is not one."""
    progress = _progress(desc, "B", admin.session_bytes(ledger, sessions))
    try:
        yield progress
    finally:
        if progress is not None:
            progress.close()


def _detect_imported(data: Path, session: str, events: Sequence[Event]) -> int:
    """--detect-changes, after the import is committed and signed: chat.engine.Engine.detect_imported."""
    from chat.engine import Engine, InputError
    from chat.llm import LLM

    eng = Engine(data, llm=LLM(api_key=""))
    try:
        n = eng.detect_imported(session, events)
    except InputError as exc:
        return fail(f"--detect-changes: {exc}; the import stands, no supersession was recorded")
    finally:
        eng.index.close()
        eng.ledger.close()
    print(f"detected changes: {n} supersession record{'' if n == 1 else 's'} appended")
    return 0


def _detect_imported_database(data: Path, url: str, session: str, before: int, key: Any) -> int:
    """--detect-changes after an import into PostgreSQL: the events from seq `before` on, through the database's stores
    (chat.engine.Engine.detect_imported, as on files), their checkpoint signed with the import's key."""
    from chat.engine import Engine, InputError
    from chat.llm import LLM
    from storage.stores import open_stores

    stores = open_stores(data, url)
    try:
        count = stores.ledger.head(session)[0]
        events = stores.ledger.read_events(session, range(before, count))
        eng = Engine(data, llm=LLM(api_key=""), key=key, stores=stores)
        try:
            n = eng.detect_imported(session, events)
        except InputError as exc:
            return fail(f"--detect-changes: {exc}; the import stands, no supersession was recorded")
    finally:
        stores.close()
    print(f"detected changes: {n} supersession record{'' if n == 1 else 's'} appended")
    return 0


def _imported(events: Sequence[Event], session: str) -> str:
    return f"imported {len(events)} event{'' if len(events) == 1 else 's'} into session {session}"


def _n_messages(n: int) -> str:
    return f"{n} message{'' if n == 1 else 's'}"


@contextmanager
def _no_gc() -> Iterator[None]:
    """Millions of small acyclic objects: the cyclic GC would only re-scan them."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


MARK = {"pass": "ok  ", "fail": "FAIL", "not_verifiable": "n/a "}


def cmd_verify_since(args: argparse.Namespace, url: str | None = None) -> int:
    """Prove the session's ledger today extends a checkpoint kept earlier (receipts.checkpoints); on PostgreSQL
    (`url`) against the database's rows and latest checkpoint, DATA_DIR (when DATA is one) giving the own key."""
    from receipts.checkpoints import MAX_CHECKPOINT_BYTES, MalformedCheckpoint, parse_checkpoint
    from receipts.keys import KeyConfigError
    from storage.offline import load_trust, prove_since

    data = Path(args.data_dir)
    if len(args.sessions) != 1:
        return fail("--since proves one session: name exactly one")
    expected = "expected a checkpoint file (the JSON `python -m receipts checkpoint DATA_DIR SESSION` prints)"
    path = given_path(args.since, what="--since", expected=expected)
    if path.is_dir():
        return fail(f"{path}: is a directory; {expected}")
    (session,) = args.sessions
    try:
        if path.stat().st_size > MAX_CHECKPOINT_BYTES:
            return fail(f"{path}: over the {MAX_CHECKPOINT_BYTES}-byte checkpoint limit")
        kept = parse_checkpoint(path.read_bytes(), source=str(path))
        trusted = load_trust(args.trust)
        if url is not None:
            report = _prove_since_database(url, args.data_dir, session, kept, trusted, args.full)
        elif not admin.file_ledger(data).exists(session):
            return fail(f"session {session}: no such session in {data}")
        else:
            report = prove_since(data, session, kept, trusted, full=args.full)
    except (MalformedCheckpoint, KeyConfigError, EventError) as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"{exc.filename or path}: {exc.strerror or exc}")
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        kb = kept["body"]
        print(f"session {session}: since the checkpoint you kept ({kb['tree_size']} events, {kb['issued_at']}, {kept['key_id']})")
        for c in report.checks:
            print(f"  {MARK[c.status]}  {c.name}: {c.message}")
            if c.status == "fail" and (c.expected is not None or c.found is not None):
                print(f"          expected {c.expected}\n          found    {c.found}")
        if not trusted and _is_url(args.data_dir):
            print("note: no --trust key given and no data directory: the signatures could not be checked")
        elif not trusted:
            print("note: no --trust key given: signatures were checked against the data directory's own key only (not independently trusted)")
        print(f"verdict: {report.verdict.upper()}: {report.message}")
    return EXIT_OK if report.ok else EXIT_BROKEN


def _is_url(raw: str) -> bool:
    from storage import is_database_url

    return is_database_url(raw)


def _prove_since_database(url: str, raw: str, session: str, kept: Any, trusted: Any, full: bool) -> Any:
    """prove_since over the database's rows (audited from a private copy) and its latest checkpoint."""
    import tempfile
    from contextlib import ExitStack

    from cli.stores import opened_stores
    from cli.support import CliError

    with ExitStack() as stack:
        # DATA a URL: no data directory, so no own key (an empty private folder stands in for one)
        home = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mre-no-data-"))) if _is_url(raw) else existing_data_dir(raw)
        stores = stack.enter_context(opened_stores(home, url))
        led = admin.ledger_of(stores)
        if not led.exists(session):
            raise CliError(f"session {session}: no such session in {stores.where}")
        return admin.prove_since(stores, session, kept, trusted, full=full)


def _database_for(raw: str) -> str | None:
    """The PostgreSQL database a DATA argument names (a postgresql:// URL, or $DATABASE_URL when set); None: files."""
    from cli.stores import database_for

    return database_for(raw, url_argument=True)


def _bar(desc: str) -> Any:
    """A function giving a bytes bar of a total on a terminal, None elsewhere (the PostgreSQL commands')."""
    return lambda total: _progress(desc, "B", total)


def cmd_verify(args: argparse.Namespace) -> int:
    url = _database_for(args.data_dir)
    if url is None:
        data = existing_data_dir(args.data_dir)
    if args.since is not None:
        return cmd_verify_since(args, url)
    if args.trust:
        return fail("--trust applies to --since CHECKPOINT_FILE")
    try:
        if url is not None:
            from cli import prog_ledger_pg as pg_cli

            reports = pg_cli.verify_reports(url, args.sessions, _bar("verifying"))
        else:
            ledger = admin.file_ledger(data)
            names = args.sessions or ledger.sessions()
            if not names:  # "0 of 0 sessions verified", exit 0, would pass a temp folder or a keys folder
                return fail(f"{args.data_dir}: no sessions here: is this a data directory?")
            for name in names:
                if not ledger.exists(name):
                    return fail(f"session {name}: no such session in {data}")
            with _bytes_progress("verifying", ledger, names) as progress:
                reports = [ledger.verify(name, progress=progress) for name in names]
    except EventError as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"{exc.filename or args.data_dir}: {exc.strerror or exc}")
    broken = [r for r in reports if not r.ok]
    if args.json:
        print(json.dumps({"ok": not broken, "sessions": [r.to_dict() for r in reports]}, indent=2))
    else:
        for r in reports:
            if r.ok:
                note = f" ({len(r.quarantined)} quarantined torn tail file(s))" if r.quarantined else ""
                erased = f"; {erased_words(r.erased)}" if r.erased else ""
                print(f"ok      {r.session}: {count(r.events, 'event')}, head {r.head[:16]}{erased}{note}")
            else:
                b = r.brk
                assert b is not None
                print(f"BROKEN  {r.session}: line {b.line}, seq {b.seq}, {b.kind}: {b.message}")
                if b.expected is not None or b.found is not None:
                    print(f"        expected {b.expected}\n        found    {b.found}")
        print(f"{len(reports) - len(broken)} of {count(len(reports), 'session')} verified")
    return EXIT_BROKEN if broken else EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    """One row per session: id, events, last activity, verified or the first break (reads only)."""
    url = _database_for(args.data_dir)
    if url is not None:
        from cli import prog_ledger_pg as pg_cli
        from storage import redact

        data: Path | str = redact(url)
        rows = pg_cli.list_rows(url, _bar("verifying"))
    else:
        data = existing_data_dir(args.data_dir)
        ledger = admin.file_ledger(data)
        with _bytes_progress("verifying", ledger, ledger.sessions()) as progress:
            rows = admin.list_sessions(ledger, progress)
    broken = [r for r in rows if not r.ok]
    if args.json:
        print(json.dumps({"ok": not broken, "sessions": [r.to_dict() for r in rows]}, indent=2))
        return EXIT_BROKEN if broken else EXIT_OK
    if not rows:
        print(f"no sessions in {data}")
        return EXIT_OK
    width = max(len("session"), *(len(r.session) for r in rows))
    print(f"{'session'.ljust(width)}  {'events':>8}  {'last activity':<20}  status")
    for r in rows:
        when = f"{r.last_ts[:19]}Z" if r.last_ts else "-"
        b = r.report.brk
        status = "verified" if b is None else f"BROKEN at line {b.line}, seq {b.seq}, {b.kind}: {b.message}"
        print(f"{r.session.ljust(width)}  {r.lines:>8}  {when:<20}  {status}")
    tail = f", {len(broken)} broken (`python -m ledger repair {data} SESSION` shows what to do)" if broken else ", all verified"
    print(f"{len(rows)} session{'' if len(rows) == 1 else 's'}{tail}")
    return EXIT_BROKEN if broken else EXIT_OK


def cmd_repair(args: argparse.Namespace) -> int:
    """Show a broken session's first break and what --truncate-at would do; with it, do it."""
    url = _database_for(args.data_dir)
    if url is not None:
        return _repair_database(url, args)
    data = existing_data_dir(args.data_dir)
    try:
        validate_session_id(args.session)
    except EventError as exc:
        return fail(str(exc))
    ledger = admin.file_ledger(data)
    if not ledger.exists(args.session):
        return fail(f"session {args.session}: no such session in {data}")
    if args.truncate_at is None:
        with _bytes_progress("verifying", ledger, [args.session]) as progress:
            d = admin.diagnose(ledger, args.session, progress)
        return _show_repair(d, str(data), args, "beside the ledger")
    try:
        cut, refreshed = _repair(data, ledger, args.session, args.truncate_at)
    except RepairRefused as exc:
        return fail(f"{exc}; nothing was changed")
    with _bytes_progress("verifying", ledger, [args.session]) as progress:
        after = ledger.verify(args.session, progress=progress)
    return _show_cut(cut, after, refreshed, args, "")


def _repair_database(url: str, args: argparse.Namespace) -> int:
    """cmd_repair on PostgreSQL (storage/pg/repair.py): the cut rows are kept in `ledger_cuts`, with a copy in
    DATA_DIR/sessions/SESSION/ when DATA is a folder (none when it is the database's URL)."""
    import tempfile
    from contextlib import ExitStack

    from cli.stores import opened_stores
    from storage import redact

    try:
        validate_session_id(args.session)
    except EventError as exc:
        return fail(str(exc))
    with ExitStack() as stack:
        given = not _is_url(args.data_dir)
        # DATA a URL: no data directory (no copy of the cut, the key only from RECEIPT_SIGNING_KEY)
        home = existing_data_dir(args.data_dir) if given else Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mre-no-data-")))
        shown = str(home) if given else redact(url)
        stores = stack.enter_context(opened_stores(home, url))
        led = admin.ledger_of(stores)
        if not led.exists(args.session):
            return fail(f"session {args.session}: no such session in {stores.where}")
        if args.truncate_at is None:
            bar = _bar("verifying")(admin.session_bytes(led, [args.session]))
            try:
                d = admin.diagnose(led, args.session, bar)
            finally:
                if bar is not None:
                    bar.close()
            where = "in the database's ledger_cuts" + (f" (a copy in {home / 'sessions' / args.session})" if given else "")
            return _show_repair(d, shown, args, where)
        try:
            key, unsigned = _database_signer(args.data_dir)
        except ValueError as exc:  # a key that cannot be used: the repair still happens, unsigned, and says so
            key, unsigned = None, f"no checkpoint signed ({exc})"
        copy_dir = home / "sessions" / args.session if given else None
        try:
            cut, refreshed = admin.repair(stores, args.session, args.truncate_at, key, unsigned, copy_dir=copy_dir)
        except RepairRefused as exc:
            return fail(f"{exc}; nothing was changed")
        bar = _bar("verifying")(admin.session_bytes(led, [args.session]))
        try:
            after = led.verify(args.session, progress=bar)
        finally:
            if bar is not None:
                bar.close()
    kept = f"the database's ledger_cuts row {cut.path.name}" + (f" and a copy in {cut.path}" if given else "")
    return _show_cut(cut, after, refreshed, args, kept)


def _show_cut(cut: Cut, after: SessionReport, refreshed: list[str], args: argparse.Namespace, kept: str) -> int:
    """What a repair did (`kept`: where the cut went when it is not the file Cut.path names), and the verdict after."""
    if args.json:
        print(json.dumps({**cut.to_dict(), "verified": after.ok, "refreshed": refreshed}, indent=2))
    else:
        print(
            f"session {args.session}: moved {cut.lines} line{'' if cut.lines == 1 else 's'} from line {cut.cut_from_seq + 1} "
            f"(seq {cut.cut_from_seq}) on, {cut.nbytes} bytes, sha256 {cut.sha256[:16]}…, to {kept or cut.path} (kept; never deleted)"
        )
        print(f"appended system event seq {cut.note_seq} recording the cut; " + ("; ".join(refreshed) or "nothing derived to refresh"))
        print(f"{'ok' if after.ok else 'BROKEN'}  {args.session}: {count(after.events, 'event')}, head {after.head[:16]}")
    return EXIT_OK if after.ok else EXIT_BROKEN


def _show_repair(d: Diagnosis, data: str, args: argparse.Namespace, where: str) -> int:
    """The first break and what --truncate-at would do (`where`: where the cut would go, after its name)."""
    if args.json:
        print(json.dumps(d.to_dict(), indent=2))
        return EXIT_OK if d.report.ok else EXIT_BROKEN
    b = d.report.brk
    if b is None or d.suggest_seq is None:
        print(f"session {args.session} verifies ({count(d.report.events, 'event')}): nothing to repair")
        return EXIT_OK
    seq = d.suggest_seq
    print(f"session {args.session}: BROKEN at line {b.line}, seq {b.seq}, {b.kind}: {b.message}")
    if b.expected is not None or b.found is not None:
        print(f"  expected {b.expected}\n  found    {b.found}")
    kept = f"lines 1–{seq} (seq 0–{seq - 1}) verify" if seq else "no line before it verifies"
    print(f"  the ledger has {d.lines} line{'' if d.lines == 1 else 's'}; {kept}")
    print(
        f"  `python -m ledger repair {data} {args.session} --truncate-at {seq}` would move lines {seq + 1}–{d.lines} "
        f"({d.cut_lines} line{'' if d.cut_lines == 1 else 's'}, {d.cut_bytes} bytes) to {CUT_PREFIX}{seq}-<utc time> {where} "
        f"(kept, never deleted) and append a system event at seq {seq} saying what was cut, so the chain verifies again "
        f"with {seq + 1} events (a smaller SEQ cuts more); receipts citing seq {seq} or later will then fail their ledger checks"
    )
    return EXIT_BROKEN


def _repair(data: Path, ledger: FileLedger, session: str, seq: int) -> tuple[Cut, list[str]]:
    """Cut under the engine's turn lock (no turn or import signs in between), then refresh what derives from the
    ledger (storage.admin.repair), signing with DATA_DIR's key when it has one."""
    try:
        key, unsigned = _import_signer(data)
    except ValueError as exc:  # a key that cannot be used: the repair still happens, unsigned, and says so
        key, unsigned = None, f"no checkpoint signed ({exc})"
    return admin.repair(ledger, session, seq, key, unsigned)


def cmd_export(args: argparse.Namespace) -> int:
    from cli import prog_ledger_pg as pg_cli

    args.database_url = _export_database(args.database_url)
    return pg_cli.cmd_export(args)


def _export_database(raw: str | None) -> str:
    """The database of `export [DATABASE_URL] SESSION`: $DATABASE_URL when the argument is omitted. A URL argument is
    still taken when it holds no password; one that does is refused before any connection, as anything on a command
    line is visible to every user of the machine (`ps`)."""
    from cli.stores import database_for
    from storage import redact

    if raw is not None:
        if redact(raw) != raw:
            raise CliError(
                "export: the database URL on the command line holds a password, which every user of this machine can "
                "read (ps); set it in the environment instead: DATABASE_URL='postgresql://…' python -m ledger export SESSION"
            )
        return raw
    url = database_for()
    if url is None:
        raise CliError("export: no database: set DATABASE_URL='postgresql://…' in the environment (python -m ledger export SESSION)")
    return url


def cmd_migrate(args: argparse.Namespace) -> int:
    from cli import prog_ledger_pg as pg_cli

    args.database_url, args.sessions = _migrate_database(args.sessions)
    return pg_cli.cmd_migrate(args, _bar("migrating"))


def _migrate_database(rest: list[str]) -> tuple[str, list[str]]:
    """(the database, the sessions) of `migrate DATA_DIR [SESSION ...]`: the database is $DATABASE_URL. A postgresql://
    URL as the first argument after DATA_DIR (the old form) is still taken when it holds no password; one that does
    is refused, as anything on a command line is visible to every user of the machine (`ps`)."""
    from cli.stores import database_for
    from storage import redact

    if rest and _is_url(rest[0]):
        if redact(rest[0]) != rest[0]:
            raise CliError(
                "migrate: the database URL on the command line holds a password, which every user of this machine can "
                "read (ps); set it in the environment instead: DATABASE_URL='postgresql://…' python -m ledger migrate DATA_DIR"
            )
        return rest[0], rest[1:]
    url = database_for()
    if url is None:
        raise CliError("migrate: no database: set DATABASE_URL='postgresql://…' in the environment (python -m ledger migrate DATA_DIR [SESSION ...])")
    return url, rest


def build_parser() -> Parser:
    """The parser of `python -m ledger` (built without running it: `mre` is checked against it)."""
    parser = Parser(prog="python -m ledger", description="The hash-chained session ledger.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    p = sub.add_parser("import", help="import a JSONL file of messages into a session")
    p.add_argument("data_dir")
    p.add_argument("session")
    p.add_argument("file", help='JSONL: {"role": ..., "text": ..., "meta": {...}?, "ts": "..."?} per line')
    p.add_argument(
        "--allow-system", action="store_true", help='import lines with role "system" (refused by default: the model reads them as instructions)'
    )
    p.add_argument(
        "--allow-duplicates", action="store_true", help="import a file whose messages this session already holds from an earlier import"
    )
    p.add_argument("--create", action="store_true", help="create DATA_DIR and any missing folders above it (without it only the default ./data is made)")
    p.add_argument(
        "--detect-changes", action="store_true",
        help="run the change detector over the imported user statements in order, recording its supersessions as chat turns do",
    )
    p.add_argument(
        "--semantic", action="store_true",
        help="then embed the imported events with the optional semantic extra (requirements-semantic.txt), with a progress bar",
    )
    p.set_defaults(func=cmd_import)
    ls = sub.add_parser("list", help="one row per session: events, last activity, verified or its first break")
    ls.add_argument("data_dir")
    ls.add_argument("--json", action="store_true", help="print a JSON report")
    ls.set_defaults(func=cmd_list)
    v = sub.add_parser("verify", help="verify sessions (all when none is named)")
    v.add_argument("data_dir")
    v.add_argument("sessions", nargs="*")
    v.add_argument("--json", action="store_true", help="print a JSON report")
    v.add_argument("--since", metavar="CHECKPOINT_FILE", help="prove the session extends a checkpoint kept earlier (`python -m receipts checkpoint`)")
    v.add_argument("--trust", metavar="PUBKEY", action="append", default=[], help="with --since: a trusted public key file (repeatable)")
    v.add_argument("--full", action="store_true", help="with --since: re-walk from genesis, ignoring the verifier's cache")
    v.set_defaults(func=cmd_verify)
    r = sub.add_parser("repair", help="show a broken session's first break; --truncate-at SEQ moves the tail from there aside")
    r.add_argument("data_dir")
    r.add_argument("session")
    r.add_argument("--truncate-at", type=int, metavar="SEQ", help="move lines from seq SEQ on to events.jsonl.cut-SEQ-<utc> and record the cut")
    r.add_argument("--json", action="store_true", help="print a JSON report")
    r.set_defaults(func=cmd_repair)
    e = sub.add_parser("export", help="write a session's JSONL from PostgreSQL (the bytes the file backend holds)")
    e.add_argument(
        "database_url", nargs="?", metavar="DATABASE_URL", help="default: $DATABASE_URL; a URL holding a password is refused here (ps shows it): set DATABASE_URL"
    )
    e.add_argument("session")
    e.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default: standard output)")
    e.set_defaults(func=cmd_export)
    m = sub.add_parser("migrate", help="move a data directory's ledgers into PostgreSQL (every chain verified; resumable)")
    m.add_argument("data_dir")
    m.add_argument("sessions", nargs="*", metavar="SESSION", help="only these sessions (default: all); the database is $DATABASE_URL")
    m.set_defaults(func=cmd_migrate)
    return parser


@entry_point
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run(args.func, args)


if __name__ == "__main__":
    raise SystemExit(main())
