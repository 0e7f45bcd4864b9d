"""The erasure certificate: the committed vector is reproduced and verifies; every generated tamper is caught
by a named check; `python -m receipts verify CERT` dispatches on payloadType with the receipt exit codes."""

from __future__ import annotations

import base64
import copy
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from control import forget as control
from ledger.canonical import canonical_json
from receipts import certificate as cert
from receipts.certificate_check import LEDGER_ROWS_EVENTS
from receipts.keys import SigningKey, format_public_key, parse_public_key
from storage.files.receipts.certificate_io import verify_certificate_bytes

from ..forget_support import engine

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
PUBKEY = VECTORS / "receipt_v1_pubkey.json"
SEED = __import__("hashlib").sha256(b"mre test vector signing key").digest()
# Fields that are the signer's claims: nothing in the certificate can contradict them (the signature covers them).
CLAIMS = {"issued_at", "receipts.withdrawn[0]"}


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("generate_erasure_cert", VECTORS / "generate_erasure_cert.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _trusted() -> list[Any]:
    return [parse_public_key(PUBKEY.read_text())]


def _body() -> dict[str, Any]:
    env = json.loads((VECTORS / "erasure_cert_v1.json").read_bytes())
    body: dict[str, Any] = json.loads(base64.b64decode(env["payload"]))
    return body


def _signed(body: dict[str, Any], key: SigningKey | None = None) -> bytes:
    return cert.certificate_file_bytes(cert.sign_certificate(body, key or SigningKey.from_seed(SEED)))


def test_code_reproduces_the_committed_certificate_vector_exactly() -> None:
    files = _generator().build()
    assert set(files) == {"erasure_cert_v1.json", "erasure_cert_v1_body.json", "erasure_cert_v1_ledger.jsonl"}
    for name, text in files.items():
        assert (VECTORS / name).read_text(encoding="utf-8") == text, name


def test_the_certificate_vector_verifies_offline_with_a_trusted_key() -> None:
    report = verify_certificate_bytes((VECTORS / "erasure_cert_v1.json").read_bytes(), trusted=_trusted())
    assert report.verdict == "verified", [c for c in report.checks if c.status != "pass"]
    assert {c.name for c in report.not_verifiable} == set(LEDGER_ROWS_EVENTS)


def test_without_a_trusted_key_the_certificate_is_never_verified() -> None:
    report = verify_certificate_bytes((VECTORS / "erasure_cert_v1.json").read_bytes())
    assert report.verdict == "unverified"
    assert not report.failed


def test_a_certificate_report_has_no_truth_value() -> None:
    report = verify_certificate_bytes((VECTORS / "erasure_cert_v1.json").read_bytes())
    with pytest.raises(TypeError):
        bool(report)


def test_the_vector_body_holds_no_erased_word() -> None:
    raw = (VECTORS / "erasure_cert_v1.json").read_bytes() + (VECTORS / "erasure_cert_v1_body.json").read_bytes()
    decoded = base64.b64decode(json.loads((VECTORS / "erasure_cert_v1.json").read_bytes())["payload"])
    for blob in (raw, decoded, (VECTORS / "erasure_cert_v1_ledger.jsonl").read_bytes()):
        assert b"quuxberr" not in blob.lower()


# -- generated attacks -------------------------------------------------------------
def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, f"{path}.{k}" if path else k)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{path}[{i}]")
    else:
        yield path, value


def _set(body: dict[str, Any], path: str, value: Any) -> None:
    import re

    parts = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    node: Any = body
    for p in parts[:-1]:
        node = node[int(p[1:-1])] if p.startswith("[") else node[p]
    last = parts[-1]
    if last.startswith("["):
        node[int(last[1:-1])] = value
    else:
        node[last] = value


def _mutate(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str) and value and all(c in "0123456789abcdef" for c in value):
        return ("1" if value[0] != "1" else "2") + value[1:]  # still hex of the same length
    if isinstance(value, str) and len(value) > 5 and value[-5].isdigit():
        return value[:-5] + str((int(value[-5]) + 1) % 10) + value[-4:]  # a time, still well formed
    if isinstance(value, str):
        return value + "x"
    return "x" if value is None else None


def _caught(raw: bytes) -> str | None:
    """The name of the check that catches a tampered certificate (or 'malformed'), None if it slips through."""
    try:
        report = verify_certificate_bytes(raw, trusted=_trusted())
    except cert.MalformedCertificate:
        return "malformed"
    return report.failed[0].name if report.failed else None


def test_every_field_changed_and_re_signed_by_the_same_key_is_caught_by_a_named_check() -> None:
    """An operator with the key can re-sign anything: the proofs, digests and record must still catch a lie."""
    body = _body()
    slipped = []
    for path, value in _leaves(body):
        tampered = copy.deepcopy(body)
        _set(tampered, path, _mutate(value))
        if _caught(_signed(tampered)) is None and path not in CLAIMS:
            slipped.append(path)
    assert slipped == []


