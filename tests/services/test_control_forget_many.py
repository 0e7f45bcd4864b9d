"""control.forget of a memory cited by many answers: the cascade erases them all in one transaction (one erasure
record per 64 events, all in one rename), the certificate covers every record, a crash at any rewrite step is
finished or dropped by recover, and a forget over the cap is refused with one line."""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import control.plan
from cli.prog_control import main as control_main
from cli.prog_receipts import main as receipts_main
from control.forget import forget, pending, recover
from control.plan import PlanError
from receipts.keys import format_public_key
from storage.common.keyfiles import load_or_create
from storage.files.ledger.store import Ledger
from storage.files.receipts.api import verify_bytes

from ..many_support import build, files_with_marker

ROOT = Path(__file__).resolve().parents[2]


def _body(path: Path) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(base64.b64decode(json.loads(path.read_bytes())["payload"]))
    return body


def _pubkey(data: Path, tmp_path: Path) -> Path:
    path = tmp_path / "signing.pub"
    path.write_text(format_public_key(load_or_create(data).public_key))
    return path


def test_a_memory_cited_by_149_answers_is_forgotten_with_all_of_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    led, _key, mem, answers = build(data, 149)
    count = led.head("s")[0]
    led.close()
    assert len(files_with_marker(data)) == 150  # the ledger and the 149 receipts hold it
    assert control_main(["forget", str(data), "s", str(mem)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith("session s: erased 150 event(s): seq 0 (user), 2 (assistant)") and "and 110 more" in out[0]
    assert f"  erasure records: seq {count}–{count + 2} (3 records, at most 64 events each)" in out
    cert_path = Path(out[-1].removeprefix("certificate: "))
    body = _body(cert_path)
    assert [e["seq"] for e in body["erased"]] == [mem, *answers]
    assert [len(r["event"]["meta"]["erasure"]["erased"]) for r in body["records"]] == [64, 64, 22]
    assert cert_path.name == f"erasure-s-{count + 2}.json" and body["checkpoint"]["body"]["tree_size"] == count + 3
    report = Ledger(data).verify("s", parallel=False)
    assert report.ok and report.erased == (mem, *answers)
    assert files_with_marker(data) == []
    pub = _pubkey(data, tmp_path)
    assert receipts_main(["verify", str(cert_path), "--trust", str(pub)]) == 0
    assert receipts_main(["verify", str(cert_path), "--trust", str(pub), "--data", str(data)]) == 0
    capsys.readouterr()
    trusted = [load_or_create(data).public_key]
    for rid in body["receipts"]["redacted"][::50]:  # a redacted receipt still verifies, its memory row erased
        rep = verify_bytes((data / "sessions" / "s" / "receipts" / f"{rid}.json").read_bytes(), trusted=trusted, data_dir=data)
        assert rep.verdict == "verified", rep.failed


def test_the_json_output_lists_every_record_seq(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    led, _key, mem, _answers = build(data, 70)
    count = led.head("s")[0]
    led.close()
    assert control_main(["forget", str(data), "s", str(mem), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["record_seqs"] == [count, count + 1] and out["record_seq"] == count + 1 and len(out["erased"]) == 71


def test_a_forget_over_the_cap_is_one_line_and_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    led, _key, mem, _answers = build(data, 70)
    before = led.log_path("s").read_bytes()
    led.close()
    monkeypatch.setattr(control.plan, "MAX_FORGET", 50)  # the rule, at a size a test builds quickly
    with pytest.raises(PlanError, match=r"^session s: this forget would erase 71 events \(1 named, 70 answers that cited them\); at most 50 in one forget"):
        forget(data, "s", [mem])
    assert control_main(["forget", str(data), "s", str(mem)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "at most 50 in one forget" in err
    assert Ledger(data).log_path("s").read_bytes() == before and pending(data) == []


def test_the_cap_is_the_ledgers_per_erasure_limit() -> None:
    from ledger.erasing import MAX_ERASE

    assert control.plan.MAX_FORGET == MAX_ERASE == 10_000


CRASHER = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
import storage.files.ledger.rewrite
from control.forget import forget
step = sys.argv[3]
def hook(name):
    if name == step:
        os.kill(os.getpid(), signal.SIGKILL)
storage.files.ledger.rewrite.step_hook = hook
forget(sys.argv[2], "s", [0])
print("survived")
"""


@pytest.mark.parametrize("step, erased", [("written", False), ("synced", False), ("renamed", True), ("dir_synced", True)])
def test_a_kill_at_any_rewrite_step_of_a_two_record_forget_is_finished_or_dropped_by_recover(tmp_path: Path, step: str, erased: bool) -> None:
    data = tmp_path / "data"
    led, _key, mem, answers = build(data, 70)
    count = led.head("s")[0]
    led.close()
    child = subprocess.run([sys.executable, "-c", CRASHER, str(ROOT), str(data), step], capture_output=True, text=True, timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert len(pending(data)) == 1
    written = recover(data)
    assert pending(data) == []
    report = Ledger(data).verify("s", parallel=False)
    assert report.ok, report.brk
    if not erased:  # the ledger never changed: nothing to certify, and forgetting again works
        assert written == [] and report.erased == () and report.events == count
        written = [forget(data, "s", [mem]).certificate_path]
    (cert_path,) = written
    body = _body(cert_path)
    assert [r["event"]["seq"] for r in body["records"]] == [count, count + 1]
    assert [e["seq"] for e in body["erased"]] == [mem, *answers]
    assert Ledger(data).verify("s", parallel=False).erased == (mem, *answers)
    assert files_with_marker(data) == []
    pub = _pubkey(data, tmp_path)
    assert receipts_main(["verify", str(cert_path), "--trust", str(pub), "--data", str(data)]) == 0
