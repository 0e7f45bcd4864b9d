"""Receipt verification (pure): a parsed receipt in, a report with one row per check out.

Every memory is named by its rank, `memory#1` … `memory#K`, in check names and in
`where` paths alike (`memory#N` in a path stands for the body's `memories[N-1]`).

Three outcomes per check: "pass", "fail", and "not_verifiable" (the check needs
something this run does not have, such as the ledger). "not_verifiable" is
never a pass. A report is "verified" only when no check failed, there is at
least one passing check, and both signatures were checked against a trusted key.

Format 2 (detached disclosures) adds two outcomes for a cited event's content:
"withheld" (this copy carries no disclosure for it) and "erased" (nor does the
ledger: its line is in erased form). Neither is a pass nor a fail: what the
signed commitment alone proves (digest, chain link, inclusion) is still checked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ledger.event import EventError, chain_link, recompute_digest
from ledger.verify import Break
from receipts.body import PAYLOAD_TYPES, RECEIPT_VERSION_2, Receipt, checkpoint_bytes, decode_sig
from receipts.decisions import check_consent, check_exclusions, check_ledger_exclusions
from receipts.disclose import content_problem, digest_from_commit, held_message, is_erased_line
from receipts.dsse import verify_envelope
from receipts.keys import PublicKey
from receipts.merkle import ProofError, leaf_hash, verify_consistency, verify_inclusion
from receipts.prompt import TemplateError, build_messages, prompt_hash
from receipts.ranking import check_ranking

# The outcomes and the row live in receipts.report; re-exported here, where callers have always imported them.
from receipts.report import ERASED as ERASED
from receipts.report import FAIL as FAIL
from receipts.report import HELD as HELD
from receipts.report import NO_TRUSTED_KEY as NO_TRUSTED_KEY
from receipts.report import NOT_VERIFIABLE as NOT_VERIFIABLE
from receipts.report import PASS as PASS
from receipts.report import SELF_CONSISTENT as SELF_CONSISTENT
from receipts.report import WITHHELD as WITHHELD
from receipts.report import Check as Check
from receipts.report import Report as _Report
from receipts.report import Rows
from receipts.states import check_earlier, check_ledger_states, check_states, prompt_marks

if TYPE_CHECKING:
    from receipts.cosignature import Policy

REQUIRED = ("envelope.signature", "checkpoint.signature")
LEDGER_ROWS = ("ledger.events", "ledger.chain", "ledger.root", "ledger.consistency", "ledger.response")


@dataclass(frozen=True, slots=True)
class Cited:
    """An event the receipt cites, and what the ledger said about it (read by receipts.groups)."""

    name: str  # "query", "memory#N" (N = rank) or "response"
    seq: int
    ledger: str | None = None  # None: not compared with a ledger; "": the ledger holds it as cited; else why not ("lies after …")
    content: str | None = None  # format 2: "disclosed", WITHHELD or ERASED; None for format 1 (the text is signed)


@dataclass(frozen=True, slots=True)
class ReceiptReport(_Report):
    """A receipt's checks (receipts.report.Report). No truth value: read `.verdict`."""

    receipt_id: str
    session: str
    mode: str  # "offline" or "ledger"
    checks: tuple[Check, ...]
    cited: tuple[Cited, ...] = ()

    def __bool__(self) -> bool:
        raise TypeError("Report has no truth value; read .verdict")  # the name callers know it by

    @property
    def required(self) -> tuple[str, ...]:
        """Both signatures; checked with a ledger, the ledger rows too.

        A data directory without the session is not a failure, but it is not a ledger check either.
        Withheld and erased rows (a redacted format-2 receipt) neither fail nor block the verdict: what
        the copy still proves was checked, and `withheld` says what it does not carry (docs/FORMAT.md §15)."""
        return REQUIRED + (LEDGER_ROWS if self.mode == "ledger" else ())

    def to_dict(self) -> dict[str, Any]:
        return {
            "receipt_id": self.receipt_id,
            "session": self.session,
            "mode": self.mode,
            "verdict": self.verdict,
            "failed": len(self.failed),
            "not_verifiable": len(self.not_verifiable),
            "withheld": sum(c.status == WITHHELD for c in self.checks),
            "erased": sum(c.status == ERASED for c in self.checks),
            "groups": [g.to_dict() for g in self.groups()],
            "checks": [c.to_dict() for c in self.checks],
        }

    def groups(self) -> list[Any]:
        """The checks grouped by what they are about, one plain sentence each (receipts.groups)."""
        from receipts.groups import group_report  # groups reads Report: imported here to avoid a cycle

        return list(group_report(self))


