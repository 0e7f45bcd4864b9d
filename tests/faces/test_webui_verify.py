"""Verifying uploads and the tamper button: privacy rule, modes, one-byte mutations (no server)."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest

from chat.engine import Engine
from chat.llm import LLM
from ledger.canonical import canonical_json
from receipts.body import MalformedReceipt
from receipts.keys import parse_public_key
from storage.files.receipts.api import verify_bytes
from storage.files.receipts.audit import cache_dir
from webui import render_verify as rv
from webui.service import Service
from webui.sessions import new_session_key, session_id
from webui.tamper import TARGETS, TamperError, tamper


def offline_engine(path: Path) -> Engine:
    """An engine whose model is the offline stand-in, whatever the environment says (tests never touch the network)."""
    return Engine(path, llm=LLM(api_key=""))


@pytest.fixture
def service(tmp_path) -> Service:
    return Service(offline_engine(tmp_path / "data"))


def receipt_of(service: Service, key: str, *messages: str) -> bytes:
    turn = None
    for m in messages:
        turn = service.turn(key, m, 8)
    assert turn is not None
    return turn.receipt_path.read_bytes()


def payload_of(raw: bytes) -> bytes:
    return base64.b64decode(json.loads(raw)["payload"])


def with_body(raw: bytes, **changes: object) -> bytes:
    env = json.loads(raw)
    body = json.loads(payload_of(raw))
    body.update(changes)
    env["payload"] = base64.b64encode(canonical_json(body)).decode()
    return json.dumps(env).encode()


class TestWhoseLedger:
    def test_your_own_receipt_is_checked_against_your_ledger(self, service: Service) -> None:
        key = new_session_key()
        raw = receipt_of(service, key, "I moved to Lisbon", "Where did I move?")
        report, mode = service.verify(raw, key)
        assert mode == rv.MODE_LEDGER and report.mode == "ledger"
        assert report.verdict == "verified" and not report.not_verifiable

    def test_a_receipt_from_another_session_is_never_checked_against_its_ledger(self, service: Service) -> None:
        owner, visitor = new_session_key(), new_session_key()
        raw = receipt_of(service, owner, "my secret plan")
        report, mode = service.verify(raw, visitor)
        assert mode == rv.MODE_OTHER_SESSION and report.mode == "offline"
        assert {c.name for c in report.not_verifiable} >= {"ledger.events", "ledger.chain", "ledger.root"}
        assert report.verdict == "verified"  # signature and proofs hold; the ledger was not consulted
        assert not cache_dir(service.data_dir, session_id(owner)).exists()  # the auditor never opened it

    def test_without_a_key_only_the_offline_checks_run(self, service: Service) -> None:
        raw = receipt_of(service, new_session_key(), "hello there")
        for key in (None, "", "not-a-key"):
            _report, mode = service.verify(raw, key)
            assert mode == rv.MODE_OTHER_SESSION

    def test_a_deleted_ledger_is_said_so_not_failed(self, service: Service) -> None:
        key = new_session_key()
        raw = receipt_of(service, key, "remember this")
        shutil.rmtree(service.data_dir / "sessions" / session_id(key))
        report, mode = service.verify(raw, key)
        assert mode == rv.MODE_NO_LEDGER and report.verdict == "verified"
        assert "no ledger here any more" in rv.verdict_markdown(report, mode)

    def test_a_receipt_signed_by_another_key_fails(self, service: Service, tmp_path) -> None:
        other = Service(offline_engine(tmp_path / "elsewhere"))
        key = new_session_key()
        raw = receipt_of(other, key, "signed elsewhere")
        report, _mode = service.verify(raw, key)
        assert report.verdict == "failed"
        assert {c.name for c in report.failed} >= {"envelope.signature", "checkpoint.signature"}


class TestNotAReceipt:
    @pytest.mark.parametrize(
        "raw",
        [b"not json at all", b"[]", b'{"payloadType": "x"}', b"\xff\xfe", b'{"a": 1, "a": 2}'],
        ids=["text", "array", "not-an-envelope", "bad-utf8", "duplicate-key"],
    )
    def test_non_receipts_raise_the_parse_family(self, service: Service, raw: bytes) -> None:
        with pytest.raises(MalformedReceipt):
            service.verify(raw, None)

    def test_an_unknown_receipt_version_is_refused_by_name(self, service: Service) -> None:
        raw = with_body(receipt_of(service, new_session_key(), "hi"), v=3)
        with pytest.raises(MalformedReceipt, match="version 3 is unknown"):
            service.verify(raw, None)

    def test_the_message_is_shown_escaped(self) -> None:
        text = rv.malformed_markdown("malformed receipt: payload.type: expected 'x', found '<script>'")
        assert "<script>" not in text and "Not a receipt" in text


class TestReportTable:
    def test_one_row_per_check_with_values_only_on_failure(self, service: Service) -> None:
        key = new_session_key()
        raw = receipt_of(service, key, "a first note", "a second note")
        t, report, _mode = service.tamper(raw, "response", key)
        rows = rv.report_rows(report)
        assert len(rows) == len(report.checks)
        for row, check in zip(rows, report.checks, strict=True):
            assert row[0] == check.name and row[1] == rv.STATUS_LABEL[check.status]
            if check.status == "pass":
                assert row[3] == "" and row[4] == ""
        failed = [row for row in rows if row[1] == "❌\ufe0f FAIL" and row[0] == "response.hash"]
        assert failed and failed[0][3] and failed[0][4] and failed[0][3] != failed[0][4]

    def test_not_verifiable_is_its_own_label(self, service: Service) -> None:
        raw = receipt_of(service, new_session_key(), "hello")
        report, _ = service.verify(raw, None)
        assert "⚪ not verifiable here" in {row[1] for row in rv.report_rows(report)}

    def test_the_verdict_names_the_failed_checks(self, service: Service) -> None:
        key = new_session_key()
        _t, report, mode = service.tamper(receipt_of(service, key, "note"), "signature", key)
        text = rv.verdict_markdown(report, mode)
        assert "Failed" in text and "`envelope.signature`" in text


class TestTamper:
    # target -> checks that must catch a one-byte change there (others may catch it too). The app writes
    # format 2: a text is a disclosure beside the signature, caught by the row that opens its commitment.
    MUST_CATCH = {
        "memory": {"memory#1.content", "prompt.hash"},
        "response": {"response.content", "response.hash"},
        "query": {"query.content", "prompt.hash"},
        "root": {"envelope.signature", "checkpoint.signature", "ledger.root"},
        "signature": {"envelope.signature"},
    }
    # the same targets in a format-1 receipt (the committed vector, offline): the texts are signed
    MUST_CATCH_V1 = {
        "memory": {"envelope.signature", "memory#1.digest", "memory#1.inclusion", "prompt.hash"},
        "response": {"envelope.signature", "response.digest", "response.hash"},
        "query": {"envelope.signature", "query.digest", "prompt.hash"},
        "root": {"envelope.signature", "checkpoint.signature"},
        "signature": {"envelope.signature"},
    }

    def test_every_target_changes_exactly_one_byte(self, service: Service) -> None:
        raw = receipt_of(service, new_session_key(), "I like tea", "Do I like tea?")
        for target in TARGETS:
            t = tamper(raw, target)
            if target == "signature":
                a = base64.b64decode(json.loads(raw)["signatures"][0]["sig"])
                b = base64.b64decode(json.loads(t.raw)["signatures"][0]["sig"])
                assert payload_of(t.raw) == payload_of(raw)
            elif target in ("memory", "response", "query"):  # format 2: the disclosed text, in the file
                a, b = raw, t.raw
                assert payload_of(t.raw) == payload_of(raw) and t.part.startswith("receipt file")
            else:
                a, b = payload_of(raw), payload_of(t.raw)
            assert len(a) == len(b)
            assert [i for i in range(len(a)) if a[i] != b[i]] == [t.offset], target

    def test_every_one_byte_change_of_a_format_1_receipt_is_caught(self) -> None:
        vectors = Path(__file__).resolve().parents[1] / "vectors"
        raw = (vectors / "receipt_v1.json").read_bytes()
        pub = parse_public_key((vectors / "receipt_v1_pubkey.json").read_text())
        slipped = []
        for target, must in self.MUST_CATCH_V1.items():
            t = tamper(raw, target)
            assert t.part == ("decoded signature" if target == "signature" else "signed payload")
            a, b = (payload_of(raw), payload_of(t.raw)) if target != "signature" else (raw, raw)
            if target != "signature":
                assert [i for i in range(len(a)) if a[i] != b[i]] == [t.offset], target
            report = verify_bytes(t.raw, trusted=[pub])
            caught = {c.name for c in report.failed}
            if report.verdict != "failed" or not must <= caught:
                slipped.append((target, sorted(must - caught)))
        assert slipped == []

    def test_every_one_byte_change_is_caught(self, service: Service) -> None:
        key = new_session_key()
        raw = receipt_of(service, key, "I like tea", "Do I like tea?")
        slipped = []
        for target, must in self.MUST_CATCH.items():
            _t, report, mode = service.tamper(raw, target, key)
            assert mode == rv.MODE_LEDGER
            caught = {c.name for c in report.failed}
            if report.verdict != "failed" or not must <= caught:
                slipped.append((target, sorted(must - caught)))
        assert slipped == []

    def test_a_receipt_without_memories_tampers_the_answer_and_says_so(self, service: Service) -> None:
        raw = receipt_of(service, new_session_key(), "the very first message")
        t = tamper(raw, "memory")
        assert t.target == "response" and t.note and "no memories" in t.note

    def test_the_summary_shows_the_byte_and_the_catching_checks(self, service: Service) -> None:
        key = new_session_key()
        t, report, mode = service.tamper(receipt_of(service, key, "tea", "tea?"), "memory", key)
        text = rv.tamper_markdown(t, report, mode)
        assert "caught" in text and t.where in text and f"`{t.before}` → `{t.after}`" in text
        assert "`memory#1.content`" in text and "the signature does not cover it" in text

    def test_unknown_targets_and_non_receipts_are_refused(self, service: Service) -> None:
        raw = receipt_of(service, new_session_key(), "x marks")
        with pytest.raises(TamperError, match="unknown target"):
            tamper(raw, "everything")
        with pytest.raises(MalformedReceipt):
            tamper(b"{}", "memory")
