"""Import a verified bundle (docs/FORMAT.md §21): `import_bundle(data_dir, path)`.

Nothing is imported unless every check passes (`bundle.verify`); a bundle whose manifest is signed by no
--trust key is refused unless `allow_untrusted`, and then recorded as unverified. The session's events are
hashed with its id, so an imported session keeps its ledger byte for byte under a new local id on this server;
its origin (the bundle's session id, signer, event count, chain head, the bundle file's sha256 and the verdict)
is kept with it, and its receipts verify afterwards under the signing key the bundle carried (the key trusted
for that session). Importing the same ledger again (same session id, signer, event count and chain head) is
reported as a duplicate and changes nothing.

Where an import is kept is the stores' business (`stores=`, storage.stores; by default the files in `data_dir`),
through their imports (storage/api_faces.py, BundleImports): on files a data directory of its own,
`DATA_DIR/imported/<LOCAL>/`, renamed into place in one step from the staging folder, so a crash leaves either
nothing or the whole import (a leftover `.staging-*` is removed by the next import: its owner lock is free,
bundle.verify.staged); on PostgreSQL a schema of its own (storage.pg.imports). Either way the bundle is extracted
and checked in a staging folder under `DATA_DIR/imported/` first.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bundle.format import BundleError
from bundle.verify import BundleReport, staged, verify_opened
from ledger.event import EventError, now_ts, validate_session_id
from receipts.keys import PublicKey
from receipts.stores import IMPORTED, ImportFailed
from receipts.stores import Origin as Origin  # where both backends reach it; bundle's name for it still
from storage.api_faces import imports_at, reader_ledger
from storage.local import private_dir
from storage.offline import verify_imported_receipt as _verify_against_import

if TYPE_CHECKING:
    from receipts.verify import Report
    from storage.api_faces import BundleImportsFaces
    from storage.stores import Stores

STAGING_PREFIX = ".staging-"


class ImportRefused(BundleError):
    """An import refused by the bundle's checks, not its structure: `verdict` is "failed" (a check failed) or
    "unverified" (no --trust key signed it), so the CLI exits 1 or 3 as `verify` does for the same bundle."""

    def __init__(self, message: str, *, verdict: str, report: BundleReport | None = None) -> None:
        super().__init__(message)
        self.verdict = verdict
        self.report = report  # every row, to show why


@dataclass(frozen=True)
class Imported:
    local: str
    origin: Origin
    report: BundleReport
    duplicate: bool  # the same ledger was imported before: nothing changed
    indexed: int  # events indexed


def imported_root(data_dir: str | os.PathLike[str]) -> Path:
    return Path(data_dir) / IMPORTED


def imported_dir(data_dir: str | os.PathLike[str], local: str) -> Path:
    return imported_root(data_dir) / validate_session_id(local)


def _imports(data_dir: str | os.PathLike[str], stores: Stores | None) -> BundleImportsFaces:
    """The imports of `stores`, or by default of the files in `data_dir` (nothing else opened)."""
    return stores.ledger.imports() if stores is not None else imports_at(data_dir)


@contextmanager
def _said() -> Iterator[None]:
    """A store's refusal (receipts.stores.ImportFailed) said as the BundleError it is here."""
    try:
        yield
    except ImportFailed as exc:
        raise BundleError(str(exc)) from None


def list_imported(data_dir: str | os.PathLike[str], *, stores: Stores | None = None) -> list[Origin]:
    """Every imported session of `data_dir` (or of the database `stores` names), by local id."""
    with _said():
        return _imports(data_dir, stores).origins()


def trusted_keys(data_dir: str | os.PathLike[str], local: str, *, stores: Stores | None = None) -> list[PublicKey]:
    """The keys trusted for an imported session: those its bundle carried (checked at import)."""
    with _said():
        return _imports(data_dir, stores).keys(validate_session_id(local))


def find_receipt_home(data_dir: str | os.PathLike[str], session: str, *, stores: Stores | None = None) -> list[Origin]:
    """The imported sessions whose events carry session id `session` (a receipt names it), newest import first."""
    found = (o for o in list_imported(data_dir, stores=stores) if o.session == session)
    return sorted(found, key=lambda o: o.imported_at, reverse=True)


def verify_imported_receipt(
    raw: bytes, data_dir: str | os.PathLike[str], local: str, *, stores: Stores | None = None
) -> Report:
    """Verify receipt bytes against the imported session `local` under the keys its bundle carried (trusted_keys).

    On files against its folder, as `python -m receipts verify R --data DATA_DIR/imported/<LOCAL>` does. On
    PostgreSQL from the import schema's stored lines, as any check against the database's rows is
    (storage.files.receipts.ledger_copy: a copy with no name on disk, its audit cache in a private folder removed after): the
    same checks over the same bytes, at the cost of one copy of the ledger per call."""
    keys = trusted_keys(data_dir, local, stores=stores)
    with _said():
        return _verify_against_import(_imports(data_dir, stores), raw, validate_session_id(local), keys)


