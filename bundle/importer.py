"""Import a verified bundle (docs/FORMAT.md §21): `import_bundle(data_dir, path)`.

Nothing is imported unless every check passes (`bundle.verify`); a bundle whose manifest is signed by no
--trust key is refused unless `allow_untrusted`, and then recorded as unverified. The session's events are
hashed with its id, so an imported session keeps its ledger byte for byte in a data directory of its own,
`DATA_DIR/imported/<LOCAL>/` (`sessions/<ORIGIN>/…`, `erasures/`, `bundle-keys/`, `index.sqlite`), under a new
local id on this server; `origin.json` there keeps the bundle's session id, signer, event count, chain head, the
bundle file's sha256 and the verdict. Its receipts verify afterwards against that folder, under the signing key
the bundle carried (kept in `bundle-keys/` as the key trusted for that session). The staging folder is renamed
into place in one step, so a crash leaves either nothing or the whole import (a leftover `.staging-*` is removed
by the next import: its owner lock is free, bundle.verify.staged). Importing the same ledger again (same session id, signer, event count and chain head) is
reported as a duplicate and changes nothing.

On PostgreSQL (`stores=` of kind "postgresql", storage.stores) the same checks run on the same staging folder, and
the import is written into the database instead, each in a schema of its own (bundle/pg_import.py); `list_imported`,
`trusted_keys` and `find_receipt_home` take the same `stores=` and read the database's `bundle_imports` rows.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from bundle.format import BundleError
from bundle.verify import BundleReport, staged, verify_opened
from ledger import Ledger
from ledger.event import EventError, now_ts, validate_session_id
from ledger.fsmode import private_dir, write_private
from receipts.keys import PublicKey, format_public_key
from retrieval import Index

if TYPE_CHECKING:
    from receipts.ledger_copy import LineSource
    from receipts.verify import Report
    from storage.stores import Stores

IMPORTED = "imported"
ORIGIN = "origin.json"
STAGING_PREFIX = ".staging-"


class ImportRefused(BundleError):
    """An import refused by the bundle's checks, not its structure: `verdict` is "failed" (a check failed) or
    "unverified" (no --trust key signed it), so the CLI exits 1 or 3 as `verify` does for the same bundle."""

    def __init__(self, message: str, *, verdict: str, report: BundleReport | None = None) -> None:
        super().__init__(message)
        self.verdict = verdict
        self.report = report  # every row, to show why


@dataclass(frozen=True, slots=True)
class Origin:
    """What `origin.json` of an imported session says."""

    local: str
    session: str  # the bundle's session id (its events carry it)
    signer: str
    events: int
    chain_head: str
    bundle_sha256: str
    verdict: str  # "verified", or "unverified" (imported with allow_untrusted)
    imported_at: str


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


def read_origin(folder: Path) -> Origin | None:
    try:
        doc = json.loads((folder / ORIGIN).read_text("utf-8"))
        return Origin(**{k: doc[k] for k in Origin.__dataclass_fields__})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _on_database(stores: Stores | None) -> bool:
    return stores is not None and stores.kind == "postgresql"


def list_imported(data_dir: str | os.PathLike[str], *, stores: Stores | None = None) -> list[Origin]:
    """Every imported session of `data_dir` (or of the database `stores` names), by local id."""
    if stores is not None and _on_database(stores):
        from bundle.pg_import import list_origins

        return list_origins(stores)
    root = imported_root(data_dir)
    out = []
    for p in sorted(root.iterdir()) if root.is_dir() else []:
        if p.name.startswith(".") or not p.is_dir() or p.is_symlink():
            continue
        o = read_origin(p)
        if o is not None and o.local == p.name:
            out.append(o)
    return out


def trusted_keys(data_dir: str | os.PathLike[str], local: str, *, stores: Stores | None = None) -> list[PublicKey]:
    """The keys trusted for an imported session: those its bundle carried (checked at import)."""
    from receipts.api import load_trust

    if stores is not None and _on_database(stores):
        from bundle.pg_import import import_keys

        return import_keys(stores, validate_session_id(local))

    folder = imported_dir(data_dir, local) / "bundle-keys"
    return load_trust(sorted(folder.glob("*.pub"))) if folder.is_dir() else []


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
    (receipts.ledger_copy: a copy with no name on disk, its audit cache in a private folder removed after): the
    same checks over the same bytes, at the cost of one copy of the ledger per call."""
    from receipts.api import verify_bytes

    keys = trusted_keys(data_dir, local, stores=stores)
    if stores is None or not _on_database(stores):
        return verify_bytes(raw, trusted=keys, data_dir=imported_dir(data_dir, local))
    from bundle.pg_import import import_stores

    with import_stores(stores, validate_session_id(local)) as opened:
        return verify_bytes(raw, trusted=keys, data_dir=imported_root(data_dir), source=cast("LineSource", opened.ledger))


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


