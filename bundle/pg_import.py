"""Sessions imported from bundles, on PostgreSQL (docs/FORMAT.md §21; the file backend's is bundle/importer.py).

Every event hashes its session id (§4.2), so an imported ledger keeps its original id, which may be a session of
this database (the visitor's own, exported and brought back) or of another import. As each file-backed import is
a data directory of its own (`DATA_DIR/imported/<LOCAL>/`), each import here is a **schema** of its own: the
backend's tables (storage.pg.sql.SCHEMA), created by storage.pg.connect.Database over a search_path naming only
that schema, so PgLedger, PgIndex and PgReceipts work on it unchanged (`import_stores`). The main schema's
`bundle_imports` row is origin.json, and the import's commit point: the ledger's exact lines (copied as
`ledger migrate` copies them, storage.pg.migrate.migrate_session: its chain verified again on the way), the
receipts (their exact bytes), the checkpoint, the certificates and keys (`bundle_members`) and the search index
are all written first; a schema with no row (a crash) is dropped by a later import once STALE_SECONDS old. The
same ledger imported twice (same session, signer, events, chain head) is a duplicate — also when two imports
race: the row's unique key decides, and the loser's schema is dropped.

The bundle is still extracted and verified in a staging folder under `DATA_DIR/imported/` (removed afterwards, or,
if the import was killed, by the next import: bundle.verify.staged): DATA_DIR keeps nothing of an import but that
transient copy.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

import psycopg
from psycopg import sql as pgsql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from bundle.format import BundleError
from bundle.read import Opened
from ledger.event import now_ts
from receipts.body import parse_receipt
from receipts.checkpoints import parse_checkpoint
from receipts.keys import PublicKey, format_public_key, parse_public_key
from storage import BackendError
from storage.files.ledger.store import Ledger

if TYPE_CHECKING:
    from bundle.importer import Origin
    from storage.pg.connect import Database
    from storage.pg.ledger import PgLedger
    from storage.stores import Stores

log = logging.getLogger("bundle")
STALE_SECONDS = 3600  # a schema with no bundle_imports row this old is a crashed import (receipts.ledger_copy.UNOWNED_GRACE_S, for a staging folder)
_SCHEMA_RE = re.compile(r"mre_import_(\d{10})_[0-9a-f]{8}")


def schema_url(url: str, schema: str) -> str:
    """`url` as a libpq key=value string with `options` setting search_path to `schema` alone (added to any
    options it has). Read by libpq's own parser, so a query value keeps its '+' and its percent-escapes."""
    if not _SCHEMA_RE.fullmatch(schema):
        raise ValueError(f"schema {schema!r}: not an import schema name")
    options = str(conninfo_to_dict(url).get("options") or "")
    return make_conninfo(url, options=f"{options} -c search_path={schema}".strip())


def _database(stores: Stores) -> Database:
    if stores.database is None:
        raise BundleError("imported sessions on PostgreSQL: these stores have no database")
    return stores.database


def _origin(row: Sequence[Any]) -> tuple[Origin, str]:
    from bundle.importer import Origin

    local, session, signer, events, head, sha, verdict, at, schema = row
    return Origin(str(local), str(session), str(signer), int(events), str(head), str(sha), str(verdict), str(at)), str(schema)


def list_origins(stores: Stores) -> list[Origin]:
    """Every imported session of the database, by local id."""
    from storage.pg import sql

    with _database(stores).connection() as conn:
        return [_origin(r)[0] for r in conn.execute(sql.BUNDLE_IMPORTS).fetchall()]


def _find(stores: Stores, local: str) -> tuple[Origin, str] | None:
    from storage.pg import sql

    with _database(stores).connection() as conn:
        row = conn.execute(sql.BUNDLE_IMPORT_GET, (local,)).fetchone()
    return None if row is None else _origin(row)


