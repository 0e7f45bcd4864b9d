"""The search index: `Index`, the only class in `retrieval/` that speaks SQL or touches index files.

DATA_DIR/index.sqlite is derived data: every row can be rebuilt from the
ledgers, so a corrupted or vanished file is moved aside and rebuilt, never fatal.
Index is put together from one room per concern:

  connection.py    the file: opening, schema, recovery, connections, transactions (IndexFile)
  indexer.py       writing: catch_up, index_session, rebuild (Indexing)
  searcher.py      search and explain (Searching)
  housekeeping.py  forget_events, purge_session, purges (Housekeeping)

The names other code and tests use from this module (INDEX_FILE, PURGE_WAIT_S,
plan_rows, candidates_for, ...) stay importable from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ledger import Event
from retrieval.indexing import Plan, plan_rows
from storage.common.retrieval.connection import BUSY_MS, INDEX_FILE, ZEROED, IndexFile
from storage.common.retrieval.housekeeping import PURGE_WAIT_S, SCAN_BATCH, Housekeeping
from storage.common.retrieval.indexer import CHUNK, GENESIS_HEX, RACE_ATTEMPTS, TAIL_BY_OFFSET, Indexing, Progress
from storage.common.retrieval.searcher import Searching, candidate, candidates_for
from storage.files.ledger.store import Ledger

INDEX_COPY_PREFIX = f"{INDEX_FILE}.corrupt-"  # an unreadable index moved aside (connection.py): it holds indexed words


class Index(Searching, Housekeeping):
    """The FTS5 index over every session of one data directory.

    Constructing it opens (or creates) DATA_DIR/index.sqlite; call catch_up()
    at start-up and index_session() after appends. search() indexes a session
    it has never seen on first use.
    """

    def _default_ledger(self, data_dir: Path) -> Ledger:
        return Ledger(data_dir)

    # Read from this module at call time, so that patching storage.files.retrieval.db.plan_rows or
    # storage.files.retrieval.db.PURGE_WAIT_S (as tests do) changes what every Index does.
    def _plan(
        self,
        *,
        num: int,
        events: Sequence[Event],
        seen: set[str],
        prior: Sequence[tuple[int, str]],
        before: int = 0,
        after: int = 0,
    ) -> Plan:
        return plan_rows(num=num, events=events, seen=seen, prior=prior, before=before, after=after)

    def _purge_wait_s(self) -> float:
        return PURGE_WAIT_S

    # -- the storage contract (storage.api.SearchIndex) ----------------------------------------------------------
    def drop_session(self, session: str) -> None:
        """A deleted session's rows gone and purged (purge_session). While the ledger still holds the session,
        nothing: control runs this before and after the ledger's deletion (PostgreSQL drops its rows both times;
        here the purge needs the ledger's deletion first). PurgeIncomplete as purge_session."""
        if not self.ledger.exists(session):
            self.purge_session(session)

    def scrub_copies(self) -> tuple[str, ...]:
        """Every index moved aside as unreadable (`index.sqlite.corrupt-*` and its -wal/-shm) overwritten and removed;
        their names. Its words cannot be searched for reliably (stemmed, in FTS segments), and it is derived data —
        the index in use was rebuilt from the ledgers."""
        from storage.common.scrub import scrub_prefixed

        return scrub_prefixed(self.data_dir, INDEX_COPY_PREFIX)


__all__ = [
    "BUSY_MS",
    "CHUNK",
    "GENESIS_HEX",
    "INDEX_FILE",
    "PURGE_WAIT_S",
    "RACE_ATTEMPTS",
    "SCAN_BATCH",
    "TAIL_BY_OFFSET",
    "ZEROED",
    "Housekeeping",
    "Index",
    "IndexFile",
    "Indexing",
    "Progress",
    "Searching",
    "candidate",
    "candidates_for",
    "plan_rows",
]
