"""`python -m control forget`: what it prints, its last line, its refusals (exit 2, nothing changed); and
`python -m receipts verify CERT` dispatching on the certificate's payloadType with the receipt exit codes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from cli.prog_control import main as control_main
from cli.prog_receipts import main as receipts_main
from receipts import certificate as cert
from receipts.keys import format_public_key
from receipts.verify import FAIL
from storage.files.receipts import files

from ..forget_support import engine, marked_session

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
PUBKEY = VECTORS / "receipt_v1_pubkey.json"


def _snapshot(data: Path) -> dict[str, str]:
    return {str(p.relative_to(data)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(data.rglob("*")) if p.is_file()}


@pytest.fixture
def session(tmp_path: Path) -> tuple[Path, int, Any]:
    data = tmp_path / "data"
    eng = engine(data)
    mem_seq, turns = marked_session(eng)
    eng.index.close()
    eng.ledger.close()
    return data, mem_seq, turns


def test_forget_prints_what_was_erased_and_the_certificate_as_its_last_line(session: tuple[Path, int, Any], capsys: pytest.CaptureFixture[str]) -> None:
    data, mem_seq, turns = session
    assert control_main(["forget", str(data), "alice", str(mem_seq), "--reason", "asked"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith("session alice: erased ") and f"{mem_seq} (user)" in out[0]
    assert any("answers that cited them" in line and str(turns[0].assistant_event.seq) in line for line in out)
    assert out[-1].startswith("certificate: ")
    path = Path(out[-1].removeprefix("certificate: "))
    assert path.parent == data / "erasures" and path.is_file()


def test_no_cascade_erases_only_the_named_event(session: tuple[Path, int, Any], capsys: pytest.CaptureFixture[str]) -> None:
    data, mem_seq, _turns = session
    assert control_main(["forget", str(data), "alice", str(mem_seq), "--no-cascade"]) == 0
    out = capsys.readouterr().out
    assert "answers that cited them" not in out
    body = json.loads(__import__("base64").b64decode(json.loads(Path(out.strip().splitlines()[-1][13:]).read_bytes())["payload"]))
    assert [e["seq"] for e in body["erased"]] == [mem_seq]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["alice", "99"], "no event at seq 99"),
        (["alice", "x"], "not a non-negative integer"),
        (["bob", "0"], "no such session"),
        (["alice"], "say which events"),
        (["alice", "0", "--all"], "not both"),
        (["../x", "0"], "session id"),
    ],
    ids=["out-of-range", "not-a-number", "unknown-session", "nothing-named", "seqs-and-all", "bad-session-id"],
)
def test_a_bad_request_exits_2_with_one_line_and_changes_nothing(session: tuple[Path, int, Any], capsys: pytest.CaptureFixture[str], argv: list[str], words: str) -> None:
    data = session[0]
    before = _snapshot(data)
    assert control_main(["forget", str(data), *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err
    assert _snapshot(data) == before


def test_an_event_already_erased_exits_2_and_changes_nothing(session: tuple[Path, int, Any], capsys: pytest.CaptureFixture[str]) -> None:
    data, mem_seq, _turns = session
    assert control_main(["forget", str(data), "alice", str(mem_seq)]) == 0
    capsys.readouterr()
    before = _snapshot(data)
    assert control_main(["forget", str(data), "alice", str(mem_seq)]) == 2
    assert "already erased" in capsys.readouterr().err
    assert _snapshot(data) == before


def test_an_unusable_data_directory_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert control_main(["forget", str(tmp_path / "nope"), "alice", "0"]) == 2
    assert "not a data directory" in capsys.readouterr().err


def test_forget_all_deletes_the_session_and_prints_its_certificate(session: tuple[Path, int, Any], capsys: pytest.CaptureFixture[str]) -> None:
    data = session[0]
    assert control_main(["forget", str(data), "alice", "--all"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith("certificate: ") and not (data / "sessions" / "alice").exists()
    pub = data.parent / "pub.json"
    pub.write_text(format_public_key(engine(data).key.public_key))
    assert receipts_main(["verify", out[-1][13:], "--trust", str(pub), "--data", str(data)]) == 0


def test_the_certificate_verifies_with_the_cli_offline_and_against_the_data(session: tuple[Path, int, Any], capsys: pytest.CaptureFixture[str]) -> None:
    data, mem_seq, _turns = session
    assert control_main(["forget", str(data), "alice", str(mem_seq)]) == 0
    path = capsys.readouterr().out.strip().splitlines()[-1][13:]
    pub = data.parent / "pub.json"
    pub.write_text(format_public_key(engine(data).key.public_key))
    assert receipts_main(["verify", path, "--trust", str(pub)]) == 0
    assert receipts_main(["verify", path, "--trust", str(pub), "--data", str(data)]) == 0
    assert receipts_main(["verify", path, "--data", str(data)]) == 3  # the directory's own key: self-consistent only
    assert files.list_receipts(data, "alice"), "format-2 receipts are redacted, not deleted"


def test_receipts_verify_dispatches_a_certificate_with_the_receipt_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import base64

    from receipts.keys import SigningKey

    good = VECTORS / "erasure_cert_v1.json"
    assert receipts_main(["verify", str(good), "--trust", str(PUBKEY)]) == 0
    assert "verdict: VERIFIED" in capsys.readouterr().out
    assert receipts_main(["verify", str(good)]) == 3
    capsys.readouterr()
    body = json.loads(base64.b64decode(json.loads(good.read_bytes())["payload"]))
    body["erased"][0]["digest"] = "0" * 64
    bad = tmp_path / "bad.json"
    bad.write_bytes(cert.certificate_file_bytes(cert.sign_certificate(body, SigningKey.from_seed(hashlib.sha256(b"mre test vector signing key").digest()))))
    assert receipts_main(["verify", str(bad), "--trust", str(PUBKEY), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "failed" and FAIL in {c["status"] for c in out["checks"]}
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"payloadType": cert.ERASURE_PAYLOAD_TYPE, "payload": "e30=", "signatures": []}))
    assert receipts_main(["verify", str(broken)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1
