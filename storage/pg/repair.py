"""`python -m ledger repair` on PostgreSQL: a session broken in the middle, shown, then cut from a seq on.

The same steps, refusals and note as the file backend (ledger/repair.py, whose pure pieces are used here):

1. in one transaction holding the session's `sessions` row lock (PgLedger._lock, the lock every append
   and erasure takes), the rows are walked again from genesis and held against the recorded tail; the
   cut seq must be at most the first break's position, and the rows before it must verify on their own;
2. the rows from that seq on are kept, byte for byte as the JSONL file would hold them (each line and its
   newline), in a `ledger_cuts` row (`events.jsonl.cut-<seq>-<utc>`, their sha256) — that row is the
   record; with a data directory a copy of the same bytes is written (0600, exclusive, fsynced) to
   DATA_DIR/sessions/<session>/ under the same name, where the file backend keeps its cut, for a person
   to open (it goes with the folder when the session is deleted);
3. the rows are deleted and the `system` note recording the cut (ledger.repair.repair_note) is inserted at
   that seq; the tail moves to it.

Nothing is deleted without being kept: the `ledger_cuts` row commits in the transaction that deletes the
rows (a failure before the commit changes nothing and removes the copy). `repair` then refreshes what
derives from the ledger under the session's turn lock: the producer's Merkle tree is dropped, the
session's search rows are dropped and indexed again (no word only in the cut rows stays findable), and a
checkpoint over the smaller tree is signed when there is a key.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

from ledger.event import now_ts, validate_session_id
from ledger.repair import Cut, Diagnosis, RepairRefused, check_cut, check_prefix, check_seq, cut_name, repair_note
from ledger.verify import SessionReport, verify_stream
from storage.common.cut_file import write_cut
from storage.pg import sql
from storage.pg.ledger import CURSOR_ROWS, PgLedger, _chunks, _line_row, against_tail

if TYPE_CHECKING:
    from storage.stores import Stores


@dataclass(frozen=True, slots=True)
class KeptCut:
    """A `ledger_cuts` row: the rows a repair moved aside, as JSONL."""

    cut_from_seq: int
    made_at: str
    name: str
    data: bytes
    sha256: str


def diagnose(ledger: PgLedger, session: str, progress: Any = None) -> Diagnosis:
    """The first break and what `truncate_at(suggest_seq)` would cut (reads only); `progress` as PgLedger.verify's."""
    report = ledger.verify(session, progress=progress)
    lines, size = _rows_since(ledger, session, 0)
    if report.brk is None:
        return Diagnosis(session, report, lines, size, None, 0, 0)
    seq = report.brk.line - 1
    cut_lines, cut_bytes = _rows_since(ledger, session, seq)
    return Diagnosis(session, report, lines, size, seq, cut_lines, cut_bytes)


def _rows_since(ledger: PgLedger, session: str, seq: int) -> tuple[int, int]:
    """(rows, bytes as JSONL) of the session from `seq` on."""
    with ledger.db.connection() as conn:
        row = conn.execute(sql.LEDGER_CUT_SIZE, (session, seq)).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def _lines(conn: psycopg.Connection[Any], statement: str, params: tuple[Any, ...]) -> Generator[bytes, None, None]:
    """The lines a statement selects, each with its newline, through a server-side cursor of this transaction."""
    with conn.cursor(name=f"mre_repair_{uuid.uuid4().hex}") as cur:
        cur.itersize = CURSOR_ROWS
        cur.execute(statement, params)
        for (line,) in cur:
            yield bytes(line) + b"\n"


def _walk(conn: psycopg.Connection[Any], session: str, statement: str, params: tuple[Any, ...]) -> SessionReport:
    """verify_stream over the selected rows, read whole (the cursor is closed before the next statement)."""
    lines = _lines(conn, statement, params)
    try:
        return verify_stream(session, _chunks(lines, None))
    finally:
        lines.close()


def _digest(chunks: Iterator[bytes]) -> tuple[int, int, str]:
    """(lines, bytes, sha256 hex) of JSONL chunks whose every line ends with its newline (rows always do)."""
    h = hashlib.sha256()
    nbytes = lines = 0
    for chunk in chunks:
        h.update(chunk)
        nbytes += len(chunk)
        lines += chunk.count(b"\n")
    return lines, nbytes, h.hexdigest()


