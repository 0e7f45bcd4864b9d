"""Supersessions a model suggested and the rules did not confirm: left to a person (issue 28, item 2).

A model's proposal that the rules do not read as the same subject and attribute (facts.rules.same_fact)
is never recorded as a supersession (facts.model.accept). It is kept here instead, as a suggestion a
person confirms or not: `python -m control suggestions DATA_DIR SESSION` lists the open ones, and confirming one is
recording the supersession oneself (`python -m control supersede DATA_DIR SESSION NEW OLD`, or Correct this in the
app), which records it as the visitor's decision — what it then is. A suggestion holds seqs, ids, the model's id and
when; never a statement's text, nor anything the model wrote (its label and reason may echo memory words).

Where it is kept follows the stores, as control.settings: `DATA_DIR/sessions/<session>/suggestions.json` (0600,
written atomically; it goes with the session folder), or `supersession_suggestions` rows on PostgreSQL
(storage.pg.consent.PgSuggestions; deleted with the session). `open_suggestions` leaves out what no longer applies:
a pair already recorded, an older statement superseded since, or either statement forgotten or revoked.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from control.settings import Where, _check_session
from ledger.event import now_ts
from storage.api import Suggestion as Suggestion
from storage.api import SuggestionStore as SuggestionStore
from storage.api import file_session_state

if TYPE_CHECKING:
    from storage.api import Stores

SUGGESTIONS_FILE = "suggestions.json"  # the file backend's (storage.file_state.FileSuggestions)


def suggestion_store(where: Where) -> SuggestionStore:
    """The suggestions of a data directory (files), or of a deployment's stores (either backend: SessionState)."""
    if isinstance(where, (str, os.PathLike)):
        return file_session_state(where).suggestions()
    return where.session_state.suggestions()


def keep_suggestions(where: Where, session: str, pairs: list[tuple[int, str, int, str]], suggested_by: str) -> None:
    """Keep model proposals the rules did not confirm: (new_seq, new_id, older_seq, older_id) each."""
    if not pairs:
        return
    _check_session(session)
    at = now_ts()
    suggestion_store(where).add(session, [Suggestion(n, nid, o, oid, suggested_by, at) for n, nid, o, oid in pairs])


def open_suggestions(stores: Stores, session: str) -> list[Suggestion]:
    """The session's suggestions that still apply, oldest first: not a pair recorded since, not an older statement
    superseded since, neither statement revoked or forgotten, and the ids still the ledger's."""
    from control.revocation import current

    _check_session(session)
    items = suggestion_store(stores).all(session)
    if not items:
        return []
    state = current(stores.ledger, session)
    held = state.supersessions.superseded
    seqs = sorted({s for x in items for s in (x.new_seq, x.older_seq)})
    count, _head = stores.ledger.head(session)
    events = {ev.seq: ev for ev in stores.ledger.read_events(session, [s for s in seqs if s < count])}
    out: list[Suggestion] = []
    for x in items:
        new, old = events.get(x.new_seq), events.get(x.older_seq)
        if new is None or old is None or new.id != x.new_id or old.id != x.older_id or new.erased or old.erased:
            continue
        if x.older_seq in held or x.older_seq in state.revoked or x.new_seq in state.revoked:
            continue
        out.append(x)
    return out


def drop_suggestion(where: Where, session: str, new_seq: int, older_seq: int) -> None:
    """The pair was decided (recorded by a person, or by any rule): its suggestion goes."""
    suggestion_store(where).drop(_check_session(session), new_seq, older_seq)


def forget_suggestions(where: Where, session: str) -> None:
    suggestion_store(where).forget_session(_check_session(session))


__all__ = [
    "Suggestion", "SuggestionStore", "drop_suggestion", "forget_suggestions", "keep_suggestions",
    "open_suggestions", "suggestion_store",
]
