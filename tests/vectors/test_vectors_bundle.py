"""The committed bundle vector (docs/FORMAT.md §21): the code reproduces its manifest and signed envelope byte for
byte, the committed bundle file still verifies with the vector key (old bundles keep verifying), and the
manifest says what is written here by hand."""

from __future__ import annotations

import importlib.util
import json
import zipfile
from pathlib import Path

from bundle import verify_file
from bundle.format import MANIFEST_NAME, MANIFEST_PAYLOAD_TYPE, parse_manifest
from receipts.dsse import parse_envelope, verify_envelope
from storage.files.receipts.api import load_trust

VECTORS = Path(__file__).resolve().parent
PUBKEY = VECTORS / "receipt_v1_pubkey.json"


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("generate_bundle", VECTORS / "generate_bundle.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_code_reproduces_the_committed_manifest_and_envelope_exactly() -> None:
    built = _generator().build()
    for name in ("bundle_v1_manifest.json", "bundle_v1_manifest.dsse.json"):
        assert (VECTORS / name).read_bytes() == built[name], name


def test_the_committed_bundle_carries_the_committed_envelope_and_the_vector_files() -> None:
    with zipfile.ZipFile(VECTORS / "bundle_v1.mre.zip") as z:
        assert z.read(MANIFEST_NAME) == (VECTORS / "bundle_v1_manifest.dsse.json").read_bytes()
        assert z.read("ledger/events.jsonl") == (VECTORS / "receipt_v2_states_ledger.jsonl").read_bytes()
        assert sorted(z.namelist()) == [
            "checkpoint.json", "keys/ed25519-3ba5875cba953c72.pub", "ledger/events.jsonl", MANIFEST_NAME,
            "receipts/rcpt_33aeab77d605907b2b2cd492c17246ec.json",
        ]


def test_the_manifest_says_what_it_should() -> None:
    m = parse_manifest((VECTORS / "bundle_v1_manifest.json").read_bytes())
    assert (m.session, m.events, m.signer, m.exported_at) == ("vector-states", 8, "ed25519:3ba5875cba953c72", "2026-01-02T03:05:00.000000Z")
    ledger_line = (VECTORS / "receipt_v2_states_ledger.jsonl").read_bytes().splitlines()[-1]
    assert m.chain_head == json.loads(ledger_line)["chain"]
    env = parse_envelope(json.loads((VECTORS / "bundle_v1_manifest.dsse.json").read_bytes()))
    assert env.payload_type == MANIFEST_PAYLOAD_TYPE == "application/vnd.mre.bundle-manifest+json; version=1"
    assert any(c.passed for c in verify_envelope(env, load_trust([PUBKEY]), MANIFEST_PAYLOAD_TYPE))


def test_the_committed_bundle_verifies_with_the_vector_key_and_every_row_passes() -> None:
    report = verify_file(VECTORS / "bundle_v1.mre.zip", load_trust([PUBKEY]))
    assert report.verdict == "verified", [c.to_dict() for c in report.checks if c.status != "pass"]
    names = [c.name for c in report.checks]
    assert names[:5] == ["bundle.structure", "manifest.signature", "manifest.members", "members.hashes", "ledger.chain"]
    assert "checkpoint.consistency" in names and "receipt rcpt_33aeab77d605907b2b2cd492c17246ec" in names
    assert {c.status for c in report.checks} == {"pass"}


def test_without_a_trusted_key_the_committed_bundle_is_unverified_not_verified() -> None:
    report = verify_file(VECTORS / "bundle_v1.mre.zip")
    assert report.verdict == "unverified" and not report.failed
