"""The committed witnessed bundle vector (docs/FORMAT.md §21.1): the code reproduces its note, manifest and envelope
byte for byte; under the vector policy every row passes; the note says what §22 says; the bundle vector of §21 (no
witness) is unchanged and carries no note."""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path

from bundle import verify_file
from receipts.cosignature import parse_policy
from receipts.note import parse_checkpoint_text, parse_note, parse_vkey, signed_by
from storage.files.receipts.api import load_trust

VECTORS = Path(__file__).resolve().parent
PUBKEY = VECTORS / "receipt_v1_pubkey.json"
BUNDLE = VECTORS / "bundle_v1_witnessed.mre.zip"
POLICY = parse_policy((VECTORS / "witness_v1.policy").read_bytes())


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("generate_bundle", VECTORS / "generate_bundle.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_code_reproduces_the_committed_note_manifest_and_envelope_exactly() -> None:
    built = _generator().build_witnessed()
    for name in ("bundle_v1_witnessed_manifest.json", "bundle_v1_witnessed_manifest.dsse.json"):
        assert (VECTORS / name).read_bytes() == built[name], name
    assert (VECTORS / "bundle_v1_witnessed.note").read_bytes() == built["member:notes/5.note"]


def test_the_committed_bundle_carries_the_note_and_the_vector_files() -> None:
    with zipfile.ZipFile(BUNDLE) as z:
        assert z.read("notes/5.note") == (VECTORS / "bundle_v1_witnessed.note").read_bytes()
        assert z.read("ledger/events.jsonl") == (VECTORS / "receipt_v2_witnessed_ledger.jsonl").read_bytes()


def test_the_note_is_the_receipts_checkpoint_signed_by_the_log_and_cosigned_by_the_witness() -> None:
    import json

    note = parse_note((VECTORS / "bundle_v1_witnessed.note").read_bytes())
    cp = json.loads((VECTORS / "receipt_v2_witnessed_body.json").read_text())["checkpoint"]
    text = parse_checkpoint_text(note.text)
    assert (text.size, text.root.hex(), text.chain_head) == (cp["body"]["tree_size"], cp["body"]["root"], cp["body"]["chain_head"])
    assert signed_by(note, parse_vkey((VECTORS / "note_v1_vkey.txt").read_text())) is True
    assert [s.name for s in note.signatures] == ["3ba5875cba953c72/mre", "witness.example/w1"]


def test_under_the_vector_policy_every_row_passes() -> None:
    report = verify_file(BUNDLE, load_trust([PUBKEY]), policy=POLICY)
    assert report.verdict == "verified", [c.to_dict() for c in report.checks if c.status != "pass"]
    names = [c.name for c in report.checks]
    assert names[-5:] == ["note 5.tree_head", "note 5.signature", "note 5.witness.log", "note 5.witness.w1", "note 5.witness.quorum"]


def test_without_a_policy_it_verifies_as_before_and_says_the_cosignature_is_unchecked() -> None:
    report = verify_file(BUNDLE, load_trust([PUBKEY]))
    assert report.verdict == "verified"
    assert "give --policy FILE" in next(c.message for c in report.checks if c.name == "note 5.tree_head")


def test_the_unwitnessed_bundle_vector_has_no_note_and_verifies_as_it_did() -> None:
    with zipfile.ZipFile(VECTORS / "bundle_v1.mre.zip") as z:
        assert not [n for n in z.namelist() if n.startswith("notes/")]
    report = verify_file(VECTORS / "bundle_v1.mre.zip", load_trust([PUBKEY]))
    assert report.verdict == "verified" and not [c for c in report.checks if c.name.startswith(("note ", "witness."))]
    under = verify_file(VECTORS / "bundle_v1.mre.zip", load_trust([PUBKEY]), policy=POLICY)
    assert under.verdict == "failed" and under.status_of("witness.quorum") == "fail"
