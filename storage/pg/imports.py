"""Sessions imported from bundles, on PostgreSQL (docs/FORMAT.md §21): `PgImports`, what `PgLedger.imports()` gives
bundle.importer (the file backend's is storage.files.receipts.file_backend.FileImports; the contract: storage/api_faces.py).

Every event hashes its session id (§4.2), so an imported ledger keeps its original id, which may be a session of
this database (the visitor's own, exported and brought back) or of another import. As each file-backed import is
a data directory of its own (`DATA_DIR/imported/<LOCAL>/`), each import here is a **schema** of its own: the
backend's tables (storage.pg.sql.SCHEMA), created by storage.pg.connect.Database over a search_path naming only
that schema, so PgLedger, PgIndex and PgReceipts work on it unchanged (`import_stores`). The main schema's
`bundle_imports` row is origin.json, and the import's commit point: the ledger's exact lines (copied as
`ledger migrate` copies them, storage.pg.copy_in.copy_session: its chain verified again on the way), the
receipts (their exact bytes), the checkpoint, the certificates and keys (`bundle_members`) and the search index
are all written first; a schema with no row (a crash) is dropped by a later import once STALE_SECONDS old. The
same ledger imported twice (same session, signer, events, chain head) is a duplicate — also when two imports
race: the row's unique key decides, and the loser's schema is dropped.

The bundle is still extracted and verified in a staging folder under `DATA_DIR/imported/` (removed afterwards, or,
if the import was killed, by the next import: bundle.verify.staged): DATA_DIR keeps nothing of an import but that
transient copy. A refusal is receipts.stores.ImportFailed (bundle.importer says it as a BundleError).
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql as pgsql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from receipts.body import parse_receipt
from receipts.checkpoints import parse_checkpoint
from receipts.keys import PublicKey, format_public_key, parse_public_key
from receipts.stores import IMPORTED, ImportFailed, Origin
from storage import BackendError
from storage.pg import sql
from storage.pg.connect import Database
from storage.pg.copy_in import MigrationRefused, copy_session
from storage.pg.index import PgIndex
from storage.pg.ledger import PgLedger
from storage.pg.receipts import PgReceipts

if TYPE_CHECKING:
    from storage.contract import LedgerStore, Stores

log = logging.getLogger("bundle")
STALE_SECONDS = 3600  # a schema with no bundle_imports row this old is a crashed import (storage.files.receipts.ledger_copy.UNOWNED_GRACE_S, for a staging folder)
_SCHEMA_RE = re.compile(r"mre_import_(\d{10})_[0-9a-f]{8}")


def schema_url(url: str, schema: str) -> str:
    """`url` as a libpq key=value string with `options` setting search_path to `schema` alone (added to any
    options it has). Read by libpq's own parser, so a query value keeps its '+' and its percent-escapes."""
    if not _SCHEMA_RE.fullmatch(schema):
        raise ValueError(f"schema {schema!r}: not an import schema name")
    options = str(conninfo_to_dict(url).get("options") or "")
    return make_conninfo(url, options=f"{options} -c search_path={schema}".strip())


def _origin(row: Sequence[Any]) -> tuple[Origin, str]:
    local, session, signer, events, head, sha, verdict, at, schema = row
    return Origin(str(local), str(session), str(signer), int(events), str(head), str(sha), str(verdict), str(at)), str(
        schema
    )


def list_origins(db: Database) -> list[Origin]:
    """Every imported session of the database, by local id."""
    with db.connection() as conn:
        return [_origin(r)[0] for r in conn.execute(sql.BUNDLE_IMPORTS).fetchall()]


def _find(db: Database, local: str) -> tuple[Origin, str] | None:
    with db.connection() as conn:
        row = conn.execute(sql.BUNDLE_IMPORT_GET, (local,)).fetchone()
    return None if row is None else _origin(row)


@contextmanager
def _schema_stores(db: Database, data_dir: Path, schema: str) -> Iterator[Stores]:
    """The four stores over one import's schema (a pool of its own, closed after). No receipt copies in DATA_DIR:
    an imported session's receipts are not a visitor's to download there."""
    from storage.contract import Stores
    from storage.pg.consent import PgSessionState

    schema_db = Database(schema_url(db.url, schema), min_size=1, max_size=2)
    ledger = PgLedger(schema_db)
    backend = PgReceipts(schema_db)
    opened = Stores("postgresql", data_dir, ledger, PgIndex(schema_db, ledger), backend, backend, schema_db, PgSessionState(schema_db, data_dir))
    try:
        yield opened
    finally:
        opened.close()  # the receipts' lock pool, then the database's