Report = ReceiptReport  # the name callers import it by


@dataclass(frozen=True)
class LedgerFacts:
    """What the ledger says, as recomputed by an auditor (storage.files.receipts.audit builds it).

    `verified` counts the events before the first break (all of them when the
    chain is intact); `event_at(seq)` returns a stored line's fields for
    seq < verified; `root_at(n)` and `consistency(m, n)` are over the digests
    the auditor recomputed, never over a stored tree.
    """

    session: str
    exists: bool
    verified: int
    first_break: Break | None
    event_at: Callable[[int], dict[str, Any]]
    root_at: Callable[[int], bytes]
    consistency: Callable[[int, int], list[bytes]]
    notes: tuple[str, ...] = field(default=())
    # What this run re-checked and what it took from the auditor's cache (storage.files.receipts.audit):
    rehashed_bytes: int = 0  # bytes re-hashed (raw sha256) against the cache's per-chunk hashes
    rehashed_lines: int = 0  # lines those bytes hold (the ones that matched)
    cached_lines: int = 0  # lines whose walk was taken from the cache, after their bytes re-hashed equal
    rewalked_from_line: int | None = None  # 1-based first line walked (parsed, digests recomputed) this run
    changed_from_line: int | None = None  # first line of the first cached chunk whose bytes had changed
    cache_reason: str | None = None  # why the walk started at genesis (no cache, --full, unusable cache)
    problem: str | None = None  # the ledger could not be read at all (e.g. a symlink): every ledger row fails
    erased: tuple[int, ...] = ()  # seqs of the erased lines among the verified events (FORMAT.md §4.4)
    # (record seq, superseded seq) of every supersession record among the verified events, ascending (§19);
    # None: not collected (`ledger.states` is then not verifiable, never a pass)
    supersessions: tuple[tuple[int, int], ...] | None = None


def _n(k: int) -> str:
    return f"{k:,}"


def _mb(n: int) -> str:
    return f"{n / 1e6:.0f} MB" if n >= 10_000_000 else f"{n / 1e6:.1f} MB"


def describe_audit(led: LedgerFacts) -> str:
    """One line saying what the auditor re-checked and what it took from its cache (pure)."""
    brk = led.first_break
    last = brk.line if brk is not None else led.verified
    walked = (
        "nothing new to walk"
        if led.rewalked_from_line is None or led.rewalked_from_line > last
        else f"re-walked lines {_n(led.rewalked_from_line)}–{_n(last)}"
    )
    if led.cache_reason is not None:
        return f"{walked} ({led.cache_reason})"
    if led.changed_from_line is not None:
        return (
            f"re-hashed {_mb(led.rehashed_bytes)} against the audit cache: bytes changed from the chunk starting at"
            f" line {_n(led.changed_from_line)} since the last walk; took {_n(led.cached_lines)} lines from the cache; {walked}"
        )
    return f"re-hashed {_n(led.rehashed_lines)} lines ({_mb(led.rehashed_bytes)}) against the audit cache; {walked}"


def _events(body: dict[str, Any]) -> list[tuple[str, str, dict[str, Any], list[str]]]:
    """(check prefix, JSON path, event record, proof) for the query, each memory and the response."""
    out = [("query", "query", body["query"]["event"], body["query"]["proof"])]
    for i, m in enumerate(body["memories"]):
        out.append((f"memory#{i + 1}", f"memory#{i + 1}", m["event"], m["proof"]))
    out.append(("response", "response", body["response"]["event"], body["response"]["proof"]))
    return out


