"""Review (issue 14): the control state on PostgreSQL trusts the `events.role` column, which no check reads.

control.revocation.current derives a PostgreSQL session's state from the rows `WHERE role = 'system'`
(sql.CONTROL_SYSTEM_LINES). The role column is a copy of the line's role, outside the chain: `ledger verify` and
receipts verify --data walk the lines only. Whoever can write the table flips a revoke row's role to 'user' and the
revoked memory is back in retrieval (and in the model's prompt), while every verification still passes; on files
the state is derived from the line bytes themselves.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chat.engine import Engine
from chat.llm import LLM
from control import revocation
from control.state import derive
from storage.stores import pg_stores

S = "alice"


@pytest.mark.pg
def test_a_revoke_stays_in_force_when_its_rows_role_column_is_edited(tmp_path: Path, pg_url: str) -> None:
    with pg_stores(pg_url, tmp_path, pool_size=2) as stores:
        eng = Engine(tmp_path, llm=LLM(api_key=""), stores=stores)
        m = eng.remember(S, "The garage door code is 4455")
        eng.remember(S, "I bought a new bicycle")
        done = revocation.revoke(tmp_path, S, m.seq, stores=stores, key=eng.key)
        control_seq = stores.ledger.head(S)[0] - 1
        assert revocation.current(stores.ledger, S).revoked.keys() == {m.seq}
        with stores.database.transaction() as conn:  # type: ignore[union-attr]
            conn.execute("UPDATE events SET role = 'user' WHERE session = %s AND seq = %s", (S, control_seq))
        revocation._cache.clear()  # another replica, or this app after a restart
        assert stores.ledger.verify(S).ok  # the lines are untouched: every check passes
        from_lines = derive(list(stores.ledger.events(S)))
        state = revocation.current(stores.ledger, S)
        assert (set(from_lines.revoked), set(state.revoked)) == ({m.seq}, {m.seq}), done
        hits = [h.seq for h in stores.index.search(S, "garage door code", 8, exclude_seqs=state.excluded()).results]
        assert m.seq not in hits
