"""Forgetting from the app and MCP (I/O): control.forget does the erasure; this module adds the app's own copies.

The rules — what an erasure takes with it, the refusals, the certificate — are
control.forget's (`preview`, `forget`, `forget_session`), called with the
service's engine (its ledger, index and key). What is the app's own is done
here: the confirmation step (a `Pending` kept server-side in a gr.State, so the
page cannot change what it confirms), and the copies the app made of the
session's receipts — the download copies (webui/downloads.py) and Gradio's file
cache (its copies of those downloads and of the visitor's uploads), which still
hold the forgotten words until they are deleted here.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from control import forget as cf
from control.forget import ForgetResult
from control.plan import Plan, PlanError
from control.settle import unfinished
from ledger import Event
from receipts import certificate as cert
from receipts.body import MAX_RECEIPT_BYTES, MalformedReceipt, parse_receipt
from webui.bundles import is_export_copy
from webui.service import Service

log = logging.getLogger("webui")
EVENTS = "events"
SESSION = "session"
DONE_EVENTS = "done:events"  # the pending State once confirmed: what the page refreshes next
DONE_SESSION = "done:session"


@dataclass(frozen=True, slots=True)
class Pending:
    """What the visitor was asked to confirm: the events (`scope` "events") or the whole session."""

    scope: str
    session: str
    named: tuple[int, ...] = ()
    erase: tuple[int, ...] = ()  # what the preview said would go; confirm refuses to erase anything else


@dataclass(frozen=True, slots=True)
class Asked:
    pending: Pending
    plan: Plan | None  # None for the whole session
    events: list[Event]  # the events that would go (scope "events"), as stored now
    count: int  # the session's events (scope "session")
    receipts: int  # its stored receipts (scope "session")


@dataclass(frozen=True, slots=True)
class Done:
    result: ForgetResult
    certificate_download: str  # a download copy of the certificate (webui/downloads.py)
    copies_removed: int  # the app's copies of the session's receipts that were deleted


T = TypeVar("T")
FINISHED_AFTER_FAILURE = (
    "the erasure stopped on a server error and was then finished: what you chose is forgotten and its certificate "
    "was written; reopen the session to see it"
)
UNFINISHED_AFTER_FAILURE = (
    "the erasure stopped half way on a server error and cannot be finished just now; nothing of this session is "
    "copied out until it is, which the next forget or the app's next start does"
)


class ForgetInterrupted(PlanError):
    """A forget raised after its ledger change (the journal stayed); recover ran again at once. One line."""


class Changed(Exception):
    """What would be forgotten changed between the question and the confirmation (e.g. a new answer cited it)."""

    def __init__(self, asked: Asked) -> None:
        super().__init__("what would be forgotten changed since you were asked")
        self.asked = asked


def _session(service: Service, key: object) -> str:
    return service.session(key)


def ask(service: Service, key: object, seqs: Sequence[object]) -> Asked:
    """What forgetting `seqs` of the key's session would erase (control.forget.preview). Changes nothing.
    Raises SessionKeyError, PlanError (one line: unknown seq, already forgotten, an erasure record)."""
    session = _session(service, key)
    led = service.engine.ledger
    if not led.exists(session):
        raise PlanError("this session has nothing to forget yet")
    plan = cf.preview(service.data_dir, session, list(seqs), stores=service.engine.stores)
    events = led.read_events(session, plan.erase)
    return Asked(Pending(EVENTS, session, plan.named, plan.erase), plan, events, 0, 0)


def ask_session(service: Service, key: object) -> Asked:
    """The question before forgetting the whole session. Raises SessionKeyError, PlanError (nothing to forget)."""
    session = _session(service, key)
    led = service.engine.ledger
    count = led.head(session)[0] if led.exists(session) else 0
    if count == 0:
        raise PlanError("this session holds no events: there is nothing to forget")
    return Asked(Pending(SESSION, session), None, [], count, len(_receipt_ids(service, session)))


def confirm(service: Service, key: object, pending: object, reason: object = "") -> Done:
    """Carry out what the visitor confirmed. Raises PlanError (nothing changed), Changed (asked again)."""
    if not isinstance(pending, Pending):
        raise PlanError("nothing to confirm: choose what to forget first")
    session = _session(service, key)
    if session != pending.session:
        raise PlanError("the confirmation was for another session than the one open now: ask again")
    eng = service.engine
    if pending.scope == SESSION:
        ids = _receipt_ids(service, session)
        result = _forgetting(
            service, session, lambda: cf.forget_session(service.data_dir, session, stores=eng.stores, key=eng.key, copies=service.cache_dirs)
        )
        return _done(service, result, ids, whole=True)
    now = ask(service, key, pending.named)
    if now.pending.erase != pending.erase:
        raise Changed(now)
    why = reason.strip() if isinstance(reason, str) else ""
    result = _forgetting(
        service,
        session,
        lambda: cf.forget(
            service.data_dir,
            session,
            pending.named,
            reason=why or None,
            stores=eng.stores,
            key=eng.key,
            copies=service.cache_dirs,
        ),
    )
    return _done(service, result, (*result.redacted, *result.withdrawn), whole=False)


def forget_event(service: Service, key: object, event_id: object, reason: object = "") -> ForgetResult:
    """MCP's forget_memory: one event by its id (evt_…) or its seq, as revoke and restore take it (one rule for every
    tool), with the cascade, no confirmation step."""
    session = _session(service, key)
    if not isinstance(event_id, str) or not event_id.strip():
        raise PlanError("event_id: give the event to forget: its event_id (evt_…, as search_memories returns it) or its seq")
    ref = event_id.strip()
    if not ref.startswith("evt_") and not (ref.isascii() and ref.isdigit()):
        raise PlanError(f"event_id {ref[:60]!r}: neither an event id (evt_ and 32 lowercase hex digits) nor a seq")
    if not service.engine.ledger.exists(session):
        raise PlanError("this session has nothing to forget yet")
    if reason is not None and not isinstance(reason, str):
        raise PlanError("reason: must be text")
    eng = service.engine
    result = _forgetting(
        service,
        session,
        lambda: cf.forget(
            service.data_dir,
            session,
            [event_id.strip()],
            reason=(reason or "").strip() or None,
            stores=eng.stores,
            key=eng.key,
            copies=service.cache_dirs,
        ),
    )
    _done(service, result, (*result.redacted, *result.withdrawn), whole=False)
    return result


def _forgetting(service: Service, session: str, call: Callable[[], T]) -> T:
    """Run a forget; when it fails after its ledger change (an I/O error, a reader holding the index: its journal
    stays), run recover again at once — not only at the app's next start — so the receipts, the index and the app's
    copies do not keep the words meanwhile; then say in one line whether the erasure is now finished
    (ForgetInterrupted). A refusal (PlanError: nothing changed) and a failure that left no journal (the ledger never
    changed) are raised as they are."""
    try:
        return call()
    except PlanError:
        raise
    except Exception as exc:
        if not unfinished(service.data_dir, session, service.engine.stores):
            raise
        log.error("forget: session %s: the erasure stopped after the ledger changed (%s); finishing it now", session, type(exc).__name__)
    try:
        recover(service)
    except Exception as again:  # noqa: BLE001 - said below in one line; the journal stays for the next try
        log.error("forget: session %s: the interrupted erasure could not be finished now (%s)", session, type(again).__name__)
    raise ForgetInterrupted(UNFINISHED_AFTER_FAILURE if unfinished(service.data_dir, session, service.engine.stores) else FINISHED_AFTER_FAILURE)


def _receipt_ids(service: Service, session: str) -> list[str]:
    return service.engine.backend.receipt_ids(session)


def _done(service: Service, result: ForgetResult, receipt_ids: Iterable[str], *, whole: bool) -> Done:
    # control.forget deleted the copies named after the receipts (`copies=`); what is left are uploads under a
    # name of the visitor's, found here by reading them.
    removed = len(result.copies_removed)
    removed += purge_copies(service.cache_dirs, result.session, set(receipt_ids), whole_session=whole)
    name = result.certificate_path.name
    path = service.downloads.put(name, cert.certificate_file_bytes(result.certificate))
    return Done(result, path, removed)


def purge_copies(
    roots: Iterable[Path], session: str, receipt_ids: Collection[str], *, whole_session: bool = False
) -> int:
    """Delete every file under `roots` that is a copy of one of `receipt_ids` (its name holds the id — the
    download, withheld and tampered copies — or it parses as that receipt: an upload under any name); with
    `whole_session`, every receipt of `session`. Returns how many went. Errors are logged, never raised:
    the ledger has already forgotten, and the next forget or the cache sweep tries again."""
    removed = 0
    for root in roots:
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*")):
            try:
                if path.is_symlink() or not path.is_file():
                    continue
                if not _is_copy(path, session, receipt_ids, whole_session):
                    continue
                path.unlink()
                removed += 1
                if path.parent != root and not any(path.parent.iterdir()):
                    path.parent.rmdir()
            except OSError as exc:
                log.warning("forget: a cached copy could not be removed (%s)", type(exc).__name__)
    return removed


def _is_copy(path: Path, session: str, receipt_ids: Collection[str], whole_session: bool) -> bool:
    if any(rid in path.name for rid in receipt_ids):
        return True
    if is_export_copy(path.name, session):  # a bundle or Markdown export of the session holds every memory's words
        return True
    if path.suffix.lower() != ".json" or path.stat().st_size > MAX_RECEIPT_BYTES:
        return False
    try:
        receipt = parse_receipt(path.read_bytes())
    except (MalformedReceipt, ValueError, OSError):
        return False
    return receipt.session == session and (whole_session or receipt.receipt_id in receipt_ids)


def recover(service: Service) -> list[Path]:
    """At start-up, and again after a forget that failed half way (`_forgetting`): finish every erasure a crash or an
    error interrupted (control.forget.recover), with the engine's handles,
    deleting the copies of its receipts under `service.cache_dirs` — call it once webui.layout.build has added Gradio's
    cache there. (A crashed process's own download folder is removed whole by webui.downloads.Downloads.)"""
    eng = service.engine
    written = cf.recover(service.data_dir, stores=eng.stores, key=eng.key, copies=service.cache_dirs)
    for path in written:
        log.warning("an interrupted erasure was finished: certificate %s", os.fspath(path))
    return written