def verify_receipt(
    receipt: Receipt,
    trusted: Sequence[PublicKey],
    ledger: LedgerFacts | None = None,
    *,
    untrusted: PublicKey | None = None,
    policy: Policy | None = None,
) -> ReceiptReport:
    """`untrusted`: a key that came with the data (never trusted): with no `trusted` key the
    signatures are checked against it for self-consistency, and those rows stay not_verifiable.

    `policy` (a c2sp.org/tlog-policy, receipts.cosignature): the witness cosignatures the receipt carries (§22,
    format 2 `witnesses`) are checked against the receipt's checkpoint as a note: a row per witness and the quorum,
    and the checkpoint's signer must be one of the policy's logs (when it names any)."""
    body = receipt.signed_body
    v2 = receipt.format == RECEIPT_VERSION_2
    r = Rows()
    _check_envelope(r, receipt, trusted, untrusted)
    cp = body["checkpoint"]
    cpb = cp["body"]
    _check_checkpoint_signature(r, cp, trusted, untrusted)
    tree_size, root = cpb["tree_size"], bytes.fromhex(cpb["root"])
    events = _events(body)
    _check_structure(r, body, events)
    # format 2: what is missing from this copy, and whether the ledger (if here) erased it too
    state: dict[str, str] = {}
    if v2:
        gone = _erased_in_ledger(ledger, events)
        for prefix, _path, ev, _proof in events:
            disclosed = ev["seq"] in receipt.disclosures
            state[prefix] = "disclosed" if disclosed else ERASED if ev["seq"] in gone else WITHHELD
    for prefix, path, ev, proof in events:
        if v2:
            _check_content(r, prefix, path, ev, receipt, state[prefix])
        _check_event(r, prefix, path, ev, proof, tree_size, root, v2)
    resp = body["response"]
    text = _text(receipt, resp["event"])
    if text is None:
        r.held("response.hash", state["response"], held_message("response", resp["event"]["seq"], state["response"], "its hash cannot be compared"), "response.sha256")
    else:
        actual = hashlib.sha256(text.encode("utf-8")).hexdigest()
        r.add("response.hash", actual == resp["sha256"], "the response hash is the hash of the assistant event's text", resp["sha256"], actual, "response.sha256")
    r.add(
        "checkpoint.chain_head",
        cpb["chain_head"] == resp["event"]["chain"],
        "the checkpoint's chain head is the assistant event's chain hash",
        resp["event"]["chain"],
        cpb["chain_head"],
        "checkpoint.body.chain_head",
    )
    _check_prompt(r, receipt, state)
    # format 2's versioned additions (docs/FORMAT.md §17, §18): present only when the turn used them
    if "exclusions" in body:
        r.add(*check_exclusions(body))
    if "consent" in body:
        for row in check_consent(body):
            r.add(*row)
    if "states" in body:
        r.add(*check_states(body))
        if "earlier" in body["states"]:
            r.add(*check_earlier(body))
    if "ranking" in body:
        r.add(*check_ranking(body))
    if policy is not None or "witnesses" in body:
        _check_witnesses(r, body, policy)
    in_ledger: dict[str, str] = {}
    if ledger is None:
        for name in LEDGER_ROWS:
            r.na(name, "needs the ledger: run with --data DATA_DIR")
        for name in ("exclusions", "states"):
            if name in body:
                r.na(f"ledger.{name}", "needs the ledger: run with --data DATA_DIR")
    else:
        in_ledger = _check_ledger(r, body, events, ledger)
        if "exclusions" in body:
            _check_ledger_exclusions(r, body, ledger)
        if v2:  # with or without `states` (§20): an absent member claims every cited memory live
            _check_ledger_states(r, body, ledger)
    cited = tuple(Cited(prefix, ev["seq"], in_ledger.get(prefix), state.get(prefix)) for prefix, _path, ev, _proof in events)
    mode = "offline" if ledger is None else "ledger"
    return ReceiptReport(receipt.receipt_id, receipt.session, mode, tuple(r.rows), cited)