@contextmanager
def _schema_stores(stores: Stores, schema: str) -> Iterator[Stores]:
    """The four stores over one import's schema (a pool of its own, closed after). No receipt copies in DATA_DIR:
    an imported session's receipts are not a visitor's to download there."""
    from storage.pg.connect import Database
    from storage.pg.index import PgIndex
    from storage.pg.ledger import PgLedger
    from storage.pg.receipts import PgReceipts
    from storage.stores import Stores

    db = Database(schema_url(_database(stores).url, schema), min_size=1, max_size=2)
    ledger = PgLedger(db)
    backend = PgReceipts(db)
    opened = Stores("postgresql", stores.data_dir, ledger, PgIndex(db, ledger), backend, backend, db)
    try:
        yield opened
    finally:
        opened.close()  # the receipts' lock pool, then the database's


@contextmanager
def import_stores(stores: Stores, local: str) -> Iterator[Stores]:
    """The stores of the imported session `local` (its ledger, index, receipts and checkpoint), to search or
    verify against; BundleError when there is no such import."""
    found = _find(stores, local)
    if found is None:
        raise BundleError(f"imported session {local}: no such import in {stores.where}")
    with _schema_stores(stores, found[1]) as opened:
        yield opened


def import_keys(stores: Stores, local: str) -> list[PublicKey]:
    """The keys trusted for an imported session: those its bundle carried (checked at import)."""
    with import_stores(stores, local) as opened:
        return [parse_public_key(bytes(data).decode("utf-8"), source=name) for name, data in _members(opened, "keys/")]


def _members(opened: Stores, prefix: str) -> list[tuple[str, bytes]]:
    from storage.pg import sql

    with _database(opened).connection() as conn:
        return [(str(n), bytes(d)) for n, d in conn.execute(sql.BUNDLE_MEMBERS, (prefix,)).fetchall()]


def certificates(stores: Stores, local: str) -> list[tuple[str, bytes]]:
    """(file name, bytes) of the erasure certificates the imported session's bundle carried."""
    with import_stores(stores, local) as opened:
        return [(name.removeprefix("certificates/"), data) for name, data in _members(opened, "certificates/")]


def same_ledger(stores: Stores, session: str, signer: str, events: int, chain_head: str) -> Origin | None:
    from storage.pg import sql

    with _database(stores).connection() as conn:
        row = conn.execute(sql.BUNDLE_IMPORT_SAME, (session, signer, events, chain_head)).fetchone()
    return None if row is None else _origin(row)[0]


def local_taken(stores: Stores, local: str) -> bool:
    """An import or a session of this database already has the id `local`."""
    return _find(stores, local) is not None or stores.ledger.exists(local)


def sweep(stores: Stores, now: float | None = None) -> list[str]:
    """Drop the schemas of crashed imports (no bundle_imports row, created over STALE_SECONDS ago); their names."""
    from storage.pg import sql

    t = time.time() if now is None else now
    dropped = []
    with _database(stores).transaction() as conn:
        used = {str(r[0]) for r in conn.execute(sql.BUNDLE_SCHEMAS_USED)}
        for (name,) in conn.execute(sql.BUNDLE_SCHEMAS).fetchall():
            m = _SCHEMA_RE.fullmatch(str(name))
            if m is not None and str(name) not in used and t - int(m.group(1)) > STALE_SECONDS:
                conn.execute(pgsql.SQL(sql.BUNDLE_DROP_SCHEMA).format(pgsql.Identifier(str(name))))
                dropped.append(str(name))
    return dropped


def _drop(stores: Stores, schema: str) -> None:
    from storage.pg import sql

    with _database(stores).transaction() as conn:
        conn.execute(pgsql.SQL(sql.BUNDLE_DROP_SCHEMA).format(pgsql.Identifier(schema)))


