"""RETENTION_HOURS: delete sessions nobody has written to for more than N hours (I/O).

Off by default. For a public Space it bounds how long a visitor's words are
kept: a session goes (control.forget.forget_session_if_idle, which leaves a
certificate of hashes in DATA_DIR/erasures/) once its ledger has been idle for N hours, with its
auditor cache (in the verifier's cache folder, storage.files.receipts.audit.cache_dir), its Merkle tree and its receipts; the index rows follow on the
same sweep (Index.catch_up drops sessions that left the ledger). Gradio's own
file cache (uploads, download copies) is bounded too: see config.delete_cache.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path

from chat.engine import Engine
from control.forget import forget_session_if_idle
from control.plan import PlanError

log = logging.getLogger("webui.retention")
OFF = {"", "0", "off", "false", "no", "none"}


def parse_hours(value: str | float | None) -> float | None:
    """None (off) or a positive number of hours. Anything else is refused: a typo must not mean "keep forever"."""
    if value is None:
        return None
    if isinstance(value, str):
        if value.strip().lower() in OFF:
            return None
        try:
            hours = float(value)
        except ValueError:
            raise ValueError(f"RETENTION_HOURS {value[:40]!r}: must be a positive number of hours, or 0/off") from None
    else:
        hours = float(value)
    if hours == 0:
        return None
    if not math.isfinite(hours) or hours < 0:
        raise ValueError(f"RETENTION_HOURS {value!r}: must be a positive number of hours, or 0/off")
    return hours


def idle_sessions(data_dir: Path, hours: float, now: float, engine: Engine) -> list[str]:
    """The sessions of the engine's stores last written more than `hours` before `now` (LedgerStore.idle_sessions:
    on files every folder under DATA_DIR/sessions by its events file's mtime, on PostgreSQL by its last write).
    `data_dir`: the engine's (kept for callers)."""
    return engine.ledger.idle_sessions(now - hours * 3600)


def forget_if_idle(engine: Engine, session: str, cutoff: float) -> bool:
    """Forget one session if its ledger was last written before `cutoff` (re-checked under its turn lock, so a
    session written to meanwhile is kept), as `control.forget.forget_session` does: it leaves a certificate
    holding only hashes in DATA_DIR/erasures/. A session with no events has nothing to certify: deleted as before."""
    try:
        done = forget_session_if_idle(
            engine.data_dir, session, cutoff, key=engine.key, stores=engine.stores
        )
    except PlanError:
        return engine.forget(session, idle_before=cutoff)
    return done is not None


def sweep(engine: Engine, hours: float | None, now: float | None = None) -> list[str]:
    """Forget every session idle for more than `hours` (forget_if_idle); return their ids. Does nothing when off."""
    if hours is None:
        return []
    now = time.time() if now is None else now
    cutoff = now - hours * 3600
    deleted = [s for s in idle_sessions(engine.data_dir, hours, now, engine) if forget_if_idle(engine, s, cutoff)]
    if deleted:
        log.info("retention: deleted %d session(s) idle for more than %g hours", len(deleted), hours)
    return deleted


class Sweeper(threading.Thread):
    """Runs `jobs` every `interval` seconds until stopped; a failing job is logged, never fatal."""

    def __init__(self, jobs: list[Callable[[], object]], interval: float) -> None:
        super().__init__(name="mre-sweeper", daemon=True)
        self.jobs = jobs
        self.interval = interval
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            self.run_once()

    def run_once(self) -> None:
        for job in self.jobs:
            try:
                job()
            except Exception as exc:  # noqa: BLE001 - a sweep failing must not stop the next one
                log.error("sweeper: a job failed (%s)", type(exc).__name__)  # no message: it may quote a file's text

    def stop(self) -> None:
        self._stop_event.set()
