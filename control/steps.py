"""The steps of an erasure, shared by forget, forget_session and recover (I/O; control.forget is the API).

Durable writes (temp file in the same folder, 0600, fsync, rename, fsync of the folder), the journal of a
forget in progress, reading the stored receipts, and the steps after Ledger.erase: the index purge, the
receipts redacted or withdrawn, the checkpoint over the erasure record and the certificate.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

from control.plan import Citation, Plan, Slot
from ledger import Event
from ledger.canonical import canonical_json
from ledger.erasing import ERASURES_DIR, MAX_RECORD_ENTRIES
from ledger.event import is_erasure_record, now_ts
from ledger.supersessions import is_control_record
from receipts import certificate as cert
from receipts.body import MAX_RECEIPT_BYTES, MalformedReceipt, parse_receipt, sign_checkpoint
from receipts.disclose import RedactError, cited_seqs, receipt_format, redact
from receipts.keys import SigningKey
from receipts.stores import PendingCites, ReceiptBackend
from retrieval.model import PurgeIncomplete
from retrieval.text import content_terms
from storage.api import LedgerStore as AnyLedger
from storage.api import Stores, file_receipts
from storage.local import fsync_dir, private_dir, replace_durable
from storage.offline import forget_cache

log = logging.getLogger("control")


# -- small durable writes ------------------------------------------------------------
def write_durable(path: Path, data: bytes) -> None:
    """Replace `path` with `data` durably (storage.common.fsmode.replace_durable), creating its folder (0700) if need be."""
    private_dir(path.parent)
    replace_durable(path, data)


def unlink_durable(path: Path) -> None:
    path.unlink(missing_ok=True)
    if path.parent.is_dir():
        fsync_dir(path.parent)


def erasures_dir(data_dir: str | os.PathLike[str]) -> Path:
    return Path(data_dir) / ERASURES_DIR


class Journal(NamedTuple):
    """One erasure's journal, wherever it is kept: a file in this DATA_DIR (`erasures/.pending-<session>.json`), or on
    PostgreSQL a row of `erasures_pending`, which every replica sees. `read()`: (the journal's bytes, the certificate's
    bytes kept with it or None); FileNotFoundError once the erasure finished. `done()`: it is no longer pending."""

    session: str
    name: str  # what a log line calls it (never a path)
    read: Callable[[], tuple[bytes, bytes | None]]
    done: Callable[[], None]


def file_journals(data: Path, session: str | None = None) -> list[Journal]:
    folder = erasures_dir(data)
    paths = sorted(folder.glob(".pending-*.json")) if folder.is_dir() else []
    out = []
    for path in paths:
        name = path.name.removeprefix(".pending-").removesuffix(".json")
        if session is None or name == session:
            out.append(Journal(name, path.name, partial(_read_file_journal, path), partial(unlink_durable, path)))
    return out


def db_journals(led: AnyLedger, session: str | None = None) -> list[Journal]:
    """The erasures whose journal the ledger keeps as a row (of `session` only, when given), oldest first: on
    PostgreSQL every replica sees them; none on files (their journals are the files above)."""
    return [
        Journal(s, f"pending erasure {token[:12]}", partial(led.pending_journal, token), partial(led.erasure_done, token))
        for token, s in led.pending_erasures(session)
    ]


def _read_file_journal(path: Path) -> tuple[bytes, bytes | None]:
    return path.read_bytes(), None


def new_token() -> str:
    return os.urandom(16).hex()


# -- what the session holds ---------------------------------------------------------
def slot(ev: Event) -> Slot:
    return Slot(ev.seq, ev.role, ev.erased, is_erasure_record(ev), not ev.erased and is_control_record(ev.role, ev.text, ev.meta, ev.seq))


UNRECEIPTED = 0  # Citation.format of an answer whose receipt was never written: nothing to redact or withdraw
ANSWER_SEARCH = 1000  # events after its question within which a receipt-less answer is looked for


def citations(data_dir: Path, session: str, ledger: AnyLedger | None = None, *, backend: ReceiptBackend | None = None) -> list[Citation]:
    """Every stored receipt of the session, as the plan needs it (the stored receipts are the truth); with
    `ledger`, also every answer whose receipt was never written, from the `.cites` record its turn left
    (ReceiptBackend.write_cites): such an answer may quote a memory as much as a receipted one.
    `backend`: where the receipts are (default: the files in `data_dir`)."""
    store = backend if backend is not None else file_receipts(data_dir)
    out = _receipted(store, session)
    if ledger is not None:
        out += _unreceipted(store, session, ledger, {c.receipt_id for c in out})
    return out


def unreceipted(data_dir: Path, session: str, ledger: AnyLedger, *, backend: ReceiptBackend | None = None) -> list[Citation]:
    """Only the answers whose receipt was never written (format UNRECEIPTED), from the `.cites` records left behind."""
    return _unreceipted(backend if backend is not None else file_receipts(data_dir), session, ledger, set())


def pending_cites(backend: ReceiptBackend, session: str) -> list[PendingCites]:
    """The `.cites` records the session holds (on files, one the backend cannot read is named in the log and left)."""
    return backend.pending_cites(session)


def _unreceipted(backend: ReceiptBackend, session: str, ledger: AnyLedger, receipted: set[str]) -> list[Citation]:
    out = []
    count, _head = ledger.head(session)
    stored: set[str] | None = None
    for rec in pending_cites(backend, session):
        rid = rec.receipt_id
        if rid in receipted:
            continue
        if stored is None:
            stored = set(backend.receipt_ids(session))  # a stored receipt this code could not read is not "never written"
        if rid in stored:
            continue
        question, memories = rec.question_seq, rec.memory_seqs
        seqs = range(question + 1, min(count, question + 1 + ANSWER_SEARCH))
        answer = next((ev for ev in ledger.read_events(session, seqs) if ev.role == "assistant" and ev.meta.get("receipt_id") == rid), None)
        if answer is None:
            continue  # the turn stopped before its answer was appended: nothing quotes anything
        cited = {question: "query", **{m: f"memory#{i}" for i, m in enumerate(memories, 1)}, answer.seq: "response"}
        out.append(Citation(rid, UNRECEIPTED, answer.seq, cited))
    return out


def _receipted(backend: ReceiptBackend, session: str) -> list[Citation]:
    out = []
    for rid in backend.receipt_ids(session):
        try:
            raw = backend.read_receipt(session, rid)
            cited = cited_seqs(raw)
            fmt = receipt_format(raw)
        except (MalformedReceipt, ValueError, OSError) as exc:
            # the reason's type only: a parse error may quote a value, and a receipt holds memories' words
            log.warning("%s.json: not a receipt this erasure can read (%s); left as it is", rid, type(exc).__name__)
            continue
        response = next((s for s, name in cited.items() if name == "response"), -1)
        out.append(Citation(rid, fmt, response, cited))
    return out



# -- receipts whose signature covers an erased word ------------------------------------------
LEAK_TERM_MIN = 5  # as the reason check (control.forget): shorter terms are too common to say a text was quoted


def signed_quotes(
    data_dir: Path, session: str, receipt_ids: Iterable[str], named: Iterable[Event], *, backend: ReceiptBackend | None = None
) -> list[str]:
    """The format-2 receipts among `receipt_ids` whose *signed* body quotes a word of a named event's text.

    The one free-text field a format-2 receipt signs is the answer's `fallback_reason`, and a provider's error
    message can quote its input there ("server said: ..."); redaction cannot reach a signed field, so such a
    receipt is withdrawn (deleted) instead. The reason itself, as the offline stand-in repeats it in an answer,
    is taken out of a text before its words are compared. `backend`: where the receipts are (default: files)."""
    store = backend if backend is not None else file_receipts(data_dir)
    texts = [ev.text for ev in named if ev.text]
    out = []
    for rid in receipt_ids:
        try:
            body = parse_receipt(store.read_receipt(session, rid)).signed_body
            reason = body["response"]["fallback_reason"]
        except (MalformedReceipt, OSError, KeyError, TypeError):
            continue
        if not isinstance(reason, str) or not reason:
            continue
        said = {t for t in content_terms(reason) if len(t) >= LEAK_TERM_MIN and not t.isdigit()}
        if any(said.intersection(content_terms(text.replace(reason, " "))) for text in texts):
            out.append(rid)
    return out


def withdraw_quoting(data_dir: Path, plan: Plan, named: Iterable[Event], *, backend: ReceiptBackend | None = None) -> Plan:
    """`plan` with the receipts `signed_quotes` names moved from redaction to withdrawal."""
    leaky = signed_quotes(data_dir, plan.session, sorted(plan.redact), named, backend=backend)
    if not leaky:
        return plan
    redact = {rid: seqs for rid, seqs in plan.redact.items() if rid not in leaky}
    return dataclasses.replace(plan, redact=redact, withdraw=tuple(sorted({*plan.withdraw, *leaky})))


# -- quarantined copies of ledger lines -------------------------------------------------
def needles(events: Iterable[Event]) -> list[bytes]:
    """The erased texts as a ledger line may hold them: raw UTF-8, as JCS escapes them, and ASCII-escaped JSON."""
    out: set[bytes] = set()
    for ev in events:
        if ev.text:
            out |= {ev.text.encode(), canonical_json(ev.text)[1:-1], json.dumps(ev.text)[1:-1].encode()}
    return sorted(out)


class Finished(NamedTuple):
    path: Path
    envelope: dict[str, Any]
    redacted: tuple[str, ...]
    withdrawn: tuple[str, ...]
    imports_dropped: int = 0  # lines of sessions/<s>/imports.jsonl whose import held an erased seq
    quarantine_removed: tuple[str, ...] = ()  # events.jsonl.torn-*/cut-* files that held an erased text



def has_record_for(led: AnyLedger, session: str, seqs: Sequence[int]) -> bool:
    """Whether the ledger already holds the erasure records erasing `seqs` (the erase happened before a crash)."""
    return find_records(led, session, seqs) is not None


def records_for(n: int) -> int:
    """How many erasure records Ledger.erase appends for `n` erased events (one per MAX_RECORD_ENTRIES)."""
    return -(-n // MAX_RECORD_ENTRIES)


FIND_BATCH = 256  # events find_records reads at a time, newest first (one query each on PostgreSQL)


def _newest_first(led: AnyLedger, session: str, count: int) -> Iterator[Event]:
    hi = count
    while hi > 0:
        lo = max(0, hi - FIND_BATCH)
        yield from sorted(led.read_events(session, range(lo, hi)), key=lambda ev: -ev.seq)
        hi = lo


def find_records(led: AnyLedger, session: str, seqs: Sequence[int], expected: int | None = None) -> list[Event] | None:
    """The erasure records of the erasure of `seqs`: the latest run of consecutive records that together list
    exactly `seqs` (the ledger's erase appends them in one rename or one transaction, so they are all
    there or none is); None if absent. `expected`: how many records the journal said there would be (a run of
    another length is not this one)."""
    count, _ = led.head(session)
    want = set(seqs)
    run: list[Event] = []  # newest first
    listed: set[int] = set()
    for ev in _newest_first(led, session, count):
        mine = {e["seq"] for e in ev.meta["erasure"]["erased"]} if is_erasure_record(ev) else None
        if mine is None or not mine <= want or mine & listed:
            run, listed = [], set()
            if mine is None or not mine <= want:
                continue
        run.append(ev)
        listed |= mine
        if listed == want:
            found = run[::-1]
            return found if expected is None or len(found) == expected else None
    return None


def apply_receipts(w: Stores, session: str, redact_plan: Mapping[str, Sequence[int]], withdraw: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Redact or withdraw the stored receipts; return the ids actually (redacted, withdrawn). Each replace or delete
    is durable on its own (a file replaced by temp, fsync, rename; a row in its own transaction); the deletes are
    made durable together (ReceiptStore.sync_deletes) before the certificate says they happened."""
    redacted, withdraw = [], list(withdraw)
    for rid, seqs in sorted(redact_plan.items()):
        try:
            raw = w.receipts.read_receipt(session, rid)
        except FileNotFoundError:  # ReceiptNotFound is one
            continue
        try:
            new = redact(raw, seqs)
        except RedactError:  # format 1 after all: its texts are signed, so it goes
            withdraw.append(rid)
            continue
        if new != raw:
            w.receipts.replace_receipt(session, rid, new)
        redacted.append(rid)
    for rid in withdraw:
        w.receipts.delete_receipt(session, rid)
    if withdraw:
        w.receipts.sync_deletes(session)  # the unlinks are durable before the certificate says they happened
        w.rows.forget_rows(session, withdraw)  # the table of what each turn cited stays what the receipts say
    return tuple(sorted(redacted)), tuple(sorted(set(withdraw)))


