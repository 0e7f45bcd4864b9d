"""The committed witnessed receipt vector (docs/FORMAT.md §22, "Witness cosignatures in a receipt") is reproduced byte
for byte, verifies offline and with its ledger under its policy with every row passing, and fails the witness row or
the quorum whenever the cosignature, the policy's witness key or the quorum says otherwise."""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
from pathlib import Path

from receipts.body import parse_receipt
from receipts.cosignature import parse_policy
from receipts.keys import SigningKey, parse_public_key
from receipts.verify import PASS
from storage.files.receipts.api import verify_bytes

VECTORS = Path(__file__).resolve().parent
RAW = (VECTORS / "receipt_v2_witnessed.json").read_bytes()
PUB = parse_public_key((VECTORS / "receipt_v1_pubkey.json").read_text())
POLICY = (VECTORS / "witness_v1.policy").read_text()


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("generate_witnessed", VECTORS / "generate_witnessed.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_code_reproduces_the_committed_witnessed_vector_exactly() -> None:
    files = _generator().build()
    assert set(files) == {
        "receipt_v2_witnessed.json", "receipt_v2_witnessed_body.json", "receipt_v2_witnessed_ledger.jsonl", "witness_v1.policy"
    }
    for name, text in files.items():
        assert (VECTORS / name).read_text(encoding="utf-8") == text, name


def test_the_vector_verifies_offline_and_with_its_ledger_under_its_policy_every_row_passing(tmp_path: Path) -> None:
    policy = parse_policy(POLICY)
    assert verify_bytes(RAW, trusted=[PUB], policy=policy).verdict == "verified"
    folder = tmp_path / "sessions" / "vector-witnessed"
    folder.mkdir(parents=True)
    shutil.copy(VECTORS / "receipt_v2_witnessed_ledger.jsonl", folder / "events.jsonl")
    report = verify_bytes(RAW, trusted=[PUB], data_dir=tmp_path, policy=policy)
    assert report.verdict == "verified"
    assert all(c.status == PASS for c in report.checks), [c.to_dict() for c in report.checks if c.status != PASS]
    assert {"witness.log", "witness.w1", "witness.quorum"} <= {c.name for c in report.checks}


def test_without_a_policy_the_cosignature_is_said_and_the_receipt_still_verifies() -> None:
    report = verify_bytes(RAW, trusted=[PUB])
    assert report.verdict == "verified" and report.status_of("witness.quorum") == "not_verifiable"


def test_another_witness_key_or_another_log_or_a_quorum_it_cannot_meet_fails() -> None:
    other = SigningKey.from_seed(hashlib.sha256(b"another witness").digest())
    from receipts.cosignature import witness_key

    lines = POLICY.splitlines()
    swapped = parse_policy("\n".join([lines[0], f"witness w1 {witness_key(other.public_key, 'witness.example/w1').vkey()}", "quorum w1"]))
    assert verify_bytes(RAW, trusted=[PUB], policy=swapped).status_of("witness.quorum") == "fail"
    from receipts.note import verifier

    wrong_log = parse_policy("\n".join([f"log {verifier(other.public_key).vkey()}", lines[1], "quorum w1"]))
    assert verify_bytes(RAW, trusted=[PUB], policy=wrong_log).status_of("witness.log") == "fail"
    two = parse_policy(POLICY.replace("quorum w1", f"witness w2 {witness_key(other.public_key, 'w2.example').vkey()}\ngroup both all w1 w2\nquorum both"))
    assert verify_bytes(RAW, trusted=[PUB], policy=two).verdict == "failed"


def test_the_member_holds_one_cosignature_by_the_policys_witness() -> None:
    member = parse_receipt(RAW).signed_body["witnesses"]
    assert member["v"] == 1 and [c["name"] for c in member["cosignatures"]] == ["witness.example/w1"]