def truncate_at(ledger: PgLedger, session: str, seq: int, *, copy_dir: Path | None = None) -> Cut:
    """Move the session's rows from seq `seq` on into `ledger_cuts` (and a copy in `copy_dir`) and record the cut.

    Raises RepairRefused (nothing changed) for an unknown session, when the rows verify, when `seq` is past
    the first break, or when the rows before `seq` do not verify on their own. Cut.path is the copy, or the
    row's name when there is no `copy_dir`.
    """
    check_seq(seq)
    validate_session_id(session)
    made_at = now_ts()
    name = cut_name(seq, made_at)
    dest = None if copy_dir is None else copy_dir / name
    made = False
    try:
        with ledger.db.transaction() as conn:
            try:  # every append and erasure of the session queues behind this lock until the commit
                size, head = ledger._lock(conn, session, create=False)
            except FileNotFoundError:
                raise RepairRefused(f"session {session}: no such session") from None
            report = against_tail(_walk(conn, session, sql.LEDGER_ALL_LINES, (session,)), size, head.hex())
            brk = check_cut(session, seq, report)
            prefix = _walk(conn, session, sql.LEDGER_LINES_BEFORE, (session, seq))
            check_prefix(seq, prefix)
            cut = _chunks(_lines(conn, sql.LEDGER_LINES_SINCE, (session, seq)), None)
            if dest is None:
                lines, nbytes, digest = _digest(cut)
            else:
                _private_dir(dest.parent)
                made = True  # write_cut creates it exclusively (a name already there raises before `made` matters)
                lines, nbytes, digest = write_cut(dest, cut)
            kept = conn.execute(sql.LEDGER_CUT_KEEP, {"session": session, "seq": seq, "made_at": made_at, "name": name}).fetchone()
            if kept is None or (int(kept[0]), str(kept[1])) != (nbytes, digest):
                raise RuntimeError(f"session {session}: the cut rows kept ({kept}) differ from the ones read ({nbytes} bytes, sha256 {digest})")
            conn.execute(sql.LEDGER_CUT_DELETE, (session, seq))
            note = repair_note(session, seq, prefix.head, lines, nbytes, digest, name, brk)
            with conn.cursor().copy(sql.LEDGER_COPY_EVENTS) as copy:
                copy.set_types(sql.LEDGER_COPY_TYPES)
                copy.write_row(_line_row(note.to_line(), note.to_dict()))
            conn.execute(sql.LEDGER_ADVANCE, (seq + 1, note.chain, session))
    except FileExistsError:
        raise
    except BaseException:
        if dest is not None and made:
            dest.unlink(missing_ok=True)  # the rows are still in the database: no copy of a cut that did not happen
        raise
    ledger._remember(session, seq + 1, bytes.fromhex(note.chain))
    return Cut(session, seq, lines, nbytes, digest, dest if dest is not None else Path(name), brk, note.seq, note.chain)


def _private_dir(path: Path) -> None:
    """DATA_DIR/sessions/<session>, made 0700 where missing (as the file backend makes them)."""
    path.parent.mkdir(mode=0o700, exist_ok=True)
    path.mkdir(mode=0o700, exist_ok=True)


def kept_cuts(ledger: PgLedger, session: str) -> list[KeptCut]:
    """The session's cut tails, oldest first (what a person restores from by hand, if they need to)."""
    validate_session_id(session)
    with ledger.db.connection() as conn:
        rows = conn.execute(sql.LEDGER_CUTS, (session,)).fetchall()
    return [KeptCut(int(s), str(m), str(n), bytes(d), str(h)) for s, m, n, d, h in rows]


def repair(stores: Stores, session: str, seq: int, key: Any, unsigned: str, *, copy_dir: Path | None) -> tuple[Cut, list[str]]:
    """Cut under the session's turn lock (no turn or import signs in between), then refresh what derives from the
    ledger: the Merkle tree, the search rows, the checkpoint (signed with `key`; `unsigned` says why not when None)."""
    from storage.common.checkpoint_issue import issue
    from storage.pg.index import PgIndex
    from storage.pg.receipts import PgReceipts

    ledger, backend, index = stores.ledger, stores.receipts, stores.index
    assert isinstance(ledger, PgLedger) and isinstance(backend, PgReceipts) and isinstance(index, PgIndex)
    refreshed: list[str] = []
    with backend.turn_lock(session):
        cut = truncate_at(ledger, session, seq, copy_dir=copy_dir)
        backend.drop_tree(session)  # the producer's tree: rebuilt from the rows
        refreshed.append("dropped the Merkle tree")
        if key is None:
            refreshed.append(unsigned)
        else:
            try:
                cp = issue(backend, ledger, session, key, allow_shrink=True)  # a smaller tree than the last checkpoint's
                refreshed.append(f"signed a checkpoint of {cp['body']['tree_size']} events by {cp['key_id']}")
            except (OSError, ValueError) as exc:
                refreshed.append(f"the checkpoint could not be signed ({exc})")
        index.drop_session(session)  # the cut rows' words go with their search rows (then VACUUM)
        index.index_session(session)
        refreshed.append("re-indexed the session")
    return cut, refreshed


__all__ = ["KeptCut", "diagnose", "kept_cuts", "repair", "truncate_at"]