def _default_local(data_dir: Path, origin: str, chain_head: str) -> str:
    return _free_local(origin, chain_head, lambda local: (imported_root(data_dir) / local).exists() or (data_dir / "sessions" / local).exists())


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
) -> Imported:
    """Verify the bundle at `path` and import it into `data_dir` (BundleError, nothing changed, when refused).
    `stores`: on PostgreSQL the import is written into that database (`data_dir` holds only the staging folder)."""
    data = _data_dir(Path(data_dir))
    if as_session is not None:
        try:
            validate_session_id(as_session)
        except EventError as exc:
            raise BundleError(f"--as: {exc}") from None
    root = imported_root(data)
    private_dir(root)  # 0700 whatever the umask; staged() removes the staging folders of dead imports there
    if stores is not None and _on_database(stores):
        return _import_into_database(stores, root, Path(path), as_session, trusted, allow_untrusted)
    with staged(path, under=root, prefix=STAGING_PREFIX) as opened:
        report = verify_opened(opened, trusted)
        m = opened.manifest
        _refuse(report, allow_untrusted)
        for o in list_imported(data):
            if (o.session, o.signer, o.events, o.chain_head) == (m.session, m.signer, m.events, m.chain_head):
                return Imported(o.local, o, report, True, 0)
        if as_session is not None:
            if (root / as_session).exists() or (data / "sessions" / as_session).exists():
                raise BundleError(f"--as {as_session}: a session of that id already exists here; nothing was imported")
            local = as_session
        else:
            local = _default_local(data, m.session, m.chain_head)
        origin = Origin(local, m.session, m.signer, m.events, m.chain_head, _sha256_file(Path(path)), report.verdict, now_ts())
        # 0600 in 0700 whatever the umask, like every file the project writes (issue 28 §6; read.py extracted the rest)
        write_private(opened.data / ORIGIN, (json.dumps(_as_dict(origin), indent=1) + "\n").encode("utf-8"))
        keys = private_dir(opened.data / "bundle-keys")
        for k in opened.keys:  # normalised: one trust-format file per key the bundle carried
            write_private(keys / (k.key_id.replace(":", "-") + ".pub"), format_public_key(k).encode("utf-8"))
        target = root / local
        os.rename(opened.data, target)
        _fsync_dir(root)
    led = Ledger(target)
    idx = Index(target, led)
    try:
        idx.index_session(m.session)
        count = led.head(m.session)[0]
    finally:
        idx.close()
        led.close()
    return Imported(local, origin, report, False, count)


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


def _import_into_database(
    stores: Stores, root: Path, path: Path, as_session: str | None, trusted: Sequence[PublicKey], allow_untrusted: bool
) -> Imported:
    """import_bundle on PostgreSQL: the same checks, then bundle/pg_import.py writes it (a schema of its own)."""
    from bundle import pg_import

    pg_import.sweep(stores)
    with staged(path, under=root, prefix=STAGING_PREFIX) as opened:
        report = verify_opened(opened, trusted)
        m = opened.manifest
        _refuse(report, allow_untrusted)
        earlier = pg_import.same_ledger(stores, m.session, m.signer, m.events, m.chain_head)
        if earlier is not None:
            return Imported(earlier.local, earlier, report, True, 0)
        if as_session is not None:
            if pg_import.local_taken(stores, as_session):
                raise BundleError(f"--as {as_session}: a session of that id already exists here; nothing was imported")
            local = as_session
        else:
            local = _free_local(m.session, m.chain_head, lambda name: pg_import.local_taken(stores, name))
        origin = pg_import.new_origin(local, opened, _sha256_file(path), report.verdict)
        done, duplicate, count = pg_import.import_opened(stores, opened, origin)
    return Imported(done.local, done, report, duplicate, count)


def _as_dict(o: Origin) -> dict[str, Any]:
    return {k: getattr(o, k) for k in Origin.__dataclass_fields__}


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
