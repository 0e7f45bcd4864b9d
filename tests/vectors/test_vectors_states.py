"""The committed memory-states receipt vector (docs/FORMAT.md §20) is reproduced byte for byte, verifies
offline and with its ledger (every row passing, the prompt re-derived with the superseded mark), and named
corruptions of its states are each caught by their row."""

from __future__ import annotations

import copy
import importlib.util
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from receipts import body as rbody
from receipts.body import MalformedReceipt, parse_receipt
from receipts.keys import SigningKey, parse_public_key
from receipts.verify import FAIL, PASS
from storage.files.receipts.api import verify_bytes

VECTORS = Path(__file__).resolve().parent
RAW = (VECTORS / "receipt_v2_states.json").read_bytes()
PUB = parse_public_key((VECTORS / "receipt_v1_pubkey.json").read_text())


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("generate_states", VECTORS / "generate_states.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _with_ledger(tmp_path: Path) -> Path:
    folder = tmp_path / "sessions" / "vector-states"
    folder.mkdir(parents=True)
    shutil.copy(VECTORS / "receipt_v2_states_ledger.jsonl", folder / "events.jsonl")
    return tmp_path


def test_code_reproduces_the_committed_states_vector_exactly() -> None:
    files = _generator().build()
    assert set(files) == {"receipt_v2_states.json", "receipt_v2_states_body.json", "receipt_v2_states_ledger.jsonl", "receipt_v2_states_show.txt"}
    for name, text in files.items():
        assert (VECTORS / name).read_text(encoding="utf-8") == text, name


def test_the_states_vector_verifies_offline_and_with_its_ledger_every_row_passing(tmp_path: Path) -> None:
    assert verify_bytes(RAW, trusted=[PUB]).verdict == "verified"
    report = verify_bytes(RAW, trusted=[PUB], data_dir=_with_ledger(tmp_path))
    assert report.verdict == "verified"
    assert all(c.status == PASS for c in report.checks), [c.to_dict() for c in report.checks if c.status != PASS]
    assert {"states.records", "ledger.states", "prompt.hash"} <= {c.name for c in report.checks}


def test_receipts_show_prints_each_memorys_state() -> None:
    from receipts.show import render_text, summarize

    summary = summarize(parse_receipt(RAW).body)
    assert [(e["rank"], e["seq"], e["by_seq"]) for e in summary["states"]["superseded"]] == [(1, 0, 2)]
    assert [(e["seq"], e["by_seq"]) for e in summary["states"]["excluded"]] == [(1, 4)]
    assert render_text(summary) + "\n" == (VECTORS / "receipt_v2_states_show.txt").read_text(encoding="utf-8")


KEY = SigningKey.from_seed(_generator().SEED)
Mutation = Callable[[dict[str, Any]], None]


def _resigned(change: Mutation) -> bytes:
    receipt = parse_receipt(RAW)
    body = copy.deepcopy(receipt.signed_body)
    change(body)
    return rbody.dump_file(rbody.sign_receipt(body, KEY, list(receipt.disclosures.values())))


def _sup(body: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = body["states"]["superseded"][0]
    return entry


MUTATIONS: list[tuple[str, Mutation, str]] = [
    ("superseded-rank-names-another-memory", lambda b: _sup(b).update(rank=2), "states.records"),
    ("superseded-id-altered", lambda b: _sup(b).update(id="evt_" + "0" * 32), "states.records"),
    ("record-of-the-other-statement", lambda b: _sup(b).update(by=copy.deepcopy(b["states"]["excluded"][0]["by"])), "states.records"),
    ("record-text-altered", lambda b: _sup(b)["by"]["event"].update(text="[control record: revoke]"), "states.records"),
    ("record-reason-altered", lambda b: _sup(b)["by"]["event"]["meta"]["supersession"].update(reason="another reason"), "states.records"),
    ("record-proof-truncated", lambda b: _sup(b)["by"].update(proof=_sup(b)["by"]["proof"][:-1]), "states.records"),
    ("excluded-seq-is-cited", lambda b: b["states"]["excluded"][0].update(seq=2), "states.records"),
    ("superseded-claimed-live", lambda b: b["states"].update(superseded=[]), "prompt.hash"),
]


@pytest.mark.parametrize(("name", "change", "row"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_each_named_corruption_of_the_states_is_caught_by_its_row(name: str, change: Mutation, row: str) -> None:
    report = verify_bytes(_resigned(change), trusted=[PUB])
    assert next(c for c in report.checks if c.name == row).status == FAIL, name


def test_a_body_claiming_the_memory_live_fails_with_the_ledger_even_with_a_matching_prompt(tmp_path: Path) -> None:
    from receipts.prompt import TEMPLATE_V1, build_messages, prompt_hash

    view = parse_receipt(RAW).body

    def live(b: dict[str, Any]) -> None:
        b["states"]["superseded"] = []
        b["prompt"] = {"template": TEMPLATE_V1, "sha256": prompt_hash(build_messages(TEMPLATE_V1, view["query"]["event"]["text"], [m["event"] for m in view["memories"]]))}

    report = verify_bytes(_resigned(live), trusted=[PUB], data_dir=_with_ledger(tmp_path))
    failed = {c.name: c for c in report.checks if c.status == FAIL}
    assert set(failed) == {"ledger.states"} and "seq 0 is claimed live" in failed["ledger.states"].message


def test_an_unknown_states_version_is_a_parse_error() -> None:
    with pytest.raises(MalformedReceipt, match="states.v"):
        parse_receipt(_resigned(lambda b: b["states"].update(v=3)))


def test_the_body_json_is_the_signed_payload() -> None:
    assert json.loads((VECTORS / "receipt_v2_states_body.json").read_text()) == parse_receipt(RAW).signed_body