def _check_witnesses(r: Rows, body: dict[str, Any], policy: Policy | None) -> None:
    """§22: the cosignatures in `witnesses` over the receipt's checkpoint as a C2SP note, under `policy`."""
    from receipts.cosignature import policy_rows
    from receipts.note import Note, NoteSignature, b64decode, checkpoint_text

    carried = body.get("witnesses", {}).get("cosignatures", [])
    if policy is None:
        r.na("witness.quorum", f"{len(carried)} witness cosignature(s) carried; give --policy FILE to check them", "witnesses")
        return
    cp = body["checkpoint"]
    if policy.logs:
        ok = any(v.key.key_id == cp["key_id"] for v in policy.logs)
        names = ", ".join(v.key.key_id for v in policy.logs)
        r.add("witness.log", ok, "the checkpoint is signed by a log the policy names" if ok else "the checkpoint's signer is not a log of the policy", names, cp["key_id"], "checkpoint.key_id")
    sigs = []
    for i, c in enumerate(carried):
        raw = b64decode(c["sig"])
        if raw is None or len(raw) != 4 + 8 + 64:
            r.add("witness.cosignatures", False, f"cosignature {i + 1} is not base64 of a key hash, a time and a signature", "76 bytes", "other", f"witnesses.cosignatures[{i}].sig")
            continue
        sigs.append(NoteSignature(c["name"], int.from_bytes(raw[:4], "big"), raw[4:]))
    policy_rows(r, Note(checkpoint_text(cp).encode(), tuple(sigs)), policy)


def _text(receipt: Receipt, ev: dict[str, Any]) -> str | None:
    """A cited event's text: signed (format 1) or disclosed (format 2); None when this copy withholds it."""
    if receipt.format != RECEIPT_VERSION_2:
        return str(ev["text"])
    d = receipt.disclosures.get(ev["seq"])
    return None if d is None else str(d["text"])


def _erased_in_ledger(led: LedgerFacts | None, events: list[tuple[str, str, dict[str, Any], list[str]]]) -> set[int]:
    """The cited seqs whose ledger line (before any break) is in erased form."""
    if led is None or not led.exists or led.problem is not None:
        return set()
    return {ev["seq"] for _p, _w, ev, _pr in events if 0 <= ev["seq"] < led.verified and is_erased_line(led.event_at(ev["seq"]))}


def _check_content(r: Rows, prefix: str, path: str, ev: dict[str, Any], receipt: Receipt, state: str) -> None:
    """Format 2: the disclosure recomputes the signed commitment (and the answer's meta names this receipt)."""
    seq = ev["seq"]
    d = receipt.disclosures.get(seq)
    if d is None:
        r.held(f"{prefix}.content", state, held_message(prefix, seq, state, "its digest, chain link and inclusion are checked from the signed commitment"), f"{path}.disclosure")
        return
    problem = content_problem(ev, d, receipt.receipt_id if prefix == "response" else None)
    if problem is None:
        what = "; its meta names this receipt" if prefix == "response" else ""
        r.add(f"{prefix}.content", True, f"seq {seq}: the disclosed text, meta and salt recompute the signed commitment{what}")
    else:
        message, expected, found = problem
        r.add(f"{prefix}.content", False, f"seq {seq}: {message}", expected, found, f"{path}.disclosure")


def _check_envelope(r: Rows, receipt: Receipt, trusted: Sequence[PublicKey], untrusted: PublicKey | None = None) -> None:
    env = receipt.envelope
    want = PAYLOAD_TYPES[receipt.format]
    r.add("envelope.payload_type", env.payload_type == want, "the envelope names this receipt format", want, env.payload_type)
    if not trusted:
        ok = None
        if untrusted is not None:
            ok = any(c.key_trusted and c.signature_valid for c in verify_envelope(env, [untrusted], env.payload_type))
        r.untrusted("envelope.signature", None if untrusted is None else untrusted.key_id, ok)
        return
    results = verify_envelope(env, trusted, env.payload_type)
    good = [c for c in results if c.key_trusted and c.signature_valid]
    if good:
        r.add("envelope.signature", True, f"signed by trusted key {good[0].verified_by or good[0].keyid}")
        return
    if not results:
        r.add("envelope.signature", False, "the envelope carries no signature", "a signature by a trusted key", "none")
        return
    details = "; ".join(f"{c.keyid or '(no keyid)'}: {c.outcome}" for c in results)
    expected = "a valid signature by " + ", ".join(k.key_id for k in trusted)
    r.add("envelope.signature", False, f"no valid signature by a trusted key ({details})", expected, details)


def _checkpoint_signed_by(cp: dict[str, Any], key: PublicKey) -> bool:
    sig = decode_sig(cp["sig"])
    return sig is not None and key.verify(sig, checkpoint_bytes(cp["body"]))


