"""The committed semantic receipt vector (docs/FORMAT.md §25) is reproduced byte for byte, verifies offline and with
its ledger with every row passing, and a `semantic` member of any other shape is refused at parse time."""

from __future__ import annotations

import base64
import copy
import hashlib
import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from receipts import body as rbody
from receipts.body import MalformedReceipt, parse_receipt
from receipts.keys import SigningKey, parse_public_key
from receipts.verify import PASS
from storage.common import semantic
from storage.files.receipts.api import verify_bytes

VECTORS = Path(__file__).resolve().parent
RAW = (VECTORS / "receipt_v2_semantic.json").read_bytes()
PUB = parse_public_key((VECTORS / "receipt_v1_pubkey.json").read_text())
KEY = SigningKey.from_seed(hashlib.sha256(b"mre test vector signing key").digest())


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("generate_semantic", VECTORS / "generate_semantic.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_code_reproduces_the_committed_semantic_vector_exactly() -> None:
    files = _generator().build()
    assert set(files) == {"receipt_v2_semantic.json", "receipt_v2_semantic_body.json", "receipt_v2_semantic_ledger.jsonl"}
    for name, text in files.items():
        assert (VECTORS / name).read_text(encoding="utf-8") == text, name


def test_the_vector_names_the_method_the_model_and_the_pinned_sha256() -> None:
    member = parse_receipt(RAW).signed_body["semantic"]
    assert member == {"v": 1, "method": "linear-fusion-v1", "model": semantic.MODEL_ID, "model_sha256": semantic.MODEL_SHA256}


def test_the_semantic_vector_verifies_offline_and_with_its_ledger_every_row_passing(tmp_path: Path) -> None:
    assert verify_bytes(RAW, trusted=[PUB]).verdict == "verified"
    folder = tmp_path / "sessions" / "vector-semantic"
    folder.mkdir(parents=True)
    shutil.copy(VECTORS / "receipt_v2_semantic_ledger.jsonl", folder / "events.jsonl")
    report = verify_bytes(RAW, trusted=[PUB], data_dir=tmp_path)
    assert report.verdict == "verified"
    assert all(c.status == PASS for c in report.checks), [c.to_dict() for c in report.checks if c.status != PASS]


def test_a_format_1_receipt_cannot_carry_it() -> None:
    with pytest.raises(ValueError, match="format-2 additions"):
        rbody.build_body(
            receipt_id="rcpt_" + "0" * 32, issued_at="2026-01-02T03:04:05.000000Z", session="s", k=1, retrieval="r",
            query=None, query_proof=[], memories=[], response=None, response_proof=[], provider="groq", model="m",  # type: ignore[arg-type]
            fallback_reason=None, template="t", prompt_sha256="0" * 64, checkpoint={}, receipt_format=1,
            semantic={"method": "m", "model": "x", "model_sha256": "0" * 64},
        )


def _resigned(mutate: Any) -> bytes:
    """The vector's body changed by `mutate` and signed again with the vector's key (what a forger holding it makes)."""
    receipt = parse_receipt(RAW)
    body = copy.deepcopy(receipt.signed_body)
    mutate(body["semantic"], body)
    disclosures = list(receipt.disclosures.values())
    return rbody.dump_file(rbody.sign_receipt(body, KEY, disclosures))


MUTATIONS = {
    "unknown-version": lambda m, b: m.update(v=2),
    "version-as-string": lambda m, b: m.update(v="1"),
    "sha256-not-hex": lambda m, b: m.update(model_sha256="z" * 64),
    "sha256-short": lambda m, b: m.update(model_sha256="0" * 63),
    "model-not-a-string": lambda m, b: m.update(model=7),
    "method-missing": lambda m, b: m.pop("method"),
    "extra-key": lambda m, b: m.update(weights="1.0"),
    "not-an-object": lambda m, b: b.update(semantic=["linear-fusion-v1"]),
}


def test_every_named_corruption_of_the_member_is_refused_at_parse_time() -> None:
    slipped = []
    for name, mutate in MUTATIONS.items():
        try:
            parse_receipt(_resigned(mutate))
        except MalformedReceipt:
            continue
        slipped.append(name)
    assert slipped == []


def test_a_member_altered_without_the_key_fails_the_signature() -> None:
    envelope = json.loads(RAW)
    body = json.loads(base64.b64decode(envelope["payload"]))
    body["semantic"]["model_sha256"] = "0" * 64  # claims another model file
    envelope["payload"] = base64.b64encode(json.dumps(body, separators=(",", ":"), sort_keys=True).encode()).decode()
    report = verify_bytes(json.dumps(envelope).encode(), trusted=[PUB])
    assert report.verdict != "verified"


def test_receipts_show_says_the_search_was_hybrid_and_names_the_model() -> None:
    from receipts.show import render_text, summarize

    summary = summarize(parse_receipt(RAW).body)
    assert summary["semantic"] == {"method": "linear-fusion-v1", "model": semantic.MODEL_ID, "model_sha256": semantic.MODEL_SHA256}
    assert f"searched by words and by meaning: linear-fusion-v1, model {semantic.MODEL_ID} (sha256 {semantic.MODEL_SHA256})" in render_text(summary)
