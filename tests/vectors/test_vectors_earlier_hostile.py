"""Hostile `earlier` lists (FORMAT.md §20.1, states v2), generated over the committed vector and re-signed with its
key: whatever the list holds, a verifier answers with rows or one parse error (never another exception), and says
"verified" only for a list that is the vector's own (the one earlier statement, rank 2, replaced by seq 2)."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.canonical import CanonicalError, canonical_json
from receipts import body as rbody
from receipts.body import MalformedReceipt, parse_receipt
from receipts.dsse import sign_envelope
from receipts.keys import SigningKey, parse_public_key
from receipts.prompt import TemplateError
from storage.files.receipts.api import verify_bytes

VECTORS = Path(__file__).resolve().parent
RAW = (VECTORS / "receipt_v2_earlier.json").read_bytes()
PUB = parse_public_key((VECTORS / "receipt_v1_pubkey.json").read_text())
KEY = SigningKey.from_seed(hashlib.sha256(b"mre test vector signing key").digest())  # generate_earlier.SEED
BODY = parse_receipt(RAW).signed_body
GOOD = BODY["states"]["earlier"]
IDS = [m["event"]["id"] for m in BODY["memories"]]
SEQS = [m["event"]["seq"] for m in BODY["memories"]]

# numbers a forger tries: in range, out of range, negative, float, bool, huge, a string of digits
numbers = st.one_of(
    st.sampled_from([0, 1, 2, 3, 4, 9, 51, -1, 2**53, 2**64]), st.sampled_from(SEQS), st.booleans(), st.floats(allow_nan=False), st.just("2"), st.none()
)
entry: st.SearchStrategy[Any] = st.fixed_dictionaries(
    {"rank": numbers, "seq": numbers, "id": st.one_of(st.sampled_from(IDS), st.just("evt_" + "0" * 32), st.text(max_size=5)), "newer": numbers}
) | st.sampled_from([dict(GOOD[0]), {"rank": 1}, [], "x", 3])
lists: st.SearchStrategy[Any] = st.one_of(st.lists(entry, max_size=4), st.just([dict(GOOD[0])] * 51), st.just({}), st.none())


def _resigned(earlier: Any, v: Any = 2) -> bytes:
    body = copy.deepcopy(BODY)
    body["states"]["earlier"] = earlier
    body["states"]["v"] = v
    receipt = parse_receipt(RAW)
    try:
        payload = canonical_json(body)
    except CanonicalError:  # a float: signed as plain JSON, which a forger may do
        payload = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    env = sign_envelope(payload, rbody.PAYLOAD_TYPE_2, KEY)
    env["disclosures"] = sorted(receipt.disclosures.values(), key=lambda d: int(d["seq"]))
    return rbody.dump_file(env)


def test_the_key_is_the_vectors() -> None:
    assert KEY.public_key.key_id == PUB.key_id
    assert verify_bytes(_resigned(copy.deepcopy(GOOD)), trusted=[PUB]).verdict == "verified"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(earlier=lists, v=st.sampled_from([2, 2, 2, 1, True, 2.0, "2"]))
def test_any_earlier_list_is_refused_with_a_row_or_a_parse_error_unless_it_is_the_true_one(earlier: Any, v: Any) -> None:
    raw = _resigned(earlier, v)
    try:
        report = verify_bytes(raw, trusted=[PUB])  # parse first: a malformed body is one MalformedReceipt, nothing else
    except MalformedReceipt as exc:
        assert str(exc).startswith("malformed receipt: ") and "states" in str(exc), str(exc)  # names where
        return
    parsed = True
    true_one = type(v) is int and v == 2 and type(earlier) is list and earlier == GOOD and all(
        type(x) is int for e in earlier for x in (e["rank"], e["seq"], e["newer"])
    )
    if report.verdict == "verified":
        assert parsed and true_one, earlier
    else:
        assert any(c.status == "fail" and c.message for c in report.checks)
    if true_one:
        assert report.verdict == "verified"


def _template_resigned(template: str) -> bytes:
    """The vector's body told with another template: its prompt hash re-derived with the same marks, re-signed."""
    from receipts.prompt import build_messages, prompt_hash
    from receipts.states import prompt_marks

    receipt = parse_receipt(RAW)
    body, view = copy.deepcopy(BODY), copy.deepcopy(receipt.body)
    body["prompt"]["template"] = template
    body["prompt"]["sha256"] = prompt_hash(build_messages(template, view["query"]["event"]["text"], [m["event"] for m in view["memories"]], prompt_marks(view)))
    return rbody.dump_file(rbody.sign_receipt(body, KEY, list(receipt.disclosures.values())))


def test_earlier_statements_marked_in_a_v2_prompt_are_refused_by_their_row() -> None:
    """v2's system message says nothing of what "[earlier statement" means: a receipt listing earlier statements
    claims the model was told, which only mre-prompt/v3 does (FORMAT.md §20.1)."""
    report = verify_bytes(_template_resigned("mre-prompt/v2"), trusted=[PUB])
    row = next(c for c in report.checks if c.name == "states.earlier")
    assert report.verdict == "failed" and row.status == "fail" and "mre-prompt/v3" in row.message
    assert next(c for c in report.checks if c.name == "prompt.hash").status == "pass"  # the hash alone did not catch it


def test_earlier_statements_with_a_v1_prompt_fail_the_prompt_hash() -> None:
    with pytest.raises(TemplateError):
        _template_resigned("mre-prompt/v1")  # v1 takes no marks: no such prompt can be built
    body = copy.deepcopy(BODY)
    body["prompt"]["template"] = "mre-prompt/v1"
    receipt = parse_receipt(RAW)
    report = verify_bytes(rbody.dump_file(rbody.sign_receipt(body, KEY, list(receipt.disclosures.values()))), trusted=[PUB])
    assert report.verdict == "failed" and next(c for c in report.checks if c.name == "prompt.hash").status == "fail"