def _check_checkpoint_signature(r: Rows, cp: dict[str, Any], trusted: Sequence[PublicKey], untrusted: PublicKey | None = None) -> None:
    if not trusted:
        ok = None if untrusted is None else cp["key_id"] == untrusted.key_id and _checkpoint_signed_by(cp, untrusted)
        r.untrusted("checkpoint.signature", None if untrusted is None else untrusted.key_id, ok)
        return
    key = next((k for k in trusted if k.key_id == cp["key_id"]), None)
    if key is None:
        r.add("checkpoint.signature", False, "the checkpoint is signed by a key that is not trusted", ", ".join(k.key_id for k in trusted), cp["key_id"], "checkpoint.key_id")
        return
    ok = _checkpoint_signed_by(cp, key)
    r.add("checkpoint.signature", ok, f"checkpoint signature by {key.key_id}", "a valid Ed25519 signature", "invalid signature", "checkpoint.sig")


def _check_structure(r: Rows, body: dict[str, Any], events: list[tuple[str, str, dict[str, Any], list[str]]]) -> None:
    session = body["session"]
    sessions = {ev["session"] for _, _, ev, _ in events} | {body["checkpoint"]["body"]["session"]}
    others = sorted(sessions - {session})
    r.add("receipt.session", not others, "every event and the checkpoint belong to the receipt's session", session, ", ".join(others))
    problems = []
    mems = body["memories"]
    ranks = [m["rank"] for m in mems]
    if ranks != list(range(1, len(mems) + 1)):
        problems.append(f"memory ranks are {ranks}, expected 1..{len(mems)}")
    if len(mems) > body["k"]:
        problems.append(f"{len(mems)} memories exceed k={body['k']}")
    seqs = [m["event"]["seq"] for m in mems]
    ids = [m["event"]["id"] for m in mems]
    if len(set(seqs)) != len(seqs) or len(set(ids)) != len(ids):
        problems.append("a memory is cited twice")
    q, resp = body["query"]["event"], body["response"]["event"]
    tree_size = body["checkpoint"]["body"]["tree_size"]
    if q["role"] != "user":
        problems.append(f"query event has role {q['role']!r}, expected 'user'")
    if resp["role"] != "assistant":
        problems.append(f"response event has role {resp['role']!r}, expected 'assistant'")
    if any(s >= q["seq"] for s in seqs):
        problems.append("a memory is not older than the query")
    if not q["seq"] < resp["seq"]:
        problems.append(f"query seq {q['seq']} is not before response seq {resp['seq']}")
    if resp["seq"] != tree_size - 1:
        problems.append(f"response seq {resp['seq']} is not the last leaf of the checkpoint (tree size {tree_size})")
    # (format 2: the answer's meta is disclosed, not signed; response.content checks that it names the receipt)
    if "meta" in resp and resp["meta"].get("receipt_id") != body["receipt_id"]:
        problems.append("the assistant event does not name this receipt id")
    r.add("receipt.structure", not problems, "seqs, ids and ranks agree", "consistent", "; ".join(problems))


def _check_event(
    r: Rows, prefix: str, path: str, ev: dict[str, Any], proof: list[str], tree_size: int, root: bytes, v2: bool = False
) -> None:
    seq = ev["seq"]
    try:
        digest = digest_from_commit(ev) if v2 else recompute_digest(ev)
    except EventError as exc:
        r.add(f"{prefix}.digest", False, f"digest cannot be recomputed: {exc}", ev["digest"], "error", f"{path}.event")
        return
    source = "the signed commitment" if v2 else "text, salt"
    r.add(f"{prefix}.digest", digest.hex() == ev["digest"], f"seq {seq}: digest recomputed from {source} and fields", ev["digest"], digest.hex(), f"{path}.event.digest")
    link = chain_link(bytes.fromhex(ev["prev"]), bytes.fromhex(ev["digest"])).hex()
    r.add(f"{prefix}.chain_link", link == ev["chain"], f"seq {seq}: chain hash links prev and digest", ev["chain"], link, f"{path}.event.chain")
    try:
        if seq >= tree_size:
            raise ProofError(f"leaf {seq} is outside the checkpoint's tree of size {tree_size}")
        verify_inclusion(seq, tree_size, leaf_hash(digest), [bytes.fromhex(h) for h in proof], root)
        r.add(f"{prefix}.inclusion", True, f"seq {seq}: included in the signed tree of size {tree_size}")
    except ProofError as exc:
        r.add(f"{prefix}.inclusion", False, f"seq {seq}: {exc}", root.hex(), getattr(exc, "found", None), f"{path}.proof")


