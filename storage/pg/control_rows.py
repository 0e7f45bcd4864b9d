"""The control state's reads on PostgreSQL (control.revocation.current): the session's role 'system' lines.

On files control.revocation finds control events by a byte search of the log; here the server returns only the
rows whose role is 'system' — every control event, supersession record and erasure record, the only lines that
change the state (sql.CONTROL_SYSTEM_LINES) — so deriving a session's state reads those rows, not every line.
"""

from __future__ import annotations

import orjson

from ledger.event import Event, event_from_dict, validate_session_id
from storage.pg import sql
from storage.pg.ledger import PgLedger


def system_events(ledger: PgLedger, session: str, start: int, stop: int) -> list[Event]:
    """The session's role 'system' events with start <= seq < stop, in seq order (the lines as stored)."""
    validate_session_id(session)
    with ledger.db.connection() as conn:
        rows = conn.execute(sql.CONTROL_SYSTEM_LINES, (session, start, stop)).fetchall()
    return [event_from_dict(orjson.loads(bytes(line)), int(seq) + 1) for seq, line in rows]


__all__ = ["system_events"]