def test_any_field_changed_without_re_signing_fails_the_envelope_signature() -> None:
    env = json.loads((VECTORS / "erasure_cert_v1.json").read_bytes())
    body = _body()
    for path, value in _leaves(body):
        tampered = copy.deepcopy(body)
        _set(tampered, path, _mutate(value))
        env2 = dict(env, payload=base64.b64encode(canonical_json(tampered)).decode())
        caught = _caught(canonical_json(env2))
        assert caught is not None, path


def test_a_certificate_signed_by_another_key_fails_the_envelope_signature() -> None:
    report = verify_certificate_bytes(_signed(_body(), SigningKey.from_seed(b"\x07" * 32)), trusted=_trusted())
    assert [c.name for c in report.failed] == ["envelope.signature"]


def test_an_erased_event_left_out_of_the_record_fails_record_lists() -> None:
    body = _body()
    body["erased"] = body["erased"][:1]
    body["records"][0]["event"]["text"] = "[erasure record: 1 event(s) erased]"  # keep the structure consistent
    report = verify_certificate_bytes(_signed(body), trusted=_trusted())
    assert "record.lists" in {c.name for c in report.failed}


def test_a_claimed_erasure_at_a_seq_the_tree_does_not_hold_there_fails_inclusion() -> None:
    body = _body()
    body["erased"][0]["proof"] = body["erased"][1]["proof"]
    report = verify_certificate_bytes(_signed(body), trusted=_trusted())
    assert {c.name for c in report.failed} == {"erased.inclusion"}


# -- the whole-session scope ---------------------------------------------------------
def _session_cert(events: int = 5) -> bytes:
    body = _body()
    sbody = cert.session_body(session=body["session"], events=events, receipts=2, checkpoint=body["checkpoint"], issued_at=body["issued_at"])
    return _signed(sbody)


def test_a_session_certificate_verifies_and_holds_only_hashes_and_counts() -> None:
    raw = _session_cert()
    report = verify_certificate_bytes(raw, trusted=_trusted())
    assert report.verdict == "verified", report.failed
    payload = json.loads(base64.b64decode(json.loads(raw)["payload"]))
    assert set(payload) == {"type", "v", "scope", "session", "counts", "checkpoint", "issued_at"}


def test_a_session_certificate_whose_count_disagrees_with_its_checkpoint_fails_structure() -> None:
    report = verify_certificate_bytes(_session_cert(events=6), trusted=_trusted())
    assert [c.name for c in report.failed] == ["certificate.structure"]


def test_a_session_certificate_is_deleted_only_when_the_data_directory_holds_no_such_history(tmp_path: Path) -> None:
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "signing.pub").write_text(PUBKEY.read_text())  # the directory that signed it
    report = verify_certificate_bytes(_session_cert(), trusted=_trusted(), data_dir=tmp_path)
    assert report.verdict == "verified"
    assert [c.status for c in report.checks if c.name == "ledger.deleted"] == ["pass"]


@pytest.mark.parametrize("key", ["none", "another"])
def test_a_session_certificate_checked_against_a_directory_that_did_not_sign_it_is_never_verified(tmp_path: Path, key: str) -> None:
    """An empty folder, or another data directory, holds no ledger for the session either: that proves nothing."""
    if key == "another":
        (tmp_path / "keys").mkdir()
        (tmp_path / "keys" / "signing.pub").write_text(format_public_key(SigningKey.generate().public_key))
    report = verify_certificate_bytes(_session_cert(), trusted=_trusted(), data_dir=tmp_path)
    assert report.verdict == "unverified" and report.failed == []
    (row,) = [c for c in report.checks if c.name == "ledger.deleted"]
    assert row.status == "not_verifiable" and "not" in row.message and "signed this certificate" in row.message


# -- parsing and the CLI -------------------------------------------------------------
@pytest.mark.parametrize(
    "change",
    [
        lambda b: b.update(v=2),
        lambda b: b.update(scope="everything"),
        lambda b: b.pop("records"),
        lambda b: b.update(extra=1),
        lambda b: b["erased"].clear(),
        lambda b: b["erased"][0].update(seq=-1),
    ],
    ids=["unknown-version", "unknown-scope", "missing-record", "extra-field", "nothing-erased", "negative-seq"],
)
def test_a_malformed_certificate_is_refused_with_one_line(change: Any) -> None:
    body = _body()
    change(body)
    with pytest.raises(cert.MalformedCertificate) as info:
        cert.parse_certificate(_signed(body))
    assert "\n" not in str(info.value)


def test_the_trust_file_of_the_vector_key_is_the_receipt_vectors_key() -> None:
    assert PUBKEY.read_text() == format_public_key(SigningKey.from_seed(SEED).public_key)


def test_the_vector_ledger_writes_erased_lines_exactly_as_the_ledger_does() -> None:
    from ledger.event import erased_form

    gen = _generator()
    events, _record = gen.build_events()
    for s in gen.ERASE:
        assert gen.erased_line(events[s]) == erased_form(events[s]).to_line()


def test_the_certificate_vector_verifies_against_its_ledger(tmp_path: Path) -> None:
    import shutil

    session_dir = tmp_path / "sessions" / "vector-erasure"
    session_dir.mkdir(parents=True)
    shutil.copy(VECTORS / "erasure_cert_v1_ledger.jsonl", session_dir / "events.jsonl")
    report = verify_certificate_bytes((VECTORS / "erasure_cert_v1.json").read_bytes(), trusted=_trusted(), data_dir=tmp_path)
    assert report.verdict == "verified", report.failed


