"""Ledger.erase of more than 64 events: several erasure records (64 entries each at most, consecutive) written in
the same single-rename rewrite; the verifier checks them in a row; a kill at any step leaves the old file or the
new one; the certificate covers every record."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import storage.files.ledger.rewrite
from ledger.erasing import MAX_RECORD_ENTRIES
from ledger.event import Event, erasure_record_text, is_erasure_record, make_event
from ledger.messages import Message
from receipts import certificate as cert
from storage.common.keyfiles import load_or_create
from storage.files.ledger.store import Ledger
from storage.files.receipts.certificate_io import verify_certificate_bytes

ROOT = Path(__file__).resolve().parents[2]
S = "alice"
N = 300
ERASE = list(range(1, N, 2))  # 150 seqs: every odd one


def filled(tmp_path: Path) -> Ledger:
    led = Ledger(tmp_path)
    led.append_many(S, [Message("user" if i % 2 == 0 else "assistant", f"line {i} holds word{i}x", {"n": i}) for i in range(N)])
    return led


def lines(led: Ledger) -> list[bytes]:
    return led.log_path(S).read_bytes().splitlines(keepends=True)


class TestSeveralRecords:
    def test_150_seqs_are_listed_by_three_consecutive_records_of_at_most_64(self, tmp_path: Path) -> None:
        led = filled(tmp_path)
        done = led.erase(S, ERASE, reason="asked")
        assert [len(r.meta["erasure"]["erased"]) for r in done.records] == [64, 64, 22]
        assert [r.seq for r in done.records] == [N, N + 1, N + 2] and done.record == done.records[-1]
        assert done.records[1].prev == done.records[0].chain and done.records[2].prev == done.records[1].chain
        listed = [e["seq"] for r in done.records for e in r.meta["erasure"]["erased"]]
        assert listed == ERASE and [e.seq for e in done.erased] == ERASE
        for r in done.records:
            assert is_erasure_record(r) and r.text == erasure_record_text(len(r.meta["erasure"]["erased"]))
            assert r.meta["erasure"]["reason"] == "asked" and r.ts == done.records[0].ts
        assert led.head(S) == (N + 3, done.record.chain)

    def test_the_ledger_verifies_with_every_erased_seq_and_no_word_left(self, tmp_path: Path) -> None:
        led = filled(tmp_path)
        led.erase(S, ERASE)
        data = led.log_path(S).read_bytes()
        assert all(f"word{s}x".encode() not in data for s in ERASE) and b"word2x" in data
        for fresh in (led, Ledger(tmp_path)):  # this writer's tail and a cold walk agree
            report = fresh.verify(S, parallel=False)
            assert report.ok and report.events == N + 3 and report.erased == tuple(ERASE), report.brk

    def test_all_records_land_in_one_rename(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        led = filled(tmp_path)
        steps: list[str] = []
        monkeypatch.setattr(storage.files.ledger.rewrite, "step_hook", steps.append)
        led.erase(S, ERASE)
        assert steps == ["written", "synced", "renamed", "dir_synced"]

    def test_appends_after_a_many_record_erasure_continue_the_chain_here_and_in_another_writer(self, tmp_path: Path) -> None:
        led = filled(tmp_path)
        other = Ledger(tmp_path)
        other.head(S)  # this writer verified the file before the erasure
        done = led.erase(S, ERASE)
        assert led.append(S, "user", "after").seq == N + 3
        ev = other.append(S, "user", "from the other writer")
        assert ev.seq == N + 4 and Ledger(tmp_path).verify(S, parallel=False).ok
        assert led.erase(S, [0]).record.seq == N + 5 == done.record.seq + 3

    def test_exactly_64_seqs_write_one_record_and_65_write_two(self, tmp_path: Path) -> None:
        led = filled(tmp_path)
        assert len(led.erase(S, ERASE[:MAX_RECORD_ENTRIES]).records) == 1
        two = led.erase(S, ERASE[MAX_RECORD_ENTRIES : 2 * MAX_RECORD_ENTRIES + 1])
        assert [len(r.meta["erasure"]["erased"]) for r in two.records] == [64, 1]
        assert led.verify(S, parallel=False).ok


# -- the verifier's rules over records in a row ------------------------------------------------
def _rechained(led: Ledger, tmp_path: Path, groups: list[list[dict[str, Any]]]) -> Ledger:
    """The erased ledger with its records replaced by records listing `groups` (entries), chained properly."""
    kept = [ln for ln in lines(led) if b'"erasure":' not in ln]
    prev = bytes.fromhex(json.loads(kept[-1])["chain"])
    out = list(kept)
    for i, entries in enumerate(groups):
        rec = make_event(
            session=S, seq=len(out), prev=prev, role="system", text=erasure_record_text(len(entries)),
            meta={"erasure": {"v": 1, "erased": entries, "reason": None}}, ts="2026-01-02T03:04:05.000000Z",
            event_id="evt_" + hashlib.sha256(b"rec %d" % i).hexdigest()[:32], salt=hashlib.sha256(b"salt %d" % i).digest(),
        )
        out.append(rec.to_line())
        prev = bytes.fromhex(rec.chain)
    where = tmp_path / "forged"
    (where / "sessions" / S).mkdir(parents=True)
    (where / "sessions" / S / "events.jsonl").write_bytes(b"".join(out))
    return Ledger(where)


@pytest.fixture
def erased(tmp_path: Path) -> tuple[Ledger, list[list[dict[str, Any]]]]:
    led = filled(tmp_path)
    done = led.erase(S, ERASE)
    return led, [list(r.meta["erasure"]["erased"]) for r in done.records]


class TestRulesInARow:
    def test_the_same_records_rebuilt_verify(self, erased: tuple[Ledger, list[list[dict[str, Any]]]], tmp_path: Path) -> None:
        led, groups = erased
        report = _rechained(led, tmp_path, groups).verify(S, parallel=False)
        assert report.ok and report.erased == tuple(ERASE)

    def test_a_seq_listed_by_two_records_in_a_row_is_a_bad_erasure_record(self, erased: tuple[Ledger, list[list[dict[str, Any]]]], tmp_path: Path) -> None:
        led, groups = erased
        groups[1] = [groups[0][0], *groups[1]]
        report = _rechained(led, tmp_path, groups).verify(S, parallel=False)
        assert not report.ok and report.brk is not None and report.brk.kind == "bad_erasure_record"
        assert report.brk.seq == N + 1 and f"seq {ERASE[0]} is already listed by the erasure record at seq {N}" in report.brk.message

    def test_a_record_that_lists_a_seq_not_erased_is_a_bad_erasure_record(self, erased: tuple[Ledger, list[list[dict[str, Any]]]], tmp_path: Path) -> None:
        led, groups = erased
        whole = json.loads(lines(led)[2])
        groups[2] = [*groups[2], {"seq": 2, "id": whole["id"], "digest": whole["digest"], "commit": "0" * 64}]
        report = _rechained(led, tmp_path, groups).verify(S, parallel=False)
        assert report.brk is not None and report.brk.kind == "bad_erasure_record" and "seq 2, which is not in erased form" in report.brk.message

    def test_a_missing_middle_record_leaves_its_lines_unrecorded(self, erased: tuple[Ledger, list[list[dict[str, Any]]]], tmp_path: Path) -> None:
        led, groups = erased
        report = _rechained(led, tmp_path, [groups[0], groups[2]]).verify(S, parallel=False)
        assert report.brk is not None and report.brk.kind == "erased_unrecorded" and report.brk.seq == groups[1][0]["seq"]


# -- crashes ----------------------------------------------------------------------------------
CRASHER = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
import storage.files.ledger.rewrite
from storage.files.ledger.store import Ledger
step = sys.argv[3]
def hook(name):
    if name == step:
        os.kill(os.getpid(), signal.SIGKILL)
storage.files.ledger.rewrite.step_hook = hook
Ledger(sys.argv[2]).erase("alice", list(range(1, 300, 2)), reason="crash test")
print("survived")
"""


