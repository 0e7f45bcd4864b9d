"""The ledger: `Ledger`, all sessions under one data directory, and the names callers import from here.

`Ledger` is assembled from one room per concern, each its own module:

- ledger/sessions.py — where each session's files are, its writer lock, the descriptors kept open;
- ledger/recovery.py — the writer's tail: open (tail record or walk), follow other writers, quarantine a
  torn tail, refuse a corrupted ledger (`open_session`, `head`);
- ledger/appending.py — the durable append path (`append`, `append_many`; `import_jsonl`, below, appends
  what ledger/importer.py staged);
- ledger/erasing.py — erasure (`erase`);
- ledger/reading.py — reads and verification (`events`, `read_events`, `verify`).

Every name other code imports from `ledger.store` is still here.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from typing import Any

from ledger import importer
from ledger.appending import Appended as Appended
from ledger.appending import Appending
from ledger.appending import _random_ids as _random_ids
from ledger.erasing import MAX_ERASE as MAX_ERASE
from ledger.erasing import MAX_REASON as MAX_REASON
from ledger.erasing import MAX_RECORD_ENTRIES as MAX_RECORD_ENTRIES
from ledger.erasing import EraseError as EraseError
from ledger.erasing import Erasing
from ledger.erasing import Erasure as Erasure
from ledger.importer import Imported
from ledger.messages import ImportError_ as ImportError_
from ledger.messages import Message as Message
from ledger.messages import parse_import as parse_import
from ledger.messages import validate_message as validate_message
from ledger.reading import BISECT_MAX as BISECT_MAX
from ledger.reading import Reading
from ledger.recovery import RECORD_MIN_LINES as RECORD_MIN_LINES
from ledger.recovery import LedgerCorrupted as LedgerCorrupted
from ledger.recovery import Quarantine as Quarantine
from ledger.sessions import EVENTS_FILE as EVENTS_FILE
from ledger.sessions import MAX_OPEN_SESSIONS as MAX_OPEN_SESSIONS
from ledger.sessions import _fsync_dir as _fsync_dir
from ledger.sessions import _write_all as _write_all


class Ledger(Appending, Erasing, Reading):
    """All sessions under one data directory.

    Safe for many threads; one writer per session at a time across threads and
    processes (flock on the session's `lock` file).

    `record_tails=False` is a reader's ledger: it never writes a session's tail record
    (ledger/tailrecord.py), so a command that only reads leaves the data directory as it found
    it; opening a session without a current record then walks it, as it would anyway.
    """

    def import_jsonl(
        self, session: str, lines: Iterable[bytes], progress: Any = None, *, allow_system: bool = False, workers: int | None = None
    ) -> Imported:
        """Validate every line of an import file, then append them all in one batch (ledger/importer.py).

        Role "system" is refused unless `allow_system`: an imported line would
        reach the model labelled as the app's own instruction. Files of 100,000
        lines or more are encoded in worker processes when the machine has a core to spare
        (`workers`: how many; 0: none; default: importer.workers_for).
        """
        # Millions of small acyclic objects: the cyclic GC would only re-scan them.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            staged = importer.stage(self, session, lines, progress, allow_system=allow_system, workers=workers)
            return importer.commit(self, staged)
        finally:
            if was_enabled:
                gc.enable()