def finish(
    w: Stores,
    key: SigningKey,
    session: str,
    records: Sequence[Event],
    redact_plan: Mapping[str, Sequence[int]],
    withdraw: Sequence[str],
    quarantine: Sequence[str] = (),
) -> Finished:
    """Steps 4-7 for an erasure whose records are already in the ledger (idempotent: `recover` runs it again after a
    crash). `records`: the erasure records of this erasure, consecutive, in seq order (one per 64 erased events).
    `quarantine`: the quarantine files found holding an erased text before the ledger changed (their names are
    in the journal: once the text is erased it cannot be looked for again).

    Where the backend keeps old row versions (PostgreSQL), the index forgets in its own transactions and VACUUMs its
    tables, the receipt tables are VACUUMed here, the ledger's by its erase: what PostgreSQL keeps after VACUUM (free
    space not yet reused, WAL segments, base backups, replicas) is the operator's to expire (docs/RETRIEVAL.md)."""
    led = w.ledger
    seqs = sorted(e["seq"] for rec in records for e in rec.meta["erasure"]["erased"])
    last = records[-1]
    copies = w.index.scrub_copies()  # before the purge, which would only unlink them
    # the receipts first: a reader holding an old snapshot of the index can stop the purge below (PurgeIncomplete),
    # and the receipt files, which hold the words whole, must not wait for it
    redacted, withdrawn = apply_receipts(w, session, redact_plan, withdraw)
    idx = w.index
    purged(lambda: idx.forget_events(session, seqs))
    w.receipts.vacuum()  # the redacted and deleted rows' old versions
    dropped, scrubbed = led.drop_erased_leftovers(session, seqs, quarantine)  # import records: their unsalted hashes could confirm a guess
    scrubbed += copies + w.receipts.scrub_temps(session)
    scrubbed += w.leftovers(session)  # on PostgreSQL: the session's files a `ledger migrate` left in DATA_DIR
    store = w.receipts.synced_tree(led, session)
    try:
        size = last.seq + 1
        cp = sign_checkpoint(session=session, tree_size=size, root=store.root(size), chain_head=last.chain, issued_at=now_ts(), key=key)
        if store.size == size:  # nothing appended after the record: this is the latest checkpoint
            w.receipts.keep_checkpoint(session, cp)
        erased = [cert.erased_entry(ev.to_dict(), store.inclusion_proof(ev.seq, size)) for ev in led.read_events(session, seqs)]
        body = cert.events_body(
            session=session,
            erased=erased,
            redacted=redacted,
            withdrawn=withdrawn,
            records=[(rec.to_dict(), store.inclusion_proof(rec.seq, size)) for rec in records],
            checkpoint=cp,
            issued_at=now_ts(),
        )
    finally:
        store.close()
    envelope = cert.sign_certificate(body, key)
    path = erasures_dir(w.data_dir) / f"erasure-{session}-{last.seq}.json"
    write_durable(path, cert.certificate_file_bytes(envelope))
    return Finished(path, envelope, redacted, withdrawn, dropped, scrubbed)


