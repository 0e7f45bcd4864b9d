"""The committed receipt vector is reproduced byte for byte and verifies offline and with its ledger."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from receipts.keys import parse_public_key
from receipts.verify import PASS
from storage.files.receipts.api import verify_bytes

VECTORS = Path(__file__).resolve().parent


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("generate_receipt", VECTORS / "generate_receipt.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_code_reproduces_the_committed_receipt_vector_exactly() -> None:
    files = _generator().build()
    assert set(files) >= {"receipt_v1.json", "receipt_v1_pubkey.json", "receipt_v1_ledger.jsonl"}
    for name, text in files.items():
        assert (VECTORS / name).read_text(encoding="utf-8") == text, name


def test_the_receipt_vector_verifies_offline() -> None:
    pub = parse_public_key((VECTORS / "receipt_v1_pubkey.json").read_text())
    report = verify_bytes((VECTORS / "receipt_v1.json").read_bytes(), trusted=[pub])
    assert report.verdict == "verified"


def test_the_receipt_vector_verifies_against_its_ledger(tmp_path: Path) -> None:
    session_dir = tmp_path / "sessions" / "vector-receipts"
    session_dir.mkdir(parents=True)
    shutil.copy(VECTORS / "receipt_v1_ledger.jsonl", session_dir / "events.jsonl")
    pub = parse_public_key((VECTORS / "receipt_v1_pubkey.json").read_text())
    report = verify_bytes((VECTORS / "receipt_v1.json").read_bytes(), trusted=[pub], data_dir=tmp_path)
    assert report.verdict == "verified" and all(c.status == PASS for c in report.checks)
