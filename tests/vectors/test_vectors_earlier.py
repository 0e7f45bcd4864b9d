"""The committed earlier-statements receipt vector (docs/FORMAT.md §20, states v2, issue 32) is reproduced byte for
byte, verifies offline and with its ledger (every row passing, the prompt re-derived with the earlier mark), and
named corruptions of its `earlier` list are each refused by their row (or at parse time, for a malformed shape)."""

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
from receipts.prompt import TEMPLATE_V3, build_messages
from receipts.verify import FAIL, PASS
from storage.files.receipts.api import verify_bytes

VECTORS = Path(__file__).resolve().parent
RAW = (VECTORS / "receipt_v2_earlier.json").read_bytes()
PUB = parse_public_key((VECTORS / "receipt_v1_pubkey.json").read_text())


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("generate_earlier", VECTORS / "generate_earlier.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _with_ledger(tmp_path: Path) -> Path:
    folder = tmp_path / "sessions" / "vector-earlier"
    folder.mkdir(parents=True)
    shutil.copy(VECTORS / "receipt_v2_earlier_ledger.jsonl", folder / "events.jsonl")
    return tmp_path


def test_code_reproduces_the_committed_earlier_vector_exactly() -> None:
    files = _generator().build()
    assert set(files) == {"receipt_v2_earlier.json", "receipt_v2_earlier_body.json", "receipt_v2_earlier_ledger.jsonl", "receipt_v2_earlier_show.txt"}
    for name, text in files.items():
        assert (VECTORS / name).read_text(encoding="utf-8") == text, name


def test_the_earlier_vector_verifies_offline_and_with_its_ledger_every_row_passing(tmp_path: Path) -> None:
    assert verify_bytes(RAW, trusted=[PUB]).verdict == "verified"
    report = verify_bytes(RAW, trusted=[PUB], data_dir=_with_ledger(tmp_path))
    assert report.verdict == "verified"
    assert all(c.status == PASS for c in report.checks), [c.to_dict() for c in report.checks if c.status != PASS]
    assert {"states.records", "states.earlier", "ledger.states", "prompt.hash"} <= {c.name for c in report.checks}


def test_the_prompt_marks_the_earlier_statement_with_its_date_and_the_newer_seq() -> None:
    body = parse_receipt(RAW).body
    messages = build_messages(TEMPLATE_V3, body["query"]["event"]["text"], [m["event"] for m in body["memories"]],
                              {2: "[earlier statement, said 2026-01-02T03:04:05.000000Z, replaced by seq 2]"})
    assert '"state":"[earlier statement, said 2026-01-02T03:04:05.000000Z, replaced by seq 2]"' in messages[1]["content"]
    assert "[earlier statement" in messages[0]["content"]  # the system message says what the mark means


def test_receipts_show_reads_the_earlier_statement() -> None:
    from receipts.show import render_text, summarize

    summary = summarize(parse_receipt(RAW).body)
    assert summary["states"]["earlier"] == [{"rank": 2, "seq": 0, "id": summary["memories"][1]["id"], "newer": 2}]
    text = render_text(summary)
    assert "memory#2  seq 0: earlier statement (said 2026-01-02T03:04:05.000000Z), replaced by seq 2" in text
    assert text + "\n" == (VECTORS / "receipt_v2_earlier_show.txt").read_text(encoding="utf-8")


def test_the_verify_tab_panel_reads_the_earlier_statement() -> None:
    from webui.render_receipt import panel_for

    panel = panel_for(RAW)
    line = next(x for x in panel.splitlines() if x.startswith("2. memory"))
    assert "earlier statement (said 2026-01-02T03:04:05.000000Z), replaced by seq 2" in line.replace("\\", "")


KEY = SigningKey.from_seed(_generator().SEED)
Mutation = Callable[[dict[str, Any]], None]


def _resigned(change: Mutation) -> bytes:
    receipt = parse_receipt(RAW)
    body = copy.deepcopy(receipt.signed_body)
    change(body)
    return rbody.dump_file(rbody.sign_receipt(body, KEY, list(receipt.disclosures.values())))


def _was(body: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = body["states"]["earlier"][0]
    return entry


def _twice(body: dict[str, Any]) -> None:
    body["states"]["earlier"].append(dict(_was(body)))


def _also_superseded(body: dict[str, Any]) -> None:
    line = (VECTORS / "receipt_v2_earlier_ledger.jsonl").read_text(encoding="utf-8").splitlines()[2]
    body["states"]["superseded"] = [{"rank": 2, "seq": 0, "id": _was(body)["id"], "by": {"event": json.loads(line), "proof": []}}]


MUTATIONS: list[tuple[str, Mutation, str]] = [
    ("rank-out-of-range", lambda b: _was(b).update(rank=9), "states.earlier"),
    ("rank-names-another-memory", lambda b: _was(b).update(rank=3), "states.earlier"),
    ("id-altered", lambda b: _was(b).update(id="evt_" + "0" * 32), "states.earlier"),
    ("listed-twice", _twice, "states.earlier"),
    ("newer-not-among-the-memories", lambda b: _was(b).update(newer=3), "states.earlier"),
    ("newer-is-older", lambda b: (_was(b).update(rank=1, seq=2, id=b["memories"][0]["event"]["id"], newer=0)), "states.earlier"),
    ("newer-is-itself", lambda b: _was(b).update(newer=0), "states.earlier"),
    ("also-listed-superseded", _also_superseded, "states.earlier"),
    ("claimed-live", lambda b: b["states"].update(v=1, earlier=None) or b["states"].pop("earlier"), "prompt.hash"),
    ("mark-names-another-newer", lambda b: _was(b).update(newer=1), "prompt.hash"),
]


@pytest.mark.parametrize(("name", "change", "row"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_each_named_corruption_of_the_earlier_list_is_caught_by_its_row(name: str, change: Mutation, row: str) -> None:
    report = verify_bytes(_resigned(change), trusted=[PUB])
    assert report.verdict != "verified", name
    failed = next(c for c in report.checks if c.name == row)
    assert failed.status == FAIL and failed.message, name


def test_every_named_corruption_is_caught() -> None:
    """Generate the attacks: list every mutation that slipped through, not only the first."""
    slipped = [name for name, change, _ in MUTATIONS if verify_bytes(_resigned(change), trusted=[PUB]).verdict == "verified"]
    assert slipped == []


@pytest.mark.parametrize(
    ("name", "change", "where"),
    [
        ("v2-without-earlier", lambda b: b["states"].pop("earlier"), "states"),
        ("v1-with-earlier", lambda b: b["states"].update(v=1), "states"),
        ("empty-earlier", lambda b: b["states"].update(earlier=[]), "states.earlier"),
        ("newer-not-an-integer", lambda b: _was(b).update(newer="2"), "states.earlier[0].newer"),
        ("rank-zero", lambda b: _was(b).update(rank=0), "states.earlier[0].rank"),
        ("an-extra-field", lambda b: _was(b).update(said="2026-01-02"), "states.earlier[0]"),
        ("unknown-version", lambda b: b["states"].update(v=3), "states.v"),
    ],
)
def test_a_malformed_earlier_list_is_one_parse_error_naming_where(name: str, change: Mutation, where: str) -> None:
    with pytest.raises(MalformedReceipt) as got:
        parse_receipt(_resigned(change))
    assert where in str(got.value), (name, str(got.value))
