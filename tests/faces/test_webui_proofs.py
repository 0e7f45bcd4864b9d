"""The Verify tab's tlog-proofs and witness policy (issue 33; webui/proofs_ui.py, webui/render_proofs.py), no server:
each cited event's proof is the CLI's bytes, a receipt of another key gets a sentence and no proof, and the witness
rows show under a pasted policy or the app's own (WITNESS_POLICY)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from chat.engine import Engine
from chat.llm import LLM
from cli import prog_receipts as receipts_cli
from receipts.body import parse_receipt
from receipts.cosignature import parse_policy, witness_key
from receipts.keys import SigningKey
from receipts.note import verifier
from webui import render_proofs as rp
from webui.handlers import UI
from webui.proofs_ui import ProofsUI
from webui.service import Service
from webui.sessions import new_session_key, session_id

from ..witness_support import Witness, serving

VECTORS = Path(__file__).resolve().parents[1] / "vectors"


@pytest.fixture
def service(tmp_path: Path) -> Service:
    saved = {k: os.environ.pop(k, None) for k in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR", "DATABASE_URL")}
    try:
        return Service(Engine(tmp_path / "data", llm=LLM(api_key="")))
    finally:
        os.environ.update({k: v for k, v in saved.items() if v is not None})


def _receipt(service: Service, tmp_path: Path, key: str) -> Path:
    service.remember(key, "I keep a red kayak in the garage")
    service.remember(key, "my sister lives in Lyon")
    turn = service.turn(key, "where is my kayak?", 8)
    path = tmp_path / "r.json"
    path.write_bytes(turn.receipt_path.read_bytes())
    return path


def test_each_cited_event_is_offered_and_its_proof_is_the_clis_bytes(service: Service, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = new_session_key()
    path = _receipt(service, tmp_path, key)
    body = parse_receipt(path.read_bytes()).signed_body
    pick, text, download, status = ProofsUI(service).offer(str(path))
    seqs = [v for _label, v in pick.choices]
    assert seqs == [*(str(m["event"]["seq"]) for m in body["memories"]), str(body["query"]["event"]["seq"]), str(body["response"]["event"]["seq"])]
    for seq in seqs:
        text, download, status = ProofsUI(service).show(str(path), seq)
        capsys.readouterr()
        assert receipts_cli.main(["tlog-proof", str(path), seq, "--data", str(service.data_dir)]) == 0
        assert text == capsys.readouterr().out and Path(download.value["path"]).read_bytes() == text.encode()
        assert f"seq {seq}" in status
    assert pick.value == seqs[0]


def test_a_receipt_of_another_key_gets_a_sentence_and_no_proof(service: Service) -> None:
    pick, text, download, status = ProofsUI(service).offer(str(VECTORS / "receipt_v2.json"))
    assert text == "" and download.interactive is False and "not signed by this app's key" in status
    assert str(service.data_dir) not in status and pick.choices  # the choices stay: each says why, no server path


@pytest.mark.parametrize("upload", ["certificate", "junk", "none"])
def test_what_is_not_a_receipt_gets_no_choices(service: Service, tmp_path: Path, upload: str) -> None:
    junk = tmp_path / "junk.json"
    junk.write_text('{"payloadType": "x"}')
    arg = {"certificate": str(VECTORS / "erasure_cert_v1.json"), "junk": str(junk), "none": None}[upload]
    pick, text, _download, status = ProofsUI(service).offer(arg)
    assert pick.choices == [] and text == "" and status == rp.PROOFS_HELP


def test_a_seq_the_receipt_does_not_cite_is_a_sentence(service: Service, tmp_path: Path) -> None:
    path = _receipt(service, tmp_path, new_session_key())
    text, _download, status = ProofsUI(service).show(str(path), "999")
    assert text == "" and "cites no event at seq 999" in status


def _witnessed(service: Service, tmp_path: Path, key: str) -> tuple[Path, str]:
    """A witnessed turn of `key`'s session (the spec witness on 127.0.0.1); (receipt path, the policy's text)."""
    w = Witness("w1.example/w", SigningKey.from_seed(bytes([8]) * 32), {})
    engine = service.engine
    log = verifier(engine.key.public_key)
    with serving(w):
        w.logs = {f"{log.name}/{session_id(key)}": log}
        policy = f"log {log.vkey()}\nwitness w1 {w.public.vkey()} {w.url}\nquorum w1\n"
        engine.witnesses = parse_policy(policy)
        engine.witness_timeout = 2.0
        service.remember(key, "I keep a red kayak in the garage")
        turn = service.turn(key, "where is my kayak?", 8)
    path = tmp_path / "w.json"
    path.write_bytes(turn.receipt_path.read_bytes())
    return path, policy


def test_the_apps_policy_puts_the_witness_rows_in_the_report(service: Service, tmp_path: Path) -> None:
    key = new_session_key()
    path, _policy = _witnessed(service, tmp_path, key)
    verdict, report = UI(service).verify(str(path), key)
    names = [row[0] for row in report["data"]]
    assert "witness.w1" in names and "witness.quorum" in names and "**Witnesses**" in verdict and "❌" not in verdict
    assert "`witness.w1`" in verdict  # the row's name as code, not escaped
    text, _download, _status = ProofsUI(service).show(str(path), str(parse_receipt(path.read_bytes()).signed_body["memories"][0]["event"]["seq"]))
    assert "\u2014 w1.example/w " in text  # the proof's note carries the cosignature


def test_a_pasted_policy_is_used_and_another_witness_fails_the_quorum(service: Service, tmp_path: Path) -> None:
    key = new_session_key()
    path, policy = _witnessed(service, tmp_path, key)
    service.engine.witnesses = None  # an app that names no witnesses: only the pasted policy checks them
    verdict, report = UI(service).verify(str(path), key)
    assert "witness.w1" not in [row[0] for row in report["data"]]
    verdict, report = UI(service).verify(str(path), key, policy)
    assert [row[1] for row in report["data"] if row[0] == "witness.quorum"] == [next(r[1] for r in report["data"] if r[0] == "witness.w1")]
    other = policy.split("\n")
    other[1] = f"witness w1 {witness_key(SigningKey.from_seed(bytes([9]) * 32).public_key, 'w1.example/w').vkey()}"
    verdict, report = UI(service).verify(str(path), key, "\n".join(other))
    assert "witness.quorum" in verdict and "Failed" in verdict


def test_a_bad_pasted_policy_is_one_sentence_naming_its_line(service: Service, tmp_path: Path) -> None:
    path = _receipt(service, tmp_path, new_session_key())
    verdict, report = UI(service).verify(str(path), None, "witness w1\nquorum w1\n")
    assert verdict.startswith("## ⛔ Cannot verify") and "line 1" in verdict and report["data"] == []