@contextmanager
def import_stores(db: Database, data_dir: Path, local: str) -> Iterator[Stores]:
    """The stores of the imported session `local` (its ledger, index, receipts and checkpoint), to search or
    verify against; ImportFailed when there is no such import."""
    found = _find(db, local)
    if found is None:
        raise ImportFailed(f"imported session {local}: no such import in {db.shown}")
    with _schema_stores(db, data_dir, found[1]) as opened:
        yield opened


def _members(opened: Stores, prefix: str) -> list[tuple[str, bytes]]:
    assert opened.database is not None  # a schema's stores (_schema_stores)
    with opened.database.connection() as conn:
        return [(str(n), bytes(d)) for n, d in conn.execute(sql.BUNDLE_MEMBERS, (prefix,)).fetchall()]


def same_ledger(db: Database, session: str, signer: str, events: int, chain_head: str) -> Origin | None:
    with db.connection() as conn:
        row = conn.execute(sql.BUNDLE_IMPORT_SAME, (session, signer, events, chain_head)).fetchone()
    return None if row is None else _origin(row)[0]


def local_taken(ledger: PgLedger, local: str) -> bool:
    """An import or a session of this database already has the id `local`."""
    return _find(ledger.db, local) is not None or ledger.exists(local)


def sweep(db: Database, now: float | None = None) -> list[str]:
    """Drop the schemas of crashed imports (no bundle_imports row, created over STALE_SECONDS ago); their names."""
    t = time.time() if now is None else now
    dropped = []
    with db.transaction() as conn:
        used = {str(r[0]) for r in conn.execute(sql.BUNDLE_SCHEMAS_USED)}
        for (name,) in conn.execute(sql.BUNDLE_SCHEMAS).fetchall():
            m = _SCHEMA_RE.fullmatch(str(name))
            if m is not None and str(name) not in used and t - int(m.group(1)) > STALE_SECONDS:
                conn.execute(pgsql.SQL(sql.BUNDLE_DROP_SCHEMA).format(pgsql.Identifier(str(name))))
                dropped.append(str(name))
    return dropped


def _drop(db: Database, schema: str) -> None:
    with db.transaction() as conn:
        conn.execute(pgsql.SQL(sql.BUNDLE_DROP_SCHEMA).format(pgsql.Identifier(schema)))


def import_staged(
    db: Database, data_dir: Path, folder: Path, origin: Origin, keys: Sequence[PublicKey], staged: LedgerStore
) -> tuple[Origin, bool, int]:
    """Write the verified bundle extracted in `folder` as the import `origin` (local id checked free by the caller):
    (the origin recorded, duplicate, events indexed). `staged`: the ledger in `folder`, opened by the caller and read
    through the contract (copy_in). A duplicate found only at the commit (another import of the same ledger won the
    race) leaves nothing of this one. ImportFailed when the local id was taken meanwhile."""
    session = origin.session
    schema = f"{sql.BUNDLE_SCHEMA_PREFIX}{int(time.time()):010d}_{secrets.token_hex(4)}"
    try:
        with db.transaction() as conn:
            conn.execute(pgsql.SQL(sql.BUNDLE_CREATE_SCHEMA).format(pgsql.Identifier(schema)))
    except BackendError as exc:  # the pool's connection() makes a refused privilege a BackendError
        if not isinstance(exc.__cause__, psycopg.errors.InsufficientPrivilege):
            raise
        raise ImportFailed(
            f"PostgreSQL at {db.shown}: an import needs a schema of its own, and this role may not create one "
            "(GRANT CREATE ON DATABASE … TO it); nothing was imported"
        ) from None
    try:
        with _schema_stores(db, data_dir, schema) as target:
            assert isinstance(target.ledger, PgLedger)  # _schema_stores' own
            try:
                done = copy_session(staged, target.ledger, session)
            except MigrationRefused as exc:  # cannot be after ledger.chain passed; said, never hidden
                raise ImportFailed(f"{exc}") from None
            if (done.events, target.ledger.head(session)[1]) != (origin.events, origin.chain_head):
                raise ImportFailed(
                    f"session {session}: the database holds {done.events} events after the copy, the manifest {origin.events}"
                )
            _write_receipts(target, folder, session)
            cp = parse_checkpoint(
                (folder / "sessions" / session / "checkpoint.json").read_bytes(), source="checkpoint.json"
            )
            target.receipts.keep_checkpoint(session, cp)
            _write_members(target, folder, keys)
            target.index.index_session(session)
            count = target.ledger.head(session)[0]
        with db.transaction() as conn:
            o = origin
            row = conn.execute(
                sql.BUNDLE_IMPORT_ADD,
                (
                    o.local,
                    o.session,
                    o.signer,
                    o.events,
                    o.chain_head,
                    o.bundle_sha256,
                    o.verdict,
                    o.imported_at,
                    schema,
                ),
            ).fetchone()
    except BaseException:
        try:
            _drop(db, schema)
        except (
            Exception
        ) as exc:  # the server went away too: a later import's sweep drops it; the first error is the one to see
            log.warning("bundle import: schema %s left for the sweep (%s)", schema, exc)
        raise
    if row is None:
        _drop(db, schema)
        earlier = same_ledger(db, origin.session, origin.signer, origin.events, origin.chain_head)
        if earlier is not None:
            return earlier, True, 0
        raise ImportFailed(f"--as {origin.local}: a session of that id was imported meanwhile; nothing was imported")
    return origin, False, count