def test_a_ledger_that_still_holds_an_erased_text_fails_ledger_erased(tmp_path: Path) -> None:
    gen = _generator()
    events, record = gen.build_events()
    session_dir = tmp_path / "sessions" / "vector-erasure"
    session_dir.mkdir(parents=True)
    lines = [e.to_line() if e.seq != 1 else gen.erased_line(e) for e in [*events, record]]  # seq 0 kept whole
    (session_dir / "events.jsonl").write_bytes(b"".join(lines))
    report = verify_certificate_bytes((VECTORS / "erasure_cert_v1.json").read_bytes(), trusted=_trusted(), data_dir=tmp_path)
    assert "ledger.erased" in {c.name for c in report.failed}


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_control_review.py):
# A hostile review of forgetting (issue 10): a certificate checked with the data directory is never VERIFIED while the
# deletion it certifies is unfinished or while a stored receipt still holds an erased text.
# --------------------------------------------------------------------------------------------------------------------


KILLED_DELETING = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from control import forget as control
from storage.files.retrieval.db import Index
Index.purge_session = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)  # the folder is gone, the rest is not
control.forget_session(sys.argv[2], "alice")
"""


def test_a_session_certificate_is_not_verified_while_its_deletion_is_unfinished(tmp_path: Path) -> None:
    import subprocess
    import sys

    from storage.files.receipts.certificate_io import verify_certificate_bytes

    from ..forget_support import marked_session

    root = Path(__file__).resolve().parents[2]
    data = tmp_path / "data"
    eng = engine(data)
    marked_session(eng)
    key = [eng.key.public_key]
    eng.index.close()
    eng.ledger.close()
    child = subprocess.run([sys.executable, "-c", KILLED_DELETING, str(root), str(data)], capture_output=True, text=True, timeout=60)
    assert child.returncode == -9, child.stderr[-2000:]
    (cert_path,) = (data / "erasures").glob("erasure-alice-all-*.json")  # written first: it holds only hashes
    assert not (data / "sessions" / "alice").exists() and control.pending(data)
    report = verify_certificate_bytes(cert_path.read_bytes(), trusted=key, data_dir=data)
    assert report.verdict == "failed" and [c.name for c in report.failed] == ["ledger.deleted"]
    assert ".pending-alice.json" in report.failed[0].message
    # a crash in the middle of removing the folder: the ledger went first, a receipt is still there
    receipts = data / "sessions" / "alice" / "receipts"
    receipts.mkdir(parents=True)
    (receipts / "rcpt_00000000000000000000000000000000.json").write_text("{}")
    restarted = engine(data)
    control.recover(data, ledger=restarted.ledger, index=restarted.index, key=restarted.key)
    assert not (data / "sessions" / "alice").exists()  # recover removed the folder again
    assert verify_certificate_bytes(cert_path.read_bytes(), trusted=key, data_dir=data).verdict == "verified"
    receipts.mkdir(parents=True)
    (receipts / "rcpt_00000000000000000000000000000000.json").write_text("{}")
    report = verify_certificate_bytes(cert_path.read_bytes(), trusted=key, data_dir=data)
    assert [c.name for c in report.failed] == ["ledger.deleted"] and "sessions/alice" in report.failed[0].message


@pytest.mark.parametrize("fmt", [2, 1])
def test_a_certificate_checked_with_the_data_directory_fails_while_a_stored_receipt_still_holds_an_erased_text(tmp_path: Path, fmt: int) -> None:
    """The certificate lists receipts as redacted or withdrawn: with --data, a receipt file that still discloses an
    erased event (a copy put back, a redaction undone) or a withdrawn one still stored is caught, not VERIFIED."""
    from chat.engine import Engine
    from chat.llm import LLM
    from storage.files.receipts.certificate_io import verify_certificate_bytes

    from ..forget_support import marked_session

    data = tmp_path / "data"
    eng = Engine(data, llm=LLM(api_key=""), receipt_format=fmt)
    mem_seq, turns = marked_session(eng)
    old = {t.receipt_path: t.receipt_path.read_bytes() for t in turns}
    result = control.forget(data, "alice", [mem_seq], ledger=eng.ledger, index=eng.index, key=eng.key)
    raw = result.certificate_path.read_bytes()
    key = [eng.key.public_key]
    report = verify_certificate_bytes(raw, trusted=key, data_dir=data)
    assert report.verdict == "verified" and [c.status for c in report.checks if c.name == "ledger.receipts"] == ["pass"]
    path, before = next(iter(old.items()))
    path.write_bytes(before)  # the unredacted receipt, back in the data directory
    report = verify_certificate_bytes(raw, trusted=key, data_dir=data)
    assert [c.name for c in report.failed] == ["ledger.receipts"]
    assert path.stem in str(report.failed[0].found)
    assert verify_certificate_bytes(raw, trusted=key).verdict == "verified"  # offline: the signed claims still hold
