"""A tlog-proof and the event's ledger line as evidence (`receipts verify-proof PROOF EVENTLINE --vkey KEY [--policy
FILE]`, and `mre receipt verify-proof`; docs/FORMAT.md §22, §22.1): a witnessed receipt's proof carries its
cosignatures, the policy checks them, and a byte changed in the proof, the event line or the note fails a row that
names what failed (or is one line, exit 2, naming the file) — never a pass."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from cli import prog_receipts as receipts_cli
from receipts import note as N
from receipts import tlog_proof as T
from receipts.body import parse_receipt
from receipts.keys import SigningKey

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
KEY = SigningKey.from_seed(hashlib.sha256(b"mre test vector signing key").digest())  # the receipt vectors' key
VKEY = N.verifier(KEY.public_key).vkey()
WITNESSED = parse_receipt((VECTORS / "receipt_v2_witnessed.json").read_bytes())
LINES = (VECTORS / "receipt_v2_witnessed_ledger.jsonl").read_text().splitlines()
POLICY = VECTORS / "witness_v1.policy"
SEQ = 0  # memory#1 of the witnessed vector


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    proof = tmp_path / "m.tlog-proof"
    proof.write_text(T.tlog_proof_for(WITNESSED, SEQ, KEY))
    event = tmp_path / "ev.jsonl"
    event.write_text(LINES[SEQ] + "\n")
    return {"proof": proof, "event": event, "root": tmp_path}


def _run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    capsys.readouterr()
    code = receipts_cli.main([str(a) for a in argv])
    return (code, *capsys.readouterr())


def _failed_rows(out: str) -> set[str]:
    return {line.split("FAIL", 1)[1].strip().split(":", 1)[0] for line in out.splitlines() if line.strip().startswith("FAIL")}


def test_a_witnessed_receipts_proof_carries_its_cosignature_after_the_logs_signature() -> None:
    note = N.parse_note(T.parse_tlog_proof(T.tlog_proof_for(WITNESSED, SEQ, KEY)).checkpoint)
    assert [s.name for s in note.signatures] == [N.key_name(KEY.key_id), "witness.example/w1"]


def test_an_unwitnessed_receipts_proof_is_the_committed_vector_byte_for_byte() -> None:
    v2 = parse_receipt((VECTORS / "receipt_v2.json").read_bytes())
    assert T.tlog_proof_for(v2, 2, KEY) == (VECTORS / "note_v1_seq2.tlog-proof").read_text()


def test_under_the_policy_the_witness_and_the_quorum_pass(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "verify-proof", files["proof"], files["event"], "--policy", POLICY)
    assert code == 0 and "verdict: VERIFIED" in out and "witness.w1" in out and "witness.quorum" in out, out
    code, out, _ = _run(capsys, "verify-proof", files["proof"], files["event"], "--vkey", VKEY, "--json")
    assert code == 0 and "witness.w1" not in out  # without a policy the cosignature is not judged


def test_the_mre_twin_takes_the_policy(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    from cli.main import main

    capsys.readouterr()
    code = main(["receipt", "verify-proof", str(files["proof"]), str(files["event"]), "--policy", str(POLICY)])
    assert code == 0 and capsys.readouterr().out == _run(capsys, "verify-proof", files["proof"], files["event"], "--policy", POLICY)[1]


def _flip_in(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def test_a_changed_hash_in_the_proof_fails_the_inclusion_row(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    text = files["proof"].read_text()
    h = text.split("\n")[2]  # the first hash line
    files["proof"].write_text(_flip_in(text, h + "\n", ("B" if h[0] == "A" else "A") + h[1:] + "\n"))
    code, out, _ = _run(capsys, "verify-proof", files["proof"], files["event"], "--policy", POLICY)
    assert code == 1 and _failed_rows(out) == {"proof.inclusion"}, out


def test_a_changed_index_fails_the_index_and_the_inclusion(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    files["proof"].write_text(_flip_in(files["proof"].read_text(), "index 0\n", "index 1\n"))
    code, out, _ = _run(capsys, "verify-proof", files["proof"], files["event"], "--vkey", VKEY)
    assert code == 1 and _failed_rows(out) == {"event.index", "proof.inclusion"}, out


def test_a_changed_event_text_fails_the_digest_row(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    files["event"].write_text(_flip_in(files["event"].read_text(), "puppy", "puppz"))
    code, out, _ = _run(capsys, "verify-proof", files["proof"], files["event"], "--vkey", VKEY)
    assert code == 1 and "event.digest" in _failed_rows(out), out


def test_a_changed_root_in_the_note_fails_the_signature_row(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    text = files["proof"].read_text()
    note = text.split("\n\n", 1)[1]
    root = note.split("\n")[2]
    files["proof"].write_text(_flip_in(text, "\n" + root + "\n", "\n" + ("B" if root[0] == "A" else "A") + root[1:] + "\n"))
    code, out, _ = _run(capsys, "verify-proof", files["proof"], files["event"], "--vkey", VKEY)
    assert code == 1 and "note.signature" in _failed_rows(out), out


def test_a_changed_cosignature_fails_the_witness_row_and_the_quorum(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    text = files["proof"].read_text()
    line = text.rstrip("\n").split("\n")[-1]
    assert line.startswith("\u2014 witness.example/w1 ")
    sig = line.rsplit(" ", 1)[1]
    bad = sig[:40] + ("B" if sig[40] == "A" else "A") + sig[41:]
    files["proof"].write_text(_flip_in(text, sig, bad))
    code, out, _ = _run(capsys, "verify-proof", files["proof"], files["event"], "--policy", POLICY)
    assert code == 1 and _failed_rows(out) == {"witness.w1", "witness.quorum"}, out


def _outcome(capsys: pytest.CaptureFixture[str], proof: Path, event: Path) -> tuple[int, set[str], str]:
    code, out, err = _run(capsys, "verify-proof", proof, event, "--policy", POLICY)
    return code, _failed_rows(out), err


def test_every_byte_of_the_proof_flipped_is_a_failed_row_or_a_one_line_refusal(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """Every byte of the .tlog-proof (hashes, index, the note, its log signature and the cosignature), lowest bit
    flipped: exit 1 with a failed row, or exit 2 with one line naming the proof file; never a pass, never a traceback."""
    raw = files["proof"].read_bytes()
    bad = files["root"] / "bad.tlog-proof"
    slipped = []
    for i in range(len(raw)):
        bad.write_bytes(raw[:i] + bytes([raw[i] ^ 1]) + raw[i + 1 :])
        code, failed, err = _outcome(capsys, bad, files["event"])
        if not ((code == 1 and failed) or (code == 2 and err.count("\n") == 1 and str(bad) in err)):
            slipped.append((i, code, failed, err))
    assert slipped == []


def test_every_byte_of_the_event_line_flipped_is_a_failed_row_or_a_one_line_refusal(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    raw = files["event"].read_bytes().rstrip(b"\n")
    bad = files["root"] / "bad.jsonl"
    slipped = []
    for i in range(len(raw)):
        bad.write_bytes(raw[:i] + bytes([raw[i] ^ 1]) + raw[i + 1 :] + b"\n")
        code, failed, err = _outcome(capsys, files["proof"], bad)
        if not ((code == 1 and failed) or (code == 2 and err.count("\n") == 1 and str(bad) in err)):
            slipped.append((i, code, failed, err, json.dumps(raw[max(0, i - 10) : i + 10].decode("utf-8", "replace"))))
    assert slipped == []


def test_a_bad_policy_is_one_line_exit_2(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    junk = files["root"] / "junk.policy"
    junk.write_text("quorum w9\n")
    code, out, err = _run(capsys, "verify-proof", files["proof"], files["event"], "--policy", junk)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
