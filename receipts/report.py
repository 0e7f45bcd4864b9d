"""One report for every check this project makes (pure): a row per check, and a verdict that is never a bool.

A receipt (receipts.verify), an erasure certificate (receipts.certificate_check), a kept checkpoint
(receipts.checkpoints.check_since) and a bundle (bundle.verify) are all checked the same way: each
check adds one `Check` row through `Rows`, and the report built over those rows (a subclass of
`Report`) says "verified", "failed" or "unverified". A report has no truth value (sigstore moved away
from a truthy result because callers misused it), and a report with zero passing checks is never
verified.

Outcomes of a row: "pass", "fail", "not_verifiable" (the check needs something this run does not
have, such as the ledger: never a pass), and, for a format-2 receipt, "withheld" and "erased" (a
cited event's content is not in this copy, nor in the ledger: neither a pass nor a fail).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

PASS, FAIL, NOT_VERIFIABLE = "pass", "fail", "not_verifiable"
WITHHELD, ERASED = "withheld", "erased"  # format 2: a cited event's content is not in this copy (nor in the ledger)
HELD = (WITHHELD, ERASED)
SELF_CONSISTENT = "self-consistent: key taken from the data directory, not independently trusted"
NO_TRUSTED_KEY = "no trusted public key given (--trust PUBKEY)"
# a row's status, four wide, in the text reports
MARK = {PASS: "ok  ", FAIL: "FAIL", NOT_VERIFIABLE: "n/a ", WITHHELD: "held", ERASED: "gone"}


@dataclass(frozen=True, slots=True)
class Check:
    """One check: its name, outcome, a sentence, and (when it failed) what was expected and found, and where."""

    name: str
    status: str
    message: str
    expected: str | None = None
    found: str | None = None
    where: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "message": self.message,
            "expected": self.expected,
            "found": self.found,
            "where": self.where,
        }


class Rows:
    """The one row builder: every check of every report is added here, in the order it ran."""

    def __init__(self) -> None:
        self.rows: list[Check] = []

    def add(
        self, name: str, ok: bool, message: str, expected: object = None, found: object = None, where: str | None = None
    ) -> None:
        """A pass or a fail; `expected` and `found` are kept (as text) only when it failed."""
        exp = None if ok or expected is None else str(expected)
        fnd = None if ok or found is None else str(found)
        self.rows.append(Check(name, PASS if ok else FAIL, message, exp, fnd, where))

    def na(self, name: str, message: str, where: str | None = None) -> None:
        """Not verifiable here: never a pass."""
        self.rows.append(Check(name, NOT_VERIFIABLE, message, where=where))

    def untrusted(self, name: str, key_id: str | None, ok: bool | None) -> None:
        """A signature row without a trusted key: not verifiable, saying what a data directory's own key
        (`key_id`, None when there is none) showed: `ok`, the signature checks against it."""
        if key_id is None:
            self.na(name, NO_TRUSTED_KEY)
        else:
            does = "checks" if ok else "does NOT check"
            self.na(name, f"{SELF_CONSISTENT}; the signature {does} against it ({key_id}); {NO_TRUSTED_KEY}")

    def held(self, name: str, status: str, message: str, where: str | None = None) -> None:
        """WITHHELD or ERASED: what this copy does not carry."""
        self.rows.append(Check(name, status, message, where=where))

    def take(self, name: str, row: Check) -> None:
        """Another report's row, under a name of this one."""
        self.rows.append(dataclasses.replace(row, name=name))


class Report:
    """What every report shares: its `checks`, the rows by outcome, and the verdict.

    A subclass is a frozen dataclass with a `checks` field and names the rows it requires
    (`required`); its verdict is "failed" when a row failed, "verified" when at least one row
    passed and every required row passed (or, for a receipt, is withheld or erased), else
    "unverified". No truth value: read `.verdict`.
    """

    __slots__ = ()
    checks: tuple[Check, ...]
    read_instead: ClassVar[str] = ".verdict"  # what `bool(report)` tells a caller to read instead

    def __bool__(self) -> bool:
        raise TypeError(f"{type(self).__name__} has no truth value; read {self.read_instead}")

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == FAIL]

    @property
    def not_verifiable(self) -> list[Check]:
        return [c for c in self.checks if c.status == NOT_VERIFIABLE]

    @property
    def withheld(self) -> list[Check]:
        """Rows whose content this copy (and, for "erased", the ledger) does not carry: neither pass nor fail."""
        return [c for c in self.checks if c.status in HELD]

    @property
    def passed(self) -> list[Check]:
        return [c for c in self.checks if c.status == PASS]

    def status_of(self, name: str) -> str | None:
        """The outcome of the first row named `name`, or None when no row has that name."""
        return next((c.status for c in self.checks if c.name == name), None)

    @property
    def required(self) -> tuple[str, ...]:
        """The rows that must pass (or be withheld) for the report to be verified."""
        return ()

    def complete(self) -> bool:
        """Enough was checked: some row passed, and every required row passed or is withheld/erased."""
        passed = {c.name for c in self.checks if c.status == PASS}
        held = {c.name for c in self.checks if c.status in HELD}
        return bool(passed) and all(name in passed or name in held for name in self.required)

    @property
    def verdict(self) -> str:
        """'verified', 'failed' (some check failed) or 'unverified' (nothing failed, but not enough was checked)."""
        if self.failed:
            return "failed"
        return "verified" if self.complete() else "unverified"


__all__ = [
    "ERASED",
    "FAIL",
    "HELD",
    "MARK",
    "NOT_VERIFIABLE",
    "NO_TRUSTED_KEY",
    "PASS",
    "SELF_CONSISTENT",
    "WITHHELD",
    "Check",
    "Report",
    "Rows",
]
