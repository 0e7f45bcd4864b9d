"""The committed consent receipt vector (docs/FORMAT.md §17, §18) is reproduced byte for byte and verifies
offline and with its ledger, every row passing; what a person withheld is not disclosed."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from receipts.body import parse_receipt
from receipts.keys import parse_public_key
from receipts.verify import PASS
from storage.files.receipts.api import verify_bytes

VECTORS = Path(__file__).resolve().parent
RAW = (VECTORS / "receipt_v2_consent.json").read_bytes()
PUB = parse_public_key((VECTORS / "receipt_v1_pubkey.json").read_text())


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("generate_consent", VECTORS / "generate_consent.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_code_reproduces_the_committed_consent_vector_exactly() -> None:
    files = _generator().build()
    assert set(files) == {"receipt_v2_consent.json", "receipt_v2_consent_body.json", "receipt_v2_consent_ledger.jsonl"}
    for name, text in files.items():
        assert (VECTORS / name).read_text(encoding="utf-8") == text, name


def test_the_consent_vector_verifies_offline_and_with_its_ledger_every_row_passing(tmp_path: Path) -> None:
    offline = verify_bytes(RAW, trusted=[PUB])
    assert offline.verdict == "verified"
    folder = tmp_path / "sessions" / "vector-consent"
    folder.mkdir(parents=True)
    shutil.copy(VECTORS / "receipt_v2_consent_ledger.jsonl", folder / "events.jsonl")
    report = verify_bytes(RAW, trusted=[PUB], data_dir=tmp_path)
    assert report.verdict == "verified"
    assert all(c.status == PASS for c in report.checks), [c.to_dict() for c in report.checks if c.status != PASS]
    names = {c.name for c in report.checks}
    assert {"consent.proposed", "consent.decision", "consent.prompt", "exclusions.records", "ledger.exclusions"} <= names


def test_the_consent_vector_records_the_decision_and_discloses_only_the_approved() -> None:
    receipt = parse_receipt(RAW)
    c = receipt.signed_body["consent"]
    assert (c["approved"], c["withheld"], c["decided_by"]) == ([0], [2, 1], "person")
    assert [m["event"]["seq"] for m in receipt.signed_body["memories"]] == [0]
    assert sorted(receipt.disclosures) == [0, 5, 6]
    for withheld in (b"I moved to Lisbon in March", b"My sister is called Ana"):
        assert withheld not in RAW
    ex = receipt.signed_body["exclusions"]["revoked"]
    assert [(e["seq"], e["control"]["event"]["seq"]) for e in ex] == [(3, 4)]


def test_receipts_show_says_what_the_person_decided_and_which_revocation_left_a_memory_out() -> None:
    from receipts.show import render_text, summarize

    summary = summarize(parse_receipt(RAW).body)
    assert [p["decision"] for p in summary["consent"]["proposed"]] == ["approved", "withheld", "withheld"]
    assert summary["exclusions"] == [{"seq": 3, "id": summary["exclusions"][0]["id"], "control_seq": 4, "control_ts": "2026-01-02T03:04:05.000000Z", "reason": "not about this any more"}]
    text = render_text(summary)
    assert "3 proposed, 1 approved, 2 withheld" in text and "excluded because of the revocation at seq 4" in text
    assert "Lisbon" not in text and "Ana" not in text


def test_the_receipt_group_sentence_names_the_decision() -> None:
    report = verify_bytes(RAW, trusted=[PUB])
    receipt = next(g for g in report.groups() if g.key == "receipt")
    assert receipt.status == PASS and "a person decided: 1 approved, 2 withheld of 3 proposed" in receipt.sentence
    assert "revoked event(s) excluded" in receipt.sentence
