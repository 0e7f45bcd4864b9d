"""receipts.report: the one row (Check), row builder (Rows) and Report every verification returns.

The receipt, erasure-certificate, since-checkpoint and bundle reports are all built on it: these tests state
what they share (no truth value, zero checks is never verified, expected/found kept only on a failure).
"""

from __future__ import annotations

import pytest

from bundle.verify import BundleReport
from receipts.certificate_check import CertificateReport
from receipts.checkpoints import SinceReport
from receipts.report import ERASED, FAIL, NO_TRUSTED_KEY, NOT_VERIFIABLE, PASS, SELF_CONSISTENT, Check, Report, Rows
from receipts.verify import Report as ReceiptReport


def _empty() -> list[Report]:
    return [
        ReceiptReport("rcpt_x", "s", "offline", ()),
        CertificateReport("s", "events", "offline", ()),
        SinceReport("s", {"body": {"tree_size": 1}}, None, 0, (), ()),
        BundleReport("b.zip", "s", 0, ()),
    ]


def test_every_report_is_the_one_report() -> None:
    assert all(isinstance(r, Report) for r in _empty())


@pytest.mark.parametrize("report", _empty(), ids=lambda r: type(r).__name__)
def test_no_report_has_a_truth_value(report: Report) -> None:
    with pytest.raises(TypeError, match="no truth value"):
        bool(report)


@pytest.mark.parametrize("report", _empty(), ids=lambda r: type(r).__name__)
def test_a_report_with_zero_checks_is_not_verified(report: Report) -> None:
    assert report.verdict == "unverified"


def test_expected_and_found_are_kept_only_when_a_check_fails() -> None:
    r = Rows()
    r.add("a", True, "fine", "x", "y", "here")
    r.add("b", False, "broken", 1, 2, "there")
    r.na("c", "needs the ledger")
    assert r.rows == [
        Check("a", PASS, "fine", None, None, "here"),
        Check("b", FAIL, "broken", "1", "2", "there"),
        Check("c", NOT_VERIFIABLE, "needs the ledger"),
    ]


def test_a_signature_row_without_a_trusted_key_is_never_a_pass() -> None:
    r = Rows()
    r.untrusted("none", None, None)
    r.untrusted("good", "ed25519:k", True)
    r.untrusted("bad", "ed25519:k", False)
    assert [c.status for c in r.rows] == [NOT_VERIFIABLE] * 3
    assert r.rows[0].message == NO_TRUSTED_KEY
    assert r.rows[1].message.startswith(SELF_CONSISTENT) and "checks against it (ed25519:k)" in r.rows[1].message
    assert "does NOT check against it" in r.rows[2].message


def test_a_withheld_required_row_does_not_block_the_verdict_but_a_missing_one_does() -> None:
    ok = Check("envelope.signature", PASS, "signed")
    gone = Check("checkpoint.signature", ERASED, "not in this copy")
    assert ReceiptReport("rcpt_x", "s", "offline", (ok, gone)).verdict == "verified"
    assert ReceiptReport("rcpt_x", "s", "offline", (ok,)).verdict == "unverified"
    assert ReceiptReport("rcpt_x", "s", "offline", (ok, Check("x", FAIL, "no"))).verdict == "failed"


def test_a_bundle_row_not_verifiable_leaves_the_bundle_unverified() -> None:
    ok, na = Check("ledger.chain", PASS, "walked"), Check("manifest.signature", NOT_VERIFIABLE, "no --trust key")
    assert BundleReport("b.zip", "s", 1, (ok,)).verdict == "verified"
    assert BundleReport("b.zip", "s", 1, (ok, na)).verdict == "unverified"
