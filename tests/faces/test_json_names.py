"""Error messages name JSON values in JSON's words — `null`, `true`, `array` — never Python's (`None`, `True`,
`list`, `NoneType`), and never an internal class: the person who reads them wrote JSON (issue 18)."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger import EventError
from ledger.event import check_content
from ledger.jsonnames import field_shown, json_shown, json_type
from receipts.body import MalformedReceipt, check_body_shape
from receipts.certificate import MalformedCertificate, check_certificate_shape
from receipts.checkpoints import MalformedCheckpoint, check_checkpoint_shape
from receipts.keys import KeyConfigError, parse_public_key
from storage.files.ledger.store import Ledger

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
PYTHON_WORDS = re.compile(r"\b(None|NoneType|True|False|dict|list|tuple|str|int|bool|float)\b")


class TestNames:
    @pytest.mark.parametrize(
        ("value", "name"),
        [(None, "null"), (True, "boolean"), (False, "boolean"), (0, "number"), (2.5, "number"), ("", "string"),
         ([], "array"), ({}, "object"), (b"x", "not a JSON value")],
    )
    def test_each_json_type_has_its_json_name(self, value: object, name: str) -> None:
        assert json_type(value) == name

    @pytest.mark.parametrize(
        ("value", "shown"),
        [(None, "null"), (True, "true"), (False, "false"), (3, "3"), ("k", '"k"'), ([1, None], "[1,null]"),
         ({"a": False}, '{"a":false}'), ("\u202ex", '"\\u202ex"')],
    )
    def test_a_value_is_shown_as_json_text(self, value: object, shown: str) -> None:
        assert json_shown(value) == shown

    def test_a_long_value_is_cut_and_says_so(self) -> None:
        assert json_shown("x" * 1000) == '"' + "x" * 78 + "…" and len(json_shown(list(range(500)))) == 80

    def test_a_missing_field_is_nothing_not_null(self) -> None:
        assert (field_shown({}, "v"), field_shown({"v": None}, "v")) == ("nothing", "null")


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(body: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = body
        for p in parents:
            node = node[int(p)] if p.isdigit() else node[p]
        node[int(last) if last.isdigit() else last] = value

    return mutate


RECEIPT_CASES = [
    ("type null", _set("type", None), 'payload.type: expected "mre/receipt", found null'),
    ("type missing", lambda b: b.pop("type"), 'payload.type: expected "mre/receipt", found nothing'),
    ("v null", _set("v", None), "payload.v: receipt format version null is unknown"),
    ("k true", _set("k", True), "k: expected an integer in 1..50, found true"),
    ("k a string", _set("k", "3"), 'k: expected an integer in 1..50, found "3"'),
    ("session null", _set("session", None), "session: expected a string, found JSON null"),
    ("query an array", _set("query", []), "query: expected an object, found JSON array"),
    ("memories an object", _set("memories", {}), "memories: expected an array of at most 50 memories"),
    ("event v null", _set("memories.0.event.v", None), "memories[0].event.v: event format version null is unknown"),
    ("role false", _set("memories.0.event.role", False), "memories[0].event.role: false is not one of"),
    ("checkpoint body v null", _set("checkpoint.body.v", None), 'unknown checkpoint type/version "mre/checkpoint"/null'),
]


@pytest.mark.parametrize(("mutate", "says"), [c[1:] for c in RECEIPT_CASES], ids=[c[0] for c in RECEIPT_CASES])
def test_a_malformed_receipt_names_the_value_in_json_words(mutate: Callable[[dict[str, Any]], None], says: str) -> None:
    body = copy.deepcopy(json.loads((VECTORS / "receipt_v1_body.json").read_text()))
    mutate(body)
    with pytest.raises(MalformedReceipt) as info:
        check_body_shape(body, 1)
    assert says in str(info.value)
    assert not PYTHON_WORDS.search(str(info.value)), str(info.value)


CERTIFICATE_CASES = [
    ("scope null", _set("scope", None), "payload.scope: expected one of events, session, found null"),
    ("erased role null", _set("erased.0.role", None), "erased[0].role: null is not one of"),
    ("records an object", _set("records", {}), "records: expected an array of 1.."),
]


@pytest.mark.parametrize(("mutate", "says"), [c[1:] for c in CERTIFICATE_CASES], ids=[c[0] for c in CERTIFICATE_CASES])
def test_a_malformed_certificate_names_the_value_in_json_words(mutate: Callable[[dict[str, Any]], None], says: str) -> None:
    body = copy.deepcopy(json.loads((VECTORS / "erasure_cert_v1_body.json").read_text()))
    mutate(body)
    with pytest.raises(MalformedCertificate) as info:
        check_certificate_shape(body)
    assert says in str(info.value)
    assert not PYTHON_WORDS.search(str(info.value)), str(info.value)


@pytest.mark.parametrize(
    ("mutate", "says"),
    [(_set("body.tree_size", None), "expected an integer in 1..9007199254740991, found null"),
     (_set("body.session", None), "body.session: expected a string, found JSON null"),
     (_set("body", []), "body: expected an object, found JSON array")],
)
def test_a_malformed_checkpoint_names_the_value_in_json_words(mutate: Callable[[dict[str, Any]], None], says: str) -> None:
    cp = copy.deepcopy(json.loads((VECTORS / "receipt_v1_body.json").read_text())["checkpoint"])
    mutate(cp)
    with pytest.raises(MalformedCheckpoint) as info:
        check_checkpoint_shape(cp)
    assert says in str(info.value)
    assert not PYTHON_WORDS.search(str(info.value)), str(info.value)


@pytest.mark.parametrize(("text", "found"), [("null", "JSON null"), ("[1]", "JSON array"), ('"k"', "JSON string")])
def test_a_trust_file_that_is_not_an_object_names_its_json_type(text: str, found: str) -> None:
    with pytest.raises(KeyConfigError) as info:
        parse_public_key(text, source="pub.json")
    assert f"found {found}" in str(info.value)
    assert not PYTHON_WORDS.search(str(info.value)), str(info.value)


def test_a_pem_of_another_algorithm_is_named_in_words_not_by_its_class() -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    pem = ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    with pytest.raises(KeyConfigError) as info:
        parse_public_key(pem.decode(), source="pub.pem")
    assert "found an elliptic-curve (ECDSA) key" in str(info.value) and "EllipticCurve" not in str(info.value)


# --- the ledger's own words: an import line, a ledger line ----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "meta", "says"),
    [(5, {}, "text: must be a string, found JSON number"), (None, {}, "text: must be a string, found JSON null"),
     ("x", [1], "meta: must be a JSON object, found JSON array")],
)
def test_an_import_line_of_the_wrong_type_is_named_in_json_words(text: object, meta: object, says: str) -> None:
    with pytest.raises(EventError) as info:
        check_content(text, meta)
    assert str(info.value) == says


def test_a_ledger_line_that_is_not_an_object_is_named_in_json_words(tmp_path: Path) -> None:
    log = tmp_path / "sessions" / "s" / "events.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text("[1, 2]\n")
    brk = Ledger(tmp_path).verify("s").brk
    assert brk is not None and brk.found == "JSON array" and brk.message == "line 1: not an object (JSON array)"


def test_an_unreadable_receipt_beside_a_certificate_is_named_without_a_class(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from chat.engine import Engine
    from chat.llm import LLM
    from control import forget as control
    from storage.files.receipts.certificate_io import verify_certificate_bytes

    from ..forget_support import marked_session

    for name in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR"):
        monkeypatch.delenv(name, raising=False)
    data = tmp_path / "data"
    eng = Engine(data, llm=LLM(api_key=""))
    mem_seq, _turns = marked_session(eng)
    raw = control.forget(data, "alice", [mem_seq], ledger=eng.ledger, index=eng.index, key=eng.key).certificate_path.read_bytes()
    (data / "sessions" / "alice" / "receipts" / ("rcpt_" + "0" * 32 + ".json")).write_text("{}")
    report = verify_certificate_bytes(raw, trusted=[eng.key.public_key], data_dir=data)
    (row,) = report.failed
    said = f"{row.message} {row.found}"
    assert "cannot be read (not a well-formed receipt)" in said and "Malformed" not in said and "Error" not in said
