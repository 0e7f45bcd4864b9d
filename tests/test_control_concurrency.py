"""Two processes on one session: one keeps taking turns (chat engine, offline stand-in) while the other runs
`python -m control forget`. The turner goes on until it has seen the certificate and three turns more, so turns
land on both sides of the erasure (test_control_strong's in-process variant cannot promise that): no acknowledged
event is lost, nothing forks, the ledger verifies, every receipt left verifies against it, the turns after the
erasure never cite the forgotten memory, and no file holds its words."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from receipts.disclose import cited_seqs
from receipts.verify import FAIL
from storage.files.ledger.store import Ledger
from storage.files.receipts import files
from storage.files.receipts.api import verify_bytes

from .forget_support import engine, files_with_marker, marked_session

ROOT = Path(__file__).resolve().parents[1]

TURNER = r"""
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[1] + "/tests")
from forget_support import engine
data = Path(sys.argv[2])
eng = engine(data)
after, i = None, 0
while after is None or after < 3:
    t = eng.turn("alice", f"What is my locker code word? (try {i})")
    print(t.user_event.seq, t.user_event.digest, t.assistant_event.seq, t.assistant_event.digest, t.receipt_id, flush=True)
    i += 1
    if after is not None:
        after += 1
    elif list((data / "erasures").glob("erasure-*.json")):
        after = 0
    if i > 400:
        sys.exit("the certificate never appeared")
"""


def test_a_cli_forget_while_another_process_keeps_taking_turns_loses_nothing_and_forgets_completely(tmp_path: Path) -> None:
    data = tmp_path / "data"
    eng = engine(data)
    mem_seq, _turns = marked_session(eng)
    before, _ = eng.ledger.head("alice")
    key = eng.key.public_key
    eng.index.close()
    eng.ledger.close()
    turner = subprocess.Popen([sys.executable, "-c", TURNER, str(ROOT), str(data)], stdout=subprocess.PIPE, text=True)
    assert turner.stdout is not None
    first = turner.stdout.readline()
    assert first, "the turner must have taken a turn"
    forgetter = subprocess.run(
        [sys.executable, "-m", "control", "forget", str(data), "alice", str(mem_seq), "--json"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    rest = turner.stdout.read()
    assert turner.wait(timeout=120) == 0
    assert forgetter.returncode == 0, forgetter.stderr
    out = json.loads(forgetter.stdout)
    rows = [line.split() for line in (first + rest).splitlines()]
    record = out["record_seq"]
    assert any(int(r[0]) > record for r in rows), "turns must have landed after the erasure record"
    led = Ledger(data)
    report = led.verify("alice")
    assert report.ok and report.events == before + 2 * len(rows) + 1  # every turn and one erasure record: no fork
    by_seq = {ev.seq: ev for ev in led.events("alice")}
    for user_seq, user_digest, asst_seq, asst_digest, _rid in rows:  # every acknowledged event, where it was acked
        assert by_seq[int(user_seq)].digest == user_digest and by_seq[int(asst_seq)].digest == asst_digest
    assert mem_seq in report.erased and {e["seq"] for e in out["erased"]} <= set(report.erased)
    for _u, _ud, asst_seq, _ad, rid in rows:
        path = files.receipt_path(data, "alice", rid)
        if rid in out["receipts"]["withdrawn"]:
            continue
        checked = verify_bytes(path.read_bytes(), trusted=[key], data_dir=data)
        assert checked.verdict == "verified", (rid, [c for c in checked.checks if c.status == FAIL])
        if int(asst_seq) > record:  # asked after the erasure: the forgotten memory is never cited
            assert mem_seq not in cited_seqs(files.read_receipt_bytes(path))
    assert files_with_marker(data) == []