def open_imported(data_dir: str | os.PathLike[str], local: str, *, stores: Stores | None = None) -> AbstractContextManager[Stores]:
    """The stores of the imported session `local` (its ledger, index, receipts and checkpoint), to search or verify
    against, closed after; BundleError when there is no such import (PostgreSQL)."""
    with _said():
        return _opened(_imports(data_dir, stores), validate_session_id(local))


@contextmanager
def _opened(imports: BundleImportsFaces, local: str) -> Iterator[Stores]:
    with _said(), imports.open(local) as opened:
        yield opened


DATA_DIR_MARKS = ("sessions", "keys", "index.sqlite", IMPORTED, "erasures", "receipts")


def _data_dir(data: Path) -> Path:
    """`data` as a data directory to import into: one the app or `python -m chat` wrote (it holds one of
    DATA_DIR_MARKS), an empty folder, or none yet (created). Any other folder is refused, so a mistyped path to,
    say, a home directory is not filled with sessions."""
    if data.exists() and not data.is_dir():
        raise BundleError(f"{data.name}: not a folder; give the data directory to import into")
    if data.is_dir() and not any((data / mark).exists() for mark in DATA_DIR_MARKS) and any(data.iterdir()):
        raise BundleError(
            f"{data.name}: a folder with other files and no sessions, keys or index: not a data directory "
            "(give the DATA_DIR the app or `python -m chat` writes, or an empty or new folder)"
        )
    return data


def _free_local(origin: str, chain_head: str, taken: Callable[[str], bool]) -> str:
    """`<origin>-imported-<8 hex of the chain head>`, then `-2`, `-3`, … until one is not `taken`."""
    base = f"{origin[:40]}-imported-{chain_head[:8]}"
    for n in range(1, 10_000):
        local = base if n == 1 else f"{base}-{n}"
        if not taken(local):
            return local
    raise BundleError(f"no free local session id for {origin}")


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def import_bundle(
    data_dir: str | os.PathLike[str],
    path: str | os.PathLike[str],
    *,
    as_session: str | None = None,
    trusted: Sequence[PublicKey] = (),
    allow_untrusted: bool = False,
    stores: Stores | None = None,
    signed_by: str | None = None,
) -> Imported:
    """Verify the bundle at `path` and import it into `data_dir` (BundleError, nothing changed, when refused).
    `stores`: on PostgreSQL the import is written into that database (`data_dir` holds only the staging folder).
    `signed_by`: a key id the bundle's manifest must be signed by, else nothing is imported (`bundle import
    --detect-changes`: the records it appends are signed with that key, which the session's receipts verify with)."""
    data = _data_dir(Path(data_dir))
    if as_session is not None:
        try:
            validate_session_id(as_session)
        except EventError as exc:
            raise BundleError(f"--as: {exc}") from None
    root = imported_root(data)
    private_dir(root)  # 0700 whatever the umask; staged() removes the staging folders of dead imports there
    imports = _imports(data, stores)
    with _said():
        imports.sweep()  # PostgreSQL: the schemas of crashed imports
        with staged(path, under=root, prefix=STAGING_PREFIX) as opened:
            report = verify_opened(opened, trusted)
            m = opened.manifest
            _refuse(report, allow_untrusted)
            if signed_by is not None and m.signer != signed_by:
                raise BundleError(
                    f"--detect-changes: the bundle is signed by {m.signer}, not by this data directory's key {signed_by}: the supersession "
                    "records it would append could not be signed by the key its receipts verify with; nothing was imported "
                    "(import it without --detect-changes)"
                )
            earlier = imports.same_ledger(m.session, m.signer, m.events, m.chain_head)
            if earlier is not None:
                return Imported(earlier.local, earlier, report, True, 0)
            if as_session is not None:
                if imports.taken(as_session):
                    raise BundleError(f"--as {as_session}: a session of that id already exists here; nothing was imported")
                local = as_session
            else:
                local = _free_local(m.session, m.chain_head, imports.taken)
            origin = Origin(local, m.session, m.signer, m.events, m.chain_head, _sha256_file(Path(path)), report.verdict, now_ts())
            staged_ledger = reader_ledger(opened.data)
            try:
                done, duplicate, count = imports.add(opened.data, origin, opened.keys, staged_ledger)
            finally:
                staged_ledger.close()
    return Imported(done.local, done, report, duplicate, count)


def _refuse(report: BundleReport, allow_untrusted: bool) -> None:
    """ImportRefused unless the report lets the bundle in (nothing failed; verified, or unverified when allowed)."""
    if report.verdict == "failed":
        first = report.failed[0]
        raise ImportRefused(f"refused: {first.name} failed — {first.message}; nothing was imported", verdict="failed", report=report)
    if report.verdict == "unverified" and not allow_untrusted:
        why = report.not_verifiable[0]
        raise ImportRefused(
            f"refused: not verified ({why.name}: {why.message}); give --trust PUBKEY, or --allow-untrusted to import it as unverified",
            verdict="unverified",
            report=report,
        )
