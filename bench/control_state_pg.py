"""The control state (revocations, supersessions) of one PostgreSQL session: how long control.revocation.current takes.

    python bench/control_state_pg.py [--events 100000] [--database-url URL]

On PostgreSQL nothing is persisted (no control-state.json): a process's first `current()` derives the state from
the session's role 'system' rows, which the server selects (storage.pg.control_rows); later calls are a cache
hit (one head query) or extend the cache by the system rows after it. Raw baseline, same run: derive() over
every event read and parsed (what a derivation without the role filter costs). Three revokes are made (near the
start, the middle, the end); the states are checked equal. Without --database-url a throwaway server is started
(tests/pg_support.py) and stopped; with one, a session named bench-control-<pid> is written there.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench._machine import machine_line  # noqa: E402
from bench.common import pg_database  # noqa: E402
from control import revocation  # noqa: E402
from control.revocation import current, revoke  # noqa: E402
from control.state import derive  # noqa: E402
from ledger.messages import Message  # noqa: E402
from storage.stores import pg_stores  # noqa: E402


def _ms(f: object) -> tuple[float, object]:
    t = time.perf_counter()
    out = f()  # type: ignore[operator]
    return (time.perf_counter() - t) * 1000, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    args = ap.parse_args()
    n, session = args.events, f"bench-control-{os.getpid()}"
    print(machine_line())
    with pg_database(args.database_url) as url, tempfile.TemporaryDirectory() as d, pg_stores(url, Path(d)) as st:
        led = st.ledger
        for i in range(0, n, 10_000):
            led.append_many(session, [Message("user" if j % 2 == 0 else "assistant", f"message {j} about things {j % 97}", {}) for j in range(i, min(n, i + 10_000))])
        for seq in (10, n // 2, n - 10):
            revoke(d, session, seq, stores=st)
        revocation._cache.clear()  # a fresh process
        first, a = _ms(lambda: current(led, session))
        hit, _ = _ms(lambda: current(led, session))
        led.append(session, "user", "one more")
        extended, _ = _ms(lambda: current(led, session))
        full, r = _ms(lambda: derive(led.events(session)))
        size = led.head(session)[0]
        assert a.revoked == r.revoked, "the state differs from a replay"  # type: ignore[union-attr, attr-defined]
    print(f"{'events':>10} {'first (system rows)':>20} {'cache hit':>10} {'extended by 1':>14} {'raw: every line parsed':>23}")
    print(f"{size:>10} {first:>17.0f} ms {hit:>7.1f} ms {extended:>11.1f} ms {full:>20.0f} ms")


if __name__ == "__main__":
    main()
