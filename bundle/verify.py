"""Verify a bundle before anything is imported (docs/FORMAT.md §21): one report, one row per check.

Rows, in order: `bundle.structure` (the zip passed every structural refusal: bundle.read, bundle.layout), `manifest.signature`
(DSSE over the manifest by a --trust key; with none, by the key the bundle carries, for self-consistency only:
not_verifiable), `manifest.members` (the zip holds exactly the members the manifest lists), `members.hashes`
(each member's size and sha256), `ledger.chain` (the ledger re-walked from genesis by the auditor: every digest and
chain hash recomputed, as many events as the manifest says, ending at its chain head), the checkpoint rows of
receipts.checkpoints.check_since with the bundle's checkpoint as both the kept and the current one (`checkpoint.*`:
its signature, its root and chain head over the recomputed digests, an RFC 9162 consistency proof from it to the
whole ledger, and that it covers the whole ledger), then one row per receipt (`receipt <id>`: every check of
receipts.verify against the ledger the bundle carries) and per erasure certificate (`certificate <name>`).

Verdict: `verified` (nothing failed, every row passed with a trusted key), `failed` (a row failed), `unverified`
(nothing failed, but some row could not be checked — typically no --trust key). A bundle whose structure is
refused never gets a report: `verify_file` raises BundleError.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from bundle.format import CHECKPOINT_NAME, MANIFEST_PAYLOAD_TYPE
from bundle.notes import FOLDER as NOTES
from bundle.notes import NOTE_RE, check_notes
from bundle.read import Opened, check_zip, open_bundle
from receipts.body import MalformedReceipt, parse_receipt
from receipts.certificate import MalformedCertificate, parse_certificate
from receipts.certificate_check import verify_certificate
from receipts.checkpoints import MalformedCheckpoint, check_since, parse_checkpoint
from receipts.cosignature import Policy
from receipts.dsse import verify_envelope
from receipts.keys import PublicKey
from receipts.report import Check, Report, Rows
from receipts.verify import LedgerFacts, verify_receipt
from storage.offline import CACHE, Auditor, LedgerAt, certificate_view, leftovers, owned_folder, receipt_problems

VERDICT_EXIT = {"verified": 0, "failed": 1, "unverified": 3}


@dataclass(frozen=True, slots=True)
class BundleReport(Report):
    """One row per check (receipts.report.Check). No truth value: read `.verdict`."""

    path: str
    session: str | None
    events: int | None
    checks: tuple[Check, ...]

    def complete(self) -> bool:
        """Every row was checked and passed (a receipt's or certificate's own verdict is in its one row)."""
        return bool(self.checks) and not self.not_verifiable

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "session": self.session,
            "events": self.events,
            "verdict": self.verdict,
            "failed": len(self.failed),
            "not_verifiable": len(self.not_verifiable),
            "checks": [c.to_dict() for c in self.checks],
        }


def _signature(r: Rows, opened: Opened, trusted: Sequence[PublicKey]) -> Sequence[PublicKey]:
    """The manifest.signature row; returns the keys the other rows are checked under: `trusted` when a trusted key
    signed the manifest, none (the bundle's own keys, for self-consistency only) when no trusted key did."""
    env, manifest = opened.envelope, opened.manifest
    if manifest.signer not in {s.keyid for s in env.signatures}:
        r.add("manifest.signature", False, "the manifest names a signer that did not sign it", manifest.signer, [s.keyid for s in env.signatures])
        return trusted
    if trusted and any(c.passed for c in verify_envelope(env, trusted, MANIFEST_PAYLOAD_TYPE)):
        r.add("manifest.signature", True, f"the manifest is signed by a trusted key ({manifest.signer})")
        return trusted
    own = [k for k in opened.keys if k.key_id == manifest.signer]
    if not (own and any(c.passed for c in verify_envelope(env, own, MANIFEST_PAYLOAD_TYPE))):
        why = "no --trust key signed it and the" if trusted else "the"
        r.add("manifest.signature", False, f"{why} manifest's signature does not verify even with the key the bundle carries", manifest.signer, "no valid signature")
        return trusted
    if trusted:
        names = ", ".join(k.key_id for k in trusted)
        r.na("manifest.signature", f"signed by {manifest.signer}, not a --trust key ({names}): self-consistent under the key the bundle carries, not verified")
    else:
        r.na("manifest.signature", f"signed by {manifest.signer}, the key the bundle carries: self-consistent, but no --trust key was given")
    return ()


def _ledger(r: Rows, facts: LedgerFacts, opened: Opened) -> bool:
    m = opened.manifest
    if not facts.exists or facts.problem is not None:
        r.add("ledger.chain", False, f"the ledger was not read: {facts.problem or 'missing'}", "events.jsonl", "unreadable")
        return False
    brk = facts.first_break
    if brk is not None:
        r.add("ledger.chain", False, f"chain broken at line {brk.line} (seq {brk.seq}, {brk.kind}): {brk.message}", brk.expected, brk.found)
        return False
    if facts.verified != m.events:
        r.add("ledger.chain", False, f"the ledger holds {facts.verified:,} events, the manifest says {m.events:,}", m.events, facts.verified)
        return False
    head = facts.event_at(facts.verified - 1).get("chain")
    if head != m.chain_head:
        r.add("ledger.chain", False, "the ledger's last chain hash is not the manifest's chain_head", m.chain_head, head)
        return False
    erased = f", {len(facts.erased):,} erased lines verified from their commitments" if facts.erased else ""
    r.add("ledger.chain", True, f"the ledger re-walks from genesis: {facts.verified:,} events, every digest and chain hash recomputed{erased}")
    return True


def _checkpoint(r: Rows, opened: Opened, facts: LedgerFacts, trusted: Sequence[PublicKey]) -> None:
    path = opened.data / "sessions" / opened.manifest.session / "checkpoint.json"
    try:
        cp = parse_checkpoint(path.read_bytes(), source=CHECKPOINT_NAME)
    except (MalformedCheckpoint, OSError, ValueError) as exc:
        r.add("checkpoint.shape", False, f"{CHECKPOINT_NAME}: {exc}", "a signed checkpoint", "malformed")
        return
    own = None if trusted else next((k for k in opened.keys if k.key_id == cp.get("key_id", opened.manifest.signer)), opened.keys[0] if opened.keys else None)
    since = check_since(opened.manifest.session, cp, facts, cp, trusted, own)
    names = {"kept.signature": "checkpoint.signature", "kept.session": "checkpoint.session", "kept.root": "checkpoint.root",
             "kept.chain_head": "checkpoint.chain_head", "ledger.consistency": "checkpoint.consistency", "current.ledger": "checkpoint.covers_ledger"}
    for c in since.checks:
        if c.name in names:
            r.take(names[c.name], c)


def _receipts(r: Rows, opened: Opened, facts: LedgerFacts, trusted: Sequence[PublicKey], policy: Policy | None = None) -> None:
    for file_name, read in opened.words("receipts", "rcpt_*.json"):
        stem = file_name.removesuffix(".json")
        name = f"receipt {stem}"
        try:
            receipt = parse_receipt(read())
        except (MalformedReceipt, ValueError) as exc:
            r.add(name, False, f"not a well-formed receipt: {exc}", "a receipt", "malformed")
            continue
        if receipt.receipt_id != stem or receipt.session != opened.manifest.session:
            r.add(name, False, "the file's name or session is not the receipt's own", f"{stem} of {opened.manifest.session}", f"{receipt.receipt_id} of {receipt.session}")
            continue
        own = None if trusted else next((k for k in opened.keys), None)
        report = verify_receipt(receipt, list(trusted), facts, untrusted=own, policy=policy)
        verdict = report.verdict
        if verdict == "failed":
            first = report.failed[0]
            r.add(name, False, f"{len(report.failed)} check(s) failed against the bundle's ledger, first {first.name}: {first.message}", first.expected, first.found)
        elif verdict == "verified":
            r.add(name, True, f"every check passed against the bundle's ledger ({len(report.passed)} rows)")
        else:
            r.na(name, f"nothing failed against the bundle's ledger; {len(report.not_verifiable)} row(s) not verifiable (no --trust key?)")


def _certificates(r: Rows, opened: Opened, facts: LedgerFacts, trusted: Sequence[PublicKey]) -> None:
    session = opened.manifest.session
    view = certificate_view(facts)
    receipts = None if opened.ledger is None else _Unnamed(opened)
    for file_name, read in opened.words("certificates", "*.json"):
        name = f"certificate {file_name}"
        try:
            cert = parse_certificate(read())
        except (MalformedCertificate, ValueError) as exc:
            r.add(name, False, f"not a well-formed certificate: {exc}", "a certificate", "malformed")
            continue
        if cert.session != session:
            r.add(name, False, "the certificate is for another session", session, cert.session)
            continue
        signer = str(cert.body["checkpoint"]["key_id"])
        foreign = None if any(k.key_id == signer for k in opened.keys) else f"signed by {signer}, a key the bundle does not carry"
        v = dataclasses.replace(view, foreign=foreign, leftovers=leftovers(opened.data, session), receipt_problems=receipt_problems(opened.data, session, receipts))
        own = None if trusted else next((k for k in opened.keys if k.key_id == signer), None)
        report = verify_certificate(cert, list(trusted), v, untrusted=own)
        if report.verdict == "failed":
            first = report.failed[0]
            r.add(name, False, f"{len(report.failed)} check(s) failed against the bundle's ledger, first {first.name}: {first.message}", first.expected, first.found)
        elif report.verdict == "verified":
            r.add(name, True, "every check passed against the bundle's ledger")
        else:
            r.na(name, "nothing failed against the bundle's ledger; some rows not verifiable (no --trust key?)")


def _notes(r: Rows, opened: Opened, facts: LedgerFacts, trusted: Sequence[PublicKey], policy: Policy | None) -> None:
    """§21.1: each witnessed checkpoint the bundle carries (notes/<size>.note), against its ledger, under `policy`."""
    folder = opened.data / "sessions" / opened.manifest.session / NOTES
    names = sorted((m.name for m in opened.manifest.members if NOTE_RE.fullmatch(m.name)), key=lambda n: int(n[len(NOTES) + 1 : -5]))
    notes = [(n, (folder / n.split("/", 1)[1]).read_bytes()) for n in names]
    check_notes(
        r, notes, session=opened.manifest.session, verified=facts.verified, root_at=facts.root_at,
        chain_at=lambda n: facts.event_at(n - 1).get("chain"), trusted=trusted, own=[] if trusted else opened.keys, policy=policy,
    )


def verify_opened(opened: Opened, trusted: Sequence[PublicKey] = (), *, policy: Policy | None = None) -> BundleReport:
    """The checks over a bundle `bundle.read.open_bundle` accepted (over its staging folder and, when opened
    `unnamed`, its nameless files); nothing of the walk is kept after (its audit cache is in a folder of its own).
    `policy` (a c2sp.org/tlog-policy): the witness cosignatures the bundle's receipts and notes carry are checked
    under it (§21.1), and a bundle with no witnessed note fails its quorum unless the policy needs none."""
    r = Rows()
    m = opened.manifest
    r.add("bundle.structure", True, f"one canonical zip of {len(m.members) + 1} members from byte 0 to its end record: names, types, sizes, ratios and totals within the caps, no member twice or sharing bytes")
    trusted = _signature(r, opened, trusted)
    members_ok = not opened.extra and not opened.missing
    r.add("manifest.members", members_ok,
          f"the zip holds exactly the {len(m.members)} members the manifest lists" if members_ok
          else f"the zip's members are not the manifest's: {len(opened.extra)} it does not list, {len(opened.missing)} it lists missing",
          "none extra, none missing", f"extra {opened.extra}, missing {opened.missing}")
    r.add("members.hashes", not opened.mismatches,
          f"every member's size and sha256 equal the manifest's ({opened.bytes_read:,} bytes)" if not opened.mismatches
          else f"{len(opened.mismatches)} member(s) differ from the manifest's size or sha256, first {opened.mismatches[0]}",
          "the manifest's sizes and sha256", "; ".join(opened.mismatches[:3]) + (f" (+{len(opened.mismatches) - 3} more)" if len(opened.mismatches) > 3 else ""))
    if opened.extra or opened.missing or opened.mismatches:
        r.na("ledger.chain", "not checked: the members are not the ones the manifest signed")
        return BundleReport(str(opened.path), m.session, m.events, tuple(r.rows))
    # The audit cache (digests and offsets) goes in a private folder of this check, never the verifier's cache: a
    # staging folder is new each time, so a cache kept under its name would only pile up (one folder per bundle).
    with owned_folder() as scratch, Auditor.of(LedgerAt(opened.data, ledger=opened.ledger, cache=scratch / CACHE), full=True).facts(m.session) as facts:
        if _ledger(r, facts, opened):
            _checkpoint(r, opened, facts, trusted)
            _receipts(r, opened, facts, trusted, policy)
            _certificates(r, opened, facts, trusted)
            _notes(r, opened, facts, trusted, policy)
    return BundleReport(str(opened.path), m.session, m.events, tuple(r.rows))


class _Unnamed:
    """The receipts an unnamed Opened holds, as storage.files.receipts.certificate_io reads a store's (ReceiptReader)."""

    def __init__(self, opened: Opened) -> None:
        self.read: dict[str, Callable[[], bytes]] = {n.removesuffix(".json"): f for n, f in opened.words("receipts", "rcpt_*.json")}

    def receipt_ids(self, session: str) -> list[str]:
        return list(self.read)

    def read_receipt(self, session: str, receipt_id: str) -> bytes:
        return self.read[receipt_id]()


STAGING_PREFIX = "mre-bundle-"


@contextmanager
def staged(
    path: str | os.PathLike[str], *, under: str | os.PathLike[str] | None = None, prefix: str = STAGING_PREFIX, unnamed: bool = False
) -> Iterator[Opened]:
    """Open the bundle at `path` into `<under>/<prefix>…/data` (`under`: the system's temporary folder by default),
    a private folder removed afterwards. Its owner lock is held meanwhile, so a folder whose process died (SIGKILL)
    is removed by the next staging of the same `prefix` there (storage.files.receipts.ledger_copy.owned_folder). `unnamed`: the
    members holding the session's words have no name on disk (bundle.read.open_bundle), so such a folder holds none."""
    z = check_zip(path)  # a structural refusal comes before any folder is made
    try:
        with owned_folder(prefix, under) as tmp:
            opened = open_bundle(path, tmp / "data", unnamed=unnamed, checked=z)
            try:
                yield opened
            finally:
                opened.close()
    finally:
        z.close()


def verify_file(path: str | os.PathLike[str], trusted: Sequence[PublicKey] = (), *, policy: Policy | None = None) -> BundleReport:
    """Check the bundle at `path` (BundleError if its structure is refused), its words never named on disk; the
    witnesses' cosignatures under `policy` when given."""
    with staged(path, unnamed=True) as opened:
        return verify_opened(opened, trusted, policy=policy)