def delete_session(
    w: Stores, session: str, expect: tuple[int, str] | None = None, written_before: float | None = None
) -> tuple[str, ...]:
    """Everything of the session we own, gone (idempotent); returns the names of the index copies moved aside
    earlier that went too (SearchIndex.scrub_copies, Stores.leftovers). The caller holds the turn lock. The one
    implementation of a session's deletion: control.forget.forget_session, recover and Engine.forget (retention)
    all run it.

    Its search rows first (should that fail, the session is still whole and a retry deletes it all; on files the
    purge waits for the ledger's deletion), then the session in the ledger, its receipts, cites, tree and
    checkpoint, its audit cache and receipt rows, its search rows again (a search elsewhere may have indexed them in
    between; on files, now the purge), each store's old row versions reclaimed, what another backend's past left of
    it, and its consent proposals, settings and suggestions.

    `expect` (size, head) and `written_before` (retention's cutoff): delete only that history, only if still idle;
    SessionMoved (nothing of the ledger deleted) when a writer that takes no turn lock (an import) wrote meanwhile,
    where one can exist (PostgreSQL). On files every writer is expected to take the turn lock."""
    copies = w.index.scrub_copies()  # before the purge, which would only unlink them
    purged(lambda: w.index.drop_session(session))
    w.ledger.delete_session(session, expect, written_before)  # SessionMoved: nothing deleted (the rows reindex)
    w.receipts.forget_session(session)
    forget_cache(w.data_dir, session)
    w.rows.forget_rows(session)  # a new session of the same name must not inherit what these turns cited
    # again: a search on another replica (the Manual Search tab takes no turn lock) may have indexed the session
    # from its rows between the two; now the ledger is gone, nothing can index it again (files: the purge)
    purged(lambda: w.index.drop_session(session))
    w.receipts.vacuum()
    w.receipts.unlink_lock(session)
    copies += w.leftovers(session)  # on PostgreSQL: the session's files (and index rows) a `ledger migrate` left
    w.session_state.forget_session(session)  # consent proposals waiting with the question, settings, suggestions
    return copies


