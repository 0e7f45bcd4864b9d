"""`python -m ledger migrate`'s step for receipts, `.cites` records, checkpoints and Merkle trees.

Run after the ledgers were copied (storage/pg/migrate.py registers it in EXTRA_STEPS). Per session of the
data directory whose ledger the database now holds whole (same size and head as the file; others are
skipped and named, their receipts left for a rerun):

- every receipt file is copied as its exact bytes (a visitor's kept file and the database's are the same),
  with its derived row and its cited seqs (what the engine's `_record` and chat.citing would have written);
  a receipt already there with the same bytes is left, with other bytes (redacted in the files since) replaced;
- every `.cites` record left by a turn that has no receipt is copied;
- the producer's tree is built from the database's ledger (the digests the migrated lines hold), then checked
  against the kept checkpoint's root, and the checkpoint copied (never moving a newer one back).

Everything is idempotent: a rerun copies what is missing and reports the rest as already there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ledger import Ledger
from receipts import checkpoints, files
from receipts.body import parse_receipt
from receipts.stores import row_values
from storage.pg import sql
from storage.pg.connect import Database
from storage.pg.ledger import PgLedger
from storage.pg.receipts import PgReceipts


@dataclass
class Tally:
    """What the step did, over every session."""

    receipts: int = 0  # copied by this run
    already: int = 0  # the same bytes were there
    replaced: int = 0  # other bytes were there (the file is newer: a redaction)
    unparsed: int = 0  # copied, but not a receipt this code parses: no derived row
    cites: int = 0  # `.cites` records copied
    checkpoints: int = 0
    trees: int = 0
    leaves: int = 0
    skipped: list[str] = field(default_factory=list)  # "session: why"

    def line(self) -> str:
        parts = [
            f"{self.receipts} receipts copied ({self.already} already there, {self.replaced} replaced by the file's newer bytes"
            + (f", {self.unparsed} unparsed: copied without their row" if self.unparsed else "")
            + ")",
            f"{self.cites} .cites records",
            f"{self.checkpoints} checkpoints",
            f"{self.trees} Merkle trees ({self.leaves} leaves)",
        ]
        if self.skipped:
            parts.append(f"skipped {len(self.skipped)} sessions: " + "; ".join(self.skipped))
        return ", ".join(parts)


def migrate_receipts(data_dir: Path, database: Database) -> str:
    """The EXTRA_STEPS entry: one line saying what was copied, built and skipped."""
    return migrate_all(data_dir, database).line()


def migrate_all(data_dir: Path, database: Database, sessions: list[str] | None = None) -> Tally:
    led = Ledger(data_dir, record_tails=False)
    pg_ledger = PgLedger(database)
    store = PgReceipts(database)
    tally = Tally()
    for session in sessions if sessions is not None else led.sessions():
        here, there = led.head(session), pg_ledger.head(session)
        if here != there:
            tally.skipped.append(f"{session}: the database holds {there[0]} of its {here[0]} events (migrate the ledger first)")
            continue
        _session(data_dir, session, store, pg_ledger, tally)
    return tally


def _session(data_dir: Path, session: str, store: PgReceipts, ledger: PgLedger, tally: Tally) -> None:
    for path in files.list_receipts(data_dir, session):
        _receipt(store, session, path.stem, files.read_receipt_bytes(path), tally)
    have = set(store.receipt_ids(session))
    for path in files.list_cites(data_dir, session):
        got = files.read_cites(path)
        if got is not None and path.stem not in have:
            store.write_cites(session, path.stem, got[0], got[1])
            tally.cites += 1
    count, _head = ledger.head(session)
    if count == 0:
        return
    tree = store.synced_tree(ledger, session)
    tally.trees += 1
    tally.leaves += tree.size
    try:
        kept = checkpoints.latest(data_dir, session)
    except (checkpoints.MalformedCheckpoint, OSError) as exc:
        tally.skipped.append(f"{session}: checkpoint.json not copied ({str(exc)[:200]})")
        return
    if kept is None:
        return
    size = kept["body"]["tree_size"]
    if size > tree.size or tree.root(size).hex() != kept["body"]["root"]:
        tally.skipped.append(f"{session}: checkpoint.json (size {size}) does not match the migrated ledger's tree: not copied")
        return
    if store.checkpoint_bytes(session) != checkpoints.checkpoint_file_bytes(kept) and store.keep_checkpoint(session, kept):
        tally.checkpoints += 1


def _receipt(store: PgReceipts, session: str, receipt_id: str, data: bytes, tally: Tally) -> None:
    with store.db.transaction() as conn:
        row = conn.execute(sql.RECEIPT_COMPARE, (data, receipt_id)).fetchone()
        if row is not None and row[0] != session:
            tally.skipped.append(f"{session}: receipt {receipt_id} is held by session {row[0]} in the database: not copied")
            return
        if row is not None and row[1]:
            tally.already += 1
            return
        if row is None:
            conn.execute(sql.RECEIPT_INSERT, (receipt_id, session, data))
            tally.receipts += 1
        else:
            conn.execute(sql.RECEIPT_REPLACE, (data, session, receipt_id))
            tally.replaced += 1
    try:
        receipt = parse_receipt(data)
        values = row_values(receipt.body)
    except (ValueError, KeyError, TypeError):
        tally.unparsed += 1
        return
    store.record_row(session, receipt_id, "", receipt.body)
    signed = receipt.signed_body
    cited = [signed["query"]["event"]["seq"], *(m["event"]["seq"] for m in signed["memories"])]
    store.record_cites(session, receipt_id, values["assistant_seq"], cited)


def register() -> None:
    """Add this step to storage.pg.migrate.EXTRA_STEPS (once)."""
    from storage.pg.migrate import EXTRA_STEPS

    if not any(step is migrate_receipts for _name, step in EXTRA_STEPS):
        EXTRA_STEPS.append(("receipts, .cites, checkpoints, Merkle trees", migrate_receipts))


__all__ = ["Tally", "migrate_all", "migrate_receipts", "register"]