def import_opened(stores: Stores, opened: Opened, origin: Origin) -> tuple[Origin, bool, int]:
    """Write the verified bundle `opened` as the import `origin` (local id checked free by the caller):
    (the origin recorded, duplicate, events indexed). A duplicate found only at the commit (another import of the
    same ledger won the race) leaves nothing of this one. BundleError when the local id was taken meanwhile."""
    from storage import migrate
    from storage.pg import sql

    m = opened.manifest
    schema = f"{sql.BUNDLE_SCHEMA_PREFIX}{int(time.time()):010d}_{secrets.token_hex(4)}"
    try:
        with _database(stores).transaction() as conn:
            conn.execute(pgsql.SQL(sql.BUNDLE_CREATE_SCHEMA).format(pgsql.Identifier(schema)))
    except BackendError as exc:  # the pool's connection() makes a refused privilege a BackendError
        if not isinstance(exc.__cause__, psycopg.errors.InsufficientPrivilege):
            raise
        raise BundleError(
            f"PostgreSQL at {stores.where}: an import needs a schema of its own, and this role may not create one "
            "(GRANT CREATE ON DATABASE … TO it); nothing was imported"
        ) from None
    try:
        with _schema_stores(stores, schema) as target:
            staged = Ledger(opened.data, record_tails=False)
            try:
                done = migrate.migrate_session(staged, cast("PgLedger", target.ledger), m.session)
            except migrate.MigrationRefused as exc:  # cannot be after ledger.chain passed; said, never hidden
                raise BundleError(f"{exc}") from None
            finally:
                staged.close()
            if (done.events, target.ledger.head(m.session)[1]) != (m.events, m.chain_head):
                raise BundleError(f"session {m.session}: the database holds {done.events} events after the copy, the manifest {m.events}")
            _write_receipts(target, opened)
            cp = parse_checkpoint((opened.data / "sessions" / m.session / "checkpoint.json").read_bytes(), source="checkpoint.json")
            target.receipts.keep_checkpoint(m.session, cp)
            _write_members(target, opened)
            target.index.index_session(m.session)
            count = target.ledger.head(m.session)[0]
        with _database(stores).transaction() as conn:
            o = origin
            row = conn.execute(
                sql.BUNDLE_IMPORT_ADD, (o.local, o.session, o.signer, o.events, o.chain_head, o.bundle_sha256, o.verdict, o.imported_at, schema)
            ).fetchone()
    except BaseException:
        try:
            _drop(stores, schema)
        except Exception as exc:  # the server went away too: a later import's sweep drops it; the first error is the one to see
            log.warning("bundle import: schema %s left for the sweep (%s)", schema, exc)
        raise
    if row is None:
        _drop(stores, schema)
        earlier = same_ledger(stores, m.session, m.signer, m.events, m.chain_head)
        if earlier is not None:
            return earlier, True, 0
        raise BundleError(f"--as {origin.local}: a session of that id was imported meanwhile; nothing was imported")
    return origin, False, count


def _write_receipts(target: Stores, opened: Opened) -> None:
    """Each receipt with its exact bytes (a redacted one stays redacted), and its row."""
    from receipts.body import dump_file

    session = opened.manifest.session
    folder = opened.data / "sessions" / session / "receipts"
    for path in sorted(folder.glob("rcpt_*.json")) if folder.is_dir() else []:
        raw = path.read_bytes()
        envelope = json.loads(raw)
        where = target.receipts.write_receipt(session, path.stem, envelope)
        if dump_file(envelope) != raw:
            target.receipts.replace_receipt(session, path.stem, raw)
        target.rows.record_row(session, path.stem, where, parse_receipt(raw).signed_body)


def _write_members(target: Stores, opened: Opened) -> None:
    """The certificates and the keys the bundle carried (keys normalised to the trust format, as on files)."""
    from storage.pg import sql

    rows: list[tuple[str, bytes]] = []
    erasures = opened.data / "erasures"
    for path in sorted(erasures.glob("*.json")) if erasures.is_dir() else []:
        rows.append((f"certificates/{path.name}", path.read_bytes()))
    for k in opened.keys:
        rows.append((f"keys/{k.key_id.replace(':', '-')}.pub", format_public_key(k).encode("utf-8")))
    if rows:
        with _database(target).transaction() as conn, conn.cursor() as cur:
            cur.executemany(sql.BUNDLE_MEMBER_ADD, rows)


def new_origin(local: str, opened: Opened, bundle_sha256: str, verdict: str) -> Origin:
    from bundle.importer import Origin

    m = opened.manifest
    return Origin(local, m.session, m.signer, m.events, m.chain_head, bundle_sha256, verdict, now_ts())


__all__ = [
    "STALE_SECONDS",
    "certificates",
    "import_keys",
    "import_opened",
    "import_stores",
    "list_origins",
    "local_taken",
    "new_origin",
    "same_ledger",
    "schema_url",
    "sweep",
]
