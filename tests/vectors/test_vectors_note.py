"""The committed C2SP vectors (docs/FORMAT.md §22) are reproduced byte for byte and verify (the older vectors' own tests
check that theirs are unchanged)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from receipts.keys import parse_public_key
from receipts.note import parse_checkpoint_text, parse_note, parse_vkey, signed_by
from receipts.tlog_proof import check_tlog_proof, parse_event_line, parse_tlog_proof

VECTORS = Path(__file__).resolve().parent


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("generate_note", VECTORS / "generate_note.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_code_reproduces_the_committed_note_vectors_exactly() -> None:
    files = _generator().build()
    assert set(files) == {"note_v1_vkey.txt", "note_v1_checkpoint.txt", "note_v1_seq2.tlog-proof"}
    for name, text in files.items():
        assert (VECTORS / name).read_text(encoding="utf-8") == text, name


def test_the_vector_vkey_is_the_receipt_vector_key() -> None:
    v = parse_vkey((VECTORS / "note_v1_vkey.txt").read_text())
    assert v.key == parse_public_key((VECTORS / "receipt_v1_pubkey.json").read_text())


def test_the_vector_checkpoint_note_verifies_and_is_the_receipts_tree_head() -> None:
    v = parse_vkey((VECTORS / "note_v1_vkey.txt").read_text())
    note = parse_note((VECTORS / "note_v1_checkpoint.txt").read_bytes())
    assert signed_by(note, v) is True
    cp = parse_checkpoint_text(note.text)
    body = json.loads((VECTORS / "receipt_v1_body.json").read_text())["checkpoint"]["body"]
    assert (cp.origin, cp.size, cp.root.hex(), cp.chain_head) == (v.name + "/vector-receipts", body["tree_size"], body["root"], body["chain_head"])


def test_the_vector_tlog_proof_verifies_with_its_event_line() -> None:
    v = parse_vkey((VECTORS / "note_v1_vkey.txt").read_text())
    line = (VECTORS / "receipt_v1_ledger.jsonl").read_text().splitlines()[2]
    report = check_tlog_proof(parse_tlog_proof((VECTORS / "note_v1_seq2.tlog-proof").read_bytes()), parse_event_line(line), [v])
    assert report.verdict == "verified" and len(report.passed) == 6  # issue 33: event.chain added

