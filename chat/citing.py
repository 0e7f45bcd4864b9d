"""Which answers may quote a revoked or superseded memory, so that retrieval leaves them out with it (I/O).

An answer may repeat what its turn handed the model (the offline stand-in quotes every memory; a model
paraphrases). So while an event is revoked, retrieval leaves out every answer whose turn cited it — its
question or one of its memories — and every answer citing one of those (control.state.quoting_answers),
for exactly as long as the revocation is in force: a restore brings them back with it. The same closure keeps
out the answers that cited a superseded statement (issue 12): "which city do I live in?" answered by quoting
"I live in Leeds" must not bring Leeds back once "we've just moved to Bristol" superseded it (chat.engine).

What each turn cited is kept in the derived `receipt_cites` rows (index.sqlite's table, or PostgreSQL's): the turn
writes it right after appending its answer; an index without it (new, rebuilt or moved aside) is
refilled from the receipt files when the engine starts; and once per session and process, the `.cites`
records that turns left behind (killed before their receipt, or whose receipt failed) are added, so an
answer without a receipt is left out like any other. With nothing revoked or superseded none of this is read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from control.state import quoting_answers
from control.steps import unreceipted
from receipts.body import parse_receipt
from receipts.stores import cited_seqs
from storage.stores import Stores

log = logging.getLogger("chat")
Why = TypeVar("Why")  # what keeps a cited event out: a Revocation, or a supersession (control.supersession_state)


class Cites:
    """The engine's view of `receipt_cites` for one deployment's stores (index.sqlite's table, or PostgreSQL's)."""

    def __init__(self, stores: Stores) -> None:
        self.stores = stores
        self.ledger, self.index, self.backend, self.rows = stores.ledger, stores.index, stores.receipts, stores.rows
        self._lock = threading.Lock()
        self._complete: set[str] = set()  # sessions whose rows this process has checked whole (at `_generation`)
        self._generation = -1  # the index file's generation those checks were made at
        self._filled = -1  # the generation at which every receipt file was in the table (Engine start)

    def filled(self, generation: int) -> None:
        """The engine refilled the table from every receipt file (or found it filled) at this index generation."""
        self._filled = generation

    def record(self, session: str, receipt_id: str, answer_seq: int, cited: Iterable[int]) -> None:
        """The turn that wrote the answer at `answer_seq` handed the model `cited` (its question and memories)."""
        self.rows.record_cites(session, receipt_id, answer_seq, cited)

    def add_receipt(self, session: str, receipt_id: str, body: Mapping[str, Any]) -> None:
        """The rows of one stored receipt (its signed body)."""
        self.record(session, receipt_id, *cited_seqs(body))

    def quoting(self, session: str, held: Mapping[int, Why]) -> dict[int, Why]:
        """answer seq -> what keeps out the lowest seq of `held` it may quote (the revocation in force, or the
        supersession of a dead statement), for every answer that cited one of `held` or such an answer."""
        if not held:
            return {}
        self._make_whole(session)
        found = quoting_answers(held, lambda seqs: self.rows.citing_answers(session, seqs))
        return {answer: held[root] for answer, root in found.items()}

    def unattributed(self, session: str, after_seq: int) -> list[int]:
        """The indexed events after `after_seq` that are not the person's own (assistant, system or tool lines) and
        that no turn's cites account for — lines imported into the session (`ledger import`, with --allow-system a
        system line too), or written by code that kept no record: what they may quote is unknown. User lines are the
        person's own statements: a revoke names them directly."""
        self._make_whole(session)
        answers = self.index.non_user_seqs(session, after_seq)
        if not answers:
            return []
        known = self.rows.answered(session, after_seq)
        return [a for a in answers if a not in known]

    def forget(self, session: str) -> None:
        """The session was deleted (its rows with it): a new one of that name starts unchecked."""
        with self._lock:
            self._complete.discard(session)

    def _make_whole(self, session: str) -> None:
        """On every call: add the `.cites` records turns left behind (any process's); and, once per session and index
        generation on files, when the index file was opened anew since the engine started (moved aside, replaced: its
        derived tables are empty), the session's receipt files again."""
        # the derived tables' generation (the file backend's index file: they start empty in a new one); None on
        # PostgreSQL, whose rows are the record and never start over
        generation = self.rows.derived_generation()
        with self._lock:
            if generation is not None and generation != self._generation:
                self._complete.clear()
                self._generation = generation
            if session not in self._complete and generation is not None and generation != self._filled:
                for receipt_id in self.backend.receipt_ids(session):
                    try:
                        receipt = parse_receipt(self.backend.read_receipt(session, receipt_id))
                    except (ValueError, OSError) as exc:
                        log.warning("%s: not read into receipt_cites (%s)", receipt_id, type(exc).__name__)  # an error may quote a field
                        continue
                    self.add_receipt(session, receipt.receipt_id, receipt.signed_body)
            # the `.cites` records are read on every call, on both backends: another process on the same DATA_DIR
            # (the CLI, a second app) or replica may leave one at any time, killed between its answer and its receipt,
            # and an answer whose cites this process never learnt would carry a revoked memory to the model. Few
            # files or rows: a turn removes its own once its receipt is written.
            for c in unreceipted(self.stores.data_dir, session, self.ledger, backend=self.backend):
                self.record(session, c.receipt_id, c.response_seq, [s for s, name in c.cited.items() if name != "response"])
            if generation is not None:
                self._complete.add(session)  # the receipt files were read into the table once for this generation
