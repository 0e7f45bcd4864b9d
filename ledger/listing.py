"""`python -m ledger list`: one row per session — events, last activity, verified or where it breaks.

Reads only: every session is verified from genesis (Ledger.verify), and its file is read once more
to count its lines and take the `ts` of the last one. Nothing is recovered or written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from ledger.verify import SessionReport

READ_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class SessionSummary:
    session: str
    lines: int  # complete lines in events.jsonl: its events, when it verifies
    last_ts: str | None  # the `ts` of the last complete line (None when it has none that reads)
    report: SessionReport

    @property
    def ok(self) -> bool:
        return self.report.ok

    def to_dict(self) -> dict[str, Any]:
        brk = self.report.brk
        return {
            "session": self.session,
            "events": self.lines,
            "last_activity": self.last_ts,
            "verified": self.report.ok,
            "verified_events": self.report.events,
            "break": None if brk is None else brk.to_dict(),
            "quarantined": list(self.report.quarantined),
        }


def last_ts(line: bytes | None) -> str | None:
    if line is None:
        return None
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    ts = obj.get("ts") if isinstance(obj, dict) else None
    return ts if isinstance(ts, str) else None