def purged(step: Callable[[], object], attempts: int = 2) -> None:
    """Run an index purge; a reader that kept SQLite from emptying its WAL is waited out (the call finishes it).
    Each attempt already waits storage.files.retrieval.db.PURGE_WAIT_S (10 s) for readers: two attempts, not a minute's hang."""
    for n in range(attempts):
        try:
            step()
            return
        except PurgeIncomplete:
            if n == attempts - 1:
                raise
            time.sleep(0.05 * (n + 1))


def purge_copies(
    roots: Iterable[str | os.PathLike[str]], names: Iterable[str], *, session: str | None = None, whole_session: bool = False
) -> tuple[Path, ...]:
    """Delete every file under `roots` that is a copy of one of the receipts `names` — the app's download copies
    (its own temp folder and Gradio's cache keep the file name: `<receipt_id>.json`, `tampered-<id>.json`,
    `<id>-withheld.json`) and, given `session`, any file that parses as one of those receipts of `session` (an
    upload under a name of the visitor's; with `whole_session`, any receipt of it). Symlinks are not followed.

    A file that cannot be read or removed is logged (its error's type only) and left: the ledger has already
    forgotten, and a copy is never a reason to stop an erasure or a recovery half-way."""
    wanted = [n for n in names if n]
    if not wanted and not (session and whole_session):
        return ()
    removed: list[Path] = []
    for root in map(Path, roots):
        if not root.is_dir():
            continue
        for dirpath, _dirs, filenames in os.walk(root, followlinks=False):
            for name in filenames:
                path = Path(dirpath) / name
                try:
                    if not _is_copy(path, wanted, session, whole_session):
                        continue
                    path.unlink(missing_ok=True)
                except OSError as exc:
                    log.warning("a download copy of a receipt could not be removed (%s); left as it is", type(exc).__name__)
                    continue
                removed.append(path)
    return tuple(sorted(removed))


def _is_copy(path: Path, names: Sequence[str], session: str | None, whole_session: bool) -> bool:
    if any(n in path.name for n in names):
        return True
    if session is None or path.is_symlink() or path.suffix.lower() != ".json" or path.stat().st_size > MAX_RECEIPT_BYTES:
        return False
    try:
        receipt = parse_receipt(path.read_bytes())
    except (MalformedReceipt, ValueError):
        return False
    return receipt.session == session and (whole_session or receipt.receipt_id in names)
