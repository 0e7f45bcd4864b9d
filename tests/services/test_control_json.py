"""`python -m control forget --json`: what was erased and the certificate's path, for a script; refusals stay one
line on stderr with nothing on stdout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli.prog_control import main as control_main
from storage.files.ledger.store import Ledger
from storage.files.receipts import files

from ..forget_support import MARKER, engine, marked_session


@pytest.fixture
def session(tmp_path: Path) -> tuple[Path, int, Any]:
    data = tmp_path / "data"
    eng = engine(data)
    mem_seq, turns = marked_session(eng)
    eng.index.close()
    eng.ledger.close()
    return data, mem_seq, turns


def test_json_lists_what_was_erased_and_the_certificate_path(session: tuple[Path, int, Any], capsys: pytest.CaptureFixture[str]) -> None:
    data, mem_seq, turns = session
    receipt_ids = sorted(p.stem for p in files.list_receipts(data, "alice"))
    sdir = data / "sessions" / "alice"
    (sdir / "events.jsonl.cut-9-20261203T101500Z").write_bytes(Ledger(data).read_events("alice", [mem_seq])[0].to_line())
    assert control_main(["forget", str(data), "alice", str(mem_seq), "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    answers = sorted(t.assistant_event.seq for t in turns)
    assert out["scope"] == "events" and out["session"] == "alice" and out["named"] == [mem_seq]
    assert out["cascaded"] == answers
    assert out["erased"] == [{"seq": s, "role": "user" if s == mem_seq else "assistant"} for s in sorted([mem_seq, *answers])]
    assert out["record_seq"] == Ledger(data).head("alice")[0] - 1
    assert out["receipts"] == {"redacted": receipt_ids, "withdrawn": []}
    assert out["quarantine_removed"] == ["events.jsonl.cut-9-20261203T101500Z"] and out["imports_dropped"] == 0
    cert = Path(out["certificate"])
    assert cert.parent == data / "erasures" and cert.is_file()
    assert MARKER.lower() not in captured.out.lower() and captured.err == ""


def test_json_for_a_whole_session_gives_its_count_and_certificate(session: tuple[Path, int, Any], capsys: pytest.CaptureFixture[str]) -> None:
    data = session[0]
    count, _head = Ledger(data).head("alice")
    assert control_main(["forget", str(data), "alice", "--all", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["scope"] == "session" and out["events"] == count and "erased" not in out
    assert Path(out["certificate"]).is_file() and not (data / "sessions" / "alice").exists()


def test_json_refusal_is_one_line_on_stderr_and_nothing_on_stdout(session: tuple[Path, int, Any], capsys: pytest.CaptureFixture[str]) -> None:
    data = session[0]
    assert control_main(["forget", str(data), "alice", "999", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "no event at seq 999" in captured.err