@pytest.mark.parametrize("step, new", [("written", False), ("synced", False), ("renamed", True), ("dir_synced", True)])
def test_a_kill_at_any_step_of_a_150_seq_erasure_leaves_the_old_file_or_the_whole_new_one(tmp_path: Path, step: str, new: bool) -> None:
    led = filled(tmp_path)
    old = led.log_path(S).read_bytes()
    child = subprocess.run([sys.executable, "-c", CRASHER, str(ROOT), str(tmp_path), step], capture_output=True, text=True, timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr
    fresh = Ledger(tmp_path)  # a restart: opening the session removes a crashed rewrite's temp file
    fresh.head(S)
    report = fresh.verify(S, parallel=False)
    assert report.ok, report.brk
    if new:
        assert report.events == N + 3 and report.erased == tuple(ERASE)
    else:
        assert led.log_path(S).read_bytes() == old and report.erased == () and report.events == N
    assert not storage.files.ledger.rewrite.temp_path(led.log_path(S)).exists()


# -- the certificate over several records ----------------------------------------------------
def _certificate(data: Path, led: Ledger, records: list[Event], erased: list[int]) -> bytes:
    """A certificate as control.steps.finish signs one (records, proofs, checkpoint after the last)."""
    from receipts.body import sign_checkpoint
    from storage.files.receipts import files

    key = load_or_create(data)
    store = files.synced_tree(data, led, S)
    try:
        size = records[-1].seq + 1
        cp = sign_checkpoint(session=S, tree_size=size, root=store.root(size), chain_head=records[-1].chain, issued_at="2026-01-02T03:04:05.000000Z", key=key)
        rows = [cert.erased_entry(ev.to_dict(), store.inclusion_proof(ev.seq, size)) for ev in led.read_events(S, erased)]
        body = cert.events_body(
            session=S, erased=rows, redacted=[], withdrawn=[], records=[(r.to_dict(), store.inclusion_proof(r.seq, size)) for r in records],
            checkpoint=cp, issued_at="2026-01-02T03:04:05.000000Z",
        )
    finally:
        store.close()
    return cert.certificate_file_bytes(cert.sign_certificate(body, key))


def _body(raw: bytes) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(base64.b64decode(json.loads(raw)["payload"]))
    return body


def _resigned(data: Path, body: dict[str, Any]) -> bytes:
    return cert.certificate_file_bytes(cert.sign_certificate(body, load_or_create(data)))


@pytest.fixture
def certified(tmp_path: Path) -> tuple[Path, bytes]:
    led = filled(tmp_path)
    done = led.erase(S, ERASE)
    return tmp_path, _certificate(tmp_path, led, done.records, ERASE)


def _failed(data: Path, raw: bytes) -> set[str]:
    return {c.name for c in verify_certificate_bytes(raw, trusted=[load_or_create(data).public_key]).failed}


class TestCertificate:
    def test_it_holds_every_record_and_verifies_offline_and_with_the_data(self, certified: tuple[Path, bytes]) -> None:
        data, raw = certified
        body = _body(raw)
        assert [r["event"]["seq"] for r in body["records"]] == [N, N + 1, N + 2] and len(body["erased"]) == 150
        trusted = [load_or_create(data).public_key]
        assert verify_certificate_bytes(raw, trusted=trusted).verdict == "verified"
        report = verify_certificate_bytes(raw, trusted=trusted, data_dir=data)
        assert report.verdict == "verified", report.failed

    def test_a_missing_record_fails_record_lists_and_a_gap_in_the_run_fails_structure_too(self, certified: tuple[Path, bytes]) -> None:
        data, raw = certified
        for drop, expected in ((0, {"record.lists"}), (1, {"record.lists", "certificate.structure", "record.chain_link"})):
            body = _body(raw)
            del body["records"][drop]
            assert _failed(data, _resigned(data, body)) == expected, drop

    def test_a_missing_last_record_fails_structure_and_record_lists(self, certified: tuple[Path, bytes]) -> None:
        data, raw = certified
        body = _body(raw)
        body["records"].pop()
        assert {"record.lists", "certificate.structure"} <= _failed(data, _resigned(data, body))

    def test_an_extra_record_fails_record_lists(self, certified: tuple[Path, bytes]) -> None:
        data, raw = certified
        body = _body(raw)
        body["records"].insert(1, copy.deepcopy(body["records"][0]))
        assert "record.lists" in _failed(data, _resigned(data, body))

    def test_an_erased_event_dropped_from_the_list_fails_record_lists(self, certified: tuple[Path, bytes]) -> None:
        data, raw = certified
        body = _body(raw)
        del body["erased"][70]
        assert _failed(data, _resigned(data, body)) == {"record.lists"}

    def test_a_tampered_middle_record_fails_its_digest_and_the_next_link(self, certified: tuple[Path, bytes]) -> None:
        data, raw = certified
        body = _body(raw)
        body["records"][1]["event"]["ts"] = "2027-01-02T03:04:05.000000Z"
        assert "record.digest" in _failed(data, _resigned(data, body))
        body = _body(raw)
        body["records"][1]["event"]["chain"] = "1" * 64
        assert {"record.chain_link"} <= _failed(data, _resigned(data, body))

    def test_records_out_of_order_fail_structure(self, certified: tuple[Path, bytes]) -> None:
        data, raw = certified
        body = _body(raw)
        body["records"][0], body["records"][1] = body["records"][1], body["records"][0]
        assert "certificate.structure" in _failed(data, _resigned(data, body))

    def test_a_record_the_ledger_does_not_hold_fails_ledger_record(self, certified: tuple[Path, bytes]) -> None:
        data, raw = certified
        body = _body(raw)
        body["records"][1]["event"]["id"] = "evt_" + "0" * 32
        report = verify_certificate_bytes(_resigned(data, body), trusted=[load_or_create(data).public_key], data_dir=data)
        assert "ledger.record" in {c.name for c in report.failed}


def test_the_generator_vectors_single_record_shape_is_a_one_item_records_list() -> None:
    body = json.loads((ROOT / "tests" / "vectors" / "erasure_cert_v1_body.json").read_text())
    assert "record" not in body and len(body["records"]) == 1 and set(body["records"][0]) == {"event", "proof"}

