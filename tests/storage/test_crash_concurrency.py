"""Crash safety (SIGKILL mid-append) and one linear chain under concurrent writers."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from storage.files.ledger.store import Ledger

ROOT = Path(__file__).resolve().parents[2]
KILLS = 100

APPENDER = r"""
import sys
sys.path.insert(0, sys.argv[1])
from storage.files.ledger.store import Ledger
led = Ledger(sys.argv[2])
tag = sys.argv[3]
count = int(sys.argv[4])
out = sys.stdout
i = 0
while count < 0 or i < count:
    ev = led.append("s1", "user", f"{tag} message {i} " + "x" * (i % 300), {"i": i})
    out.write(ev.digest + "\n")
    out.flush()
    i += 1
"""


def spawn_appender(data: Path, tag: str, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", APPENDER, str(ROOT), str(data), tag, str(count)],
        stdout=subprocess.PIPE,
        text=True,
    )


def test_sigkilled_appender_loses_no_acknowledged_event_and_chain_verifies(tmp_path: Path) -> None:
    rng = random.Random(7)
    acknowledged: list[str] = []
    quarantined = 0
    for k in range(KILLS):
        child = spawn_appender(tmp_path, f"run{k}", -1)
        assert child.stdout is not None
        # wait until it has appended at least once, then kill it at a random moment
        first = child.stdout.readline()
        time.sleep(rng.uniform(0, 0.03))
        child.send_signal(signal.SIGKILL)
        rest = child.stdout.read()
        child.wait(timeout=10)
        acked = [line for line in (first + rest).splitlines() if len(line) == 64]
        acknowledged.extend(acked)
        led = Ledger(tmp_path)  # a fresh process view: recovery runs on open
        count, _ = led.head("s1")
        quarantined += len(led.quarantined)
        assert count >= len(acknowledged), f"kill {k}: {len(acknowledged)} acknowledged but {count} present"
    led = Ledger(tmp_path)
    report = led.verify("s1")
    assert report.ok, report.brk
    present = {e.digest for e in led.events("s1")}
    missing = [d for d in acknowledged if d not in present]
    assert missing == []
    # any torn tail seen along the way was moved aside, never dropped
    assert len(report.quarantined) == quarantined


def test_four_processes_appending_to_one_session_make_one_linear_chain(tmp_path: Path) -> None:
    children = [spawn_appender(tmp_path, f"p{n}", 250) for n in range(4)]
    digests: list[str] = []
    for child in children:
        out, _ = child.communicate(timeout=120)
        assert child.returncode == 0
        digests.extend(out.split())
    led = Ledger(tmp_path)
    report = led.verify("s1")
    assert report.ok and report.events == 1000
    events = list(led.events("s1"))
    assert [e.seq for e in events] == list(range(1000))
    assert sorted(e.digest for e in events) == sorted(digests)
    assert all(events[i].prev == events[i - 1].chain for i in range(1, 1000))


def test_threads_appending_to_different_sessions_and_one_shared_session(tmp_path: Path) -> None:
    led = Ledger(tmp_path)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(50):
                led.append(f"own{n}", "user", f"{i}")
                led.append("shared", "user", f"{n}-{i}")
        except BaseException as exc:  # pragma: no cover - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert led.verify("shared").events == 200
    assert all(led.verify(f"own{n}").events == 50 for n in range(4))
    assert os.path.isdir(tmp_path / "sessions" / "shared")