def _write_receipts(target: Stores, folder: Path, session: str) -> None:
    """Each receipt with its exact bytes (a redacted one stays redacted), and its row."""
    from receipts.body import dump_file

    receipts = folder / "sessions" / session / "receipts"
    for path in sorted(receipts.glob("rcpt_*.json")) if receipts.is_dir() else []:
        raw = path.read_bytes()
        envelope = json.loads(raw)
        where = target.receipts.write_receipt(session, path.stem, envelope)
        if dump_file(envelope) != raw:
            target.receipts.replace_receipt(session, path.stem, raw)
        target.rows.record_row(session, path.stem, where, parse_receipt(raw).signed_body)


def _write_members(target: Stores, folder: Path, keys: Sequence[PublicKey]) -> None:
    """The certificates and the keys the bundle carried (keys normalised to the trust format, as on files)."""
    rows: list[tuple[str, bytes]] = []
    erasures = folder / "erasures"
    for path in sorted(erasures.glob("*.json")) if erasures.is_dir() else []:
        rows.append((f"certificates/{path.name}", path.read_bytes()))
    for k in keys:
        rows.append((f"keys/{k.key_id.replace(':', '-')}.pub", format_public_key(k).encode("utf-8")))
    if rows:
        assert target.database is not None  # a schema's stores (_schema_stores)
        with target.database.transaction() as conn, conn.cursor() as cur:
            cur.executemany(sql.BUNDLE_MEMBER_ADD, rows)


class PgImports:
    """The imported sessions of one database (storage/api_faces.py: BundleImports), each in a schema of its own.
    Every method goes through this module's functions (tests replace them to stage a race or a failure)."""

    def __init__(self, ledger: PgLedger) -> None:
        self.ledger = ledger
        self.db = ledger.db

    def __repr__(self) -> str:
        return f"PgImports({self.db.shown!r})"

    def _data_dir(self) -> Path:
        if self.ledger.data_dir is None:
            raise ImportFailed(
                f"imported sessions on PostgreSQL at {self.db.shown}: these stores have no data directory"
            )
        return self.ledger.data_dir

    def origins(self) -> list[Origin]:
        return list_origins(self.db)

    def open(self, local: str) -> AbstractContextManager[Stores]:
        """The imported session's stores (ledger, index, receipts and checkpoint in its schema), closed after."""
        return import_stores(self.db, self._data_dir(), local)

    def keys(self, local: str) -> list[PublicKey]:
        """The keys trusted for an imported session: those its bundle carried (checked at import)."""
        with self.open(local) as opened:
            return [
                parse_public_key(bytes(data).decode("utf-8"), source=name) for name, data in _members(opened, "keys/")
            ]

    def certificates(self, local: str) -> list[tuple[str, bytes]]:
        """(file name, bytes) of the erasure certificates the imported session's bundle carried."""
        with self.open(local) as opened:
            return [(name.removeprefix("certificates/"), data) for name, data in _members(opened, "certificates/")]

    @contextmanager
    def audited(self, local: str) -> Iterator[tuple[Path, PgLedger]]:
        """The import schema's ledger, whose stored lines a check copies (storage.files.receipts.ledger_copy: a copy with
        no name on disk, its audit cache in a private folder removed after): the same checks over the same bytes, at
        the cost of one copy of the ledger per check."""
        with self.open(local) as opened:
            assert isinstance(opened.ledger, PgLedger)  # _schema_stores' own
            yield self._data_dir() / IMPORTED, opened.ledger

    def same_ledger(self, session: str, signer: str, events: int, chain_head: str) -> Origin | None:
        return same_ledger(self.db, session, signer, events, chain_head)

    def taken(self, local: str) -> bool:
        return local_taken(self.ledger, local)

    def sweep(self) -> list[str]:
        """Drop the schemas of crashed imports (see `sweep`); their names."""
        return sweep(self.db)

    def add(self, folder: Path, origin: Origin, keys: Sequence[PublicKey], staged: LedgerStore) -> tuple[Origin, bool, int]:
        return import_staged(self.db, self._data_dir(), folder, origin, keys, staged)


__all__ = [
    "STALE_SECONDS",
    "PgImports",
    "import_stores",
    "list_origins",
    "local_taken",
    "same_ledger",
    "schema_url",
    "sweep",
]