def _check_prompt(r: Rows, receipt: Receipt, state: dict[str, str]) -> None:
    body = receipt.body  # format 2: the events with their disclosed texts merged in
    template = body["prompt"]["template"]
    sources = [("query", body["query"]["event"])] + [(f"memory#{i + 1}", m["event"]) for i, m in enumerate(body["memories"])]
    held = [held_message(name, ev["seq"], state[name]) for name, ev in sources if state.get(name, "disclosed") != "disclosed"]
    if held:
        r.na("prompt.hash", f"not re-derived: the prompt is built from every cited text, and {'; '.join(held)}", "prompt.sha256")
        return
    try:
        memories = [m["event"] for m in body["memories"]]
        derived = prompt_hash(build_messages(template, body["query"]["event"]["text"], memories, prompt_marks(body)))
    except TemplateError as exc:
        r.add("prompt.hash", False, str(exc), "a known template", template, "prompt.template")
        return
    except ValueError as exc:  # e.g. a lone surrogate in a memory's text
        r.add("prompt.hash", False, f"the prompt cannot be rebuilt: {exc}", body["prompt"]["sha256"], "error", "memories")
        return
    r.add("prompt.hash", derived == body["prompt"]["sha256"], f"prompt re-derived from the query and memories with {template}", body["prompt"]["sha256"], derived, "prompt.sha256")


def _check_ledger_states(r: Rows, body: dict[str, Any], led: LedgerFacts) -> None:
    """`ledger.states`: each cited memory's state at the turn is the one the ledger's supersession records give (§20)."""
    if not led.exists:
        r.na("ledger.states", f"this data directory has no session {led.session}: the ledger checks cannot run here")
    elif led.problem is not None:
        r.add("ledger.states", False, f"the session's ledger was not read: {led.problem}", "a regular file", "refused")
    elif led.supersessions is None:
        r.na("ledger.states", "the ledger's supersession records were not collected by this auditor")
    else:
        r.add(*check_ledger_states(body, led.verified, led.event_at, led.supersessions))


def _check_ledger_exclusions(r: Rows, body: dict[str, Any], led: LedgerFacts) -> None:
    """`ledger.exclusions`: every revocation the receipt names is in the ledger and was in force (§17)."""
    if not led.exists:
        r.na("ledger.exclusions", f"this data directory has no session {led.session}: the ledger checks cannot run here")
    elif led.problem is not None:
        r.add("ledger.exclusions", False, f"the session's ledger was not read: {led.problem}", "a regular file", "refused")
    else:
        r.add(*check_ledger_exclusions(body, led.verified, led.event_at))


def _break_words(brk: Break) -> str:
    """The ledger's own first break, as `ledger verify` names it: line, seq, kind."""
    seq = "unreadable seq" if brk.seq is None else f"seq {brk.seq}"
    return f"line {brk.line}, {seq}, {brk.kind}"


def _check_ledger(
    r: Rows, body: dict[str, Any], events: list[tuple[str, str, dict[str, Any], list[str]]], led: LedgerFacts
) -> dict[str, str]:
    """The five ledger rows; returns, per cited event, "" (the ledger holds it as cited) or what differs."""
    cpb = body["checkpoint"]["body"]
    tree_size = cpb["tree_size"]
    if not led.exists:
        # Not evidence of tampering: this directory simply is not where the session lives.
        # (A ledger that exists but is shorter than the checkpoint fails below.)
        for name in LEDGER_ROWS:
            r.na(name, f"this data directory has no session {led.session}: the ledger checks cannot run here")
        return {}
    if led.problem is not None:
        for name in LEDGER_ROWS:
            r.add(name, False, f"the session's ledger was not read: {led.problem}", "a regular file", "refused")
        return {}
    brk = led.first_break
    # Where the ledger stops verifying, in its own words (line, seq, kind), or how short it is.
    if brk is not None:
        stop = f"the ledger's first break ({_break_words(brk)})"
    else:
        stop = f"the end of the ledger, which holds {led.verified} events: truncated below the checkpoint's {tree_size}"
    # each cited event, recomputed from the stored line
    per: dict[str, str] = {}
    problems = []
    for prefix, _path, ev, _proof in events:
        seq = ev["seq"]
        if brk is not None and seq == brk.seq and seq >= led.verified:
            per[prefix] = f"is where the ledger first breaks ({_break_words(brk)}): the stored line no longer verifies"
        elif seq >= led.verified:
            per[prefix] = f"lies after {stop}"
        else:
            stored = led.event_at(seq)
            try:
                digest = recompute_digest(stored).hex()
            except EventError as exc:
                per[prefix] = f"has an unreadable stored event: {exc}"
                continue
            same = digest == ev["digest"] and stored.get("id") == ev["id"]
            per[prefix] = "" if same else f"differs from the ledger: ledger digest {digest[:16]}…, receipt {ev['digest'][:16]}…"
        if per[prefix]:
            problems.append(f"{prefix} (seq {seq}) {per[prefix]}")
    r.add("ledger.events", not problems, "every cited event is in the ledger at its seq with the same recomputed digest", "all match", "; ".join(problems))
    how = "; ".join(led.notes) if led.notes else describe_audit(led)  # what was re-checked, what came from a cache
    if brk is not None and led.verified < tree_size:
        r.add("ledger.chain", False, f"chain broken at {_break_words(brk)}: {brk.message} [{how}]", brk.expected, brk.found)
    elif led.verified < tree_size:
        r.add("ledger.chain", False, f"the ledger holds {led.verified} events, fewer than the checkpoint's {tree_size}: truncated below the checkpoint [{how}]", tree_size, led.verified)
    else:
        later = f" (a later break at line {brk.line} does not affect this receipt)" if brk else ""
        r.add("ledger.chain", True, f"the first {tree_size} events chain from genesis{later}: {how}")
    if led.verified < tree_size:
        if brk is not None:
            cut = f"the ledger verifies only up to {_break_words(brk)}, before the checkpoint's {tree_size} events"
            exp, found = f"{tree_size} events that chain from genesis", f"{led.verified} before the break at line {brk.line}"
        else:
            cut = f"the ledger holds {led.verified} events, fewer than the checkpoint's {tree_size}"
            exp, found = str(tree_size), str(led.verified)
        r.add("ledger.root", False, f"{cut}: its root at that size cannot be recomputed", exp, found)
        r.add("ledger.consistency", False, f"{cut}: no consistency proof to the signed checkpoint", exp, found)
    else:
        root_then = led.root_at(tree_size).hex()
        r.add("ledger.root", root_then == cpb["root"], f"the ledger's Merkle root at size {tree_size} equals the signed root", cpb["root"], root_then, "checkpoint.body.root")
        now = led.verified
        try:
            proof = led.consistency(tree_size, now)
            verify_consistency(tree_size, now, proof, bytes.fromhex(cpb["root"]), led.root_at(now))
            r.add("ledger.consistency", True, f"the ledger today ({now} events) extends the signed checkpoint ({tree_size}): history not rewritten")
        except ProofError as exc:
            r.add("ledger.consistency", False, f"the ledger today ({now} events) does not extend the signed checkpoint: {exc}", cpb["root"], getattr(exc, "found", None))
    resp = body["response"]
    seq = resp["event"]["seq"]
    if seq < led.verified and is_erased_line(led.event_at(seq)):
        r.held("ledger.response", ERASED, f"the stored assistant event (seq {seq}) was erased from the ledger: its text is gone, so its hash cannot be compared (ledger.events checks its digest)")
    elif seq < led.verified:
        text = led.event_at(seq).get("text")
        actual = hashlib.sha256(text.encode("utf-8")).hexdigest() if isinstance(text, str) else "unreadable"
        r.add("ledger.response", actual == resp["sha256"], f"the stored assistant event (seq {seq}) hashes to the response hash", resp["sha256"], actual)
    else:
        r.add("ledger.response", False, f"the assistant event (seq {seq}) lies after {stop}", f"seq {seq} in the verified ledger", f"{led.verified} verified events")
    return per
