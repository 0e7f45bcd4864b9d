"""The Gradio edge: component values in, component values out.

Refusals the user can act on become `gr.Error` with the reason (a toast) or,
on the Verify tab, a status in the verdict area. In Gradio 6 a gr.Error also
puts an "Error" overlay on every output of the event, so the controls whose
outputs sit beside what the visitor typed (the Forget panel, Revoke / Restore,
Correct this, History) say a refusal in a status line there and a warning
toast instead, and never raise (issue 28 §6). Anything unexpected is logged with its traceback and shown as a short
"failed on the server" message — never a traceback in the page.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import logging
import queue
import threading
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import gradio as gr

from chat.engine import Turn, TurnError
from chat.shown import turn_error_text
from control.plan import PlanError
from ledger.corrupted import LedgerCorrupted
from receipts import RedactError
from receipts.body import MalformedReceipt
from receipts.certificate import MalformedCertificate, is_certificate
from receipts.verify import ERASED, Report
from storage import BackendError
from webui import controls as ct
from webui import forget as fg
from webui import kept as kp
from webui import render as r
from webui import render_bundle as rb
from webui import render_controls as rc
from webui import render_forget as rf
from webui import render_history as rh
from webui import render_proofs as rp
from webui import render_receipt as rr
from webui import render_replay as ry
from webui import render_supersede as rs
from webui import render_verify as rv
from webui import supersede as sp
from webui.inputs import BadInput, read_policy, read_upload
from webui.places import scrub
from webui.service import Service
from webui.sessions import SessionKeyError, is_old_format, is_session_key, new_session_key
from webui.tamper import DEFAULT_TARGET, TamperError

log = logging.getLogger("webui")
KNOWN = (BadInput, SessionKeyError, TurnError, LedgerCorrupted, TamperError, PlanError, RedactError)
F = TypeVar("F", bound=Callable[..., Any])
_DONE = object()


def to_gr_error(exc: BaseException, *, for_html: bool = True) -> gr.Error:
    """The message a caller sees for an exception.

    The page renders a toast's text as HTML, so there it is HTML-escaped; an MCP or API client
    gets the text itself (`for_html=False`): `'-'`, never `&#x27;-&#x27;`.
    """
    if isinstance(exc, gr.Error):
        return exc
    if isinstance(exc, KNOWN):
        text = scrub(shown_text(exc))  # no server path, no database address (webui/places.py)
        return gr.Error(
            html.escape(text) if for_html else text,
            title="Refused" if not isinstance(exc, TurnError) else "Turn failed",
            print_exception=False,
        )
    if isinstance(exc, BackendError):  # the database cannot be reached: say so (its message names the server: log only)
        log.error("a request failed: the store cannot be used (%s at %s: %s)", type(exc).__name__, raised_at(exc), exc)
        return gr.Error(STORE_UNAVAILABLE, title="Unavailable", print_exception=False)
    # The class and where it was raised (file, line, function: code, never data) — no message and no traceback
    # text: either could quote the visitor's question or a memory, and the log must never hold memory text.
    # The visitor reads a fixed sentence: the class is an internal name (issue 18), the log has it.
    log.error("a request failed on the server (%s at %s)", type(exc).__name__, raised_at(exc))
    return gr.Error(REQUEST_FAILED, print_exception=False)


REQUEST_FAILED = "the request failed on the server; the details are in the server log"
STORE_UNAVAILABLE = "the memory store cannot be reached right now; try again in a moment"


def shown_text(exc: BaseException) -> str:
    """What the visitor reads for a known refusal: a TurnError without the class and message of the exception it
    wraps (chat.shown, as `python -m chat` prints it), so no internal class name and no text the exception quoted
    reaches the page or an MCP client (the server log has the class)."""
    return turn_error_text(exc)


def raised_at(exc: BaseException) -> str:
    """`file.py:line in function` of the innermost frame that raised `exc` (code locations only)."""
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ is not None else []
    if not frames:
        return "an unknown place"
    f = frames[-1]
    return f"{Path(f.filename).name}:{f.lineno} in {f.name}"


def edge(fn: F) -> F:
    """Turn a handler's exceptions into visitor-facing errors."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - this is the edge
            raise to_gr_error(exc) from None

    return wrapper  # type: ignore[return-value]


def table(headers: list[str], rows: list[list[Any]], styling: list[list[str]] | None = None) -> dict[str, Any]:
    """A gr.Dataframe value; `styling` (per-cell CSS, as r.struck_styling gives it) strikes superseded texts through."""
    if styling is None:
        return {"headers": headers, "data": rows}
    return {"headers": headers, "data": rows, "metadata": {"styling": styling, "display_value": None}}


class UI:
    """One method per UI event; webui/wiring.py wires components to them."""

    def __init__(self, service: Service) -> None:
        self.service = service

    # -- sessions ------------------------------------------------------------------------
    @edge
    def start(self, stored: object) -> tuple[Any, ...]:
        """Page load: resume the session kept in the browser, or start one."""
        return self._session(stored if is_session_key(stored) else new_session_key())

    @edge
    def new_session(self) -> tuple[Any, ...]:
        return self._session(new_session_key())

    @edge
    def resume(self, typed: object) -> tuple[Any, ...]:
        """A key pasted into the session box: open that session (e.g. one started on another device)."""
        if isinstance(typed, str):
            typed = typed.strip()
        self.service.session(typed)  # raises SessionKeyError, naming the rule
        return self._session(typed, pasted=True)

    def _session(self, key: str, *, pasted: bool = False) -> tuple[Any, ...]:
        """(BrowserState, key box, session note, chat history, stamps, receipt download). A pasted key that opens
        nothing says so (issue 31: a typo silently opened an empty session), in the note and a toast."""
        past = self.service.history(key)
        history = r.history_messages([(p.event, p.body) for p in past])
        latest = next((p for p in reversed(past) if p.body is not None), None)
        if latest is None:
            stamps, download = r.NO_STAMPS, self._no_download()
        else:
            assert latest.body is not None
            s = r.stamps_from_body(latest.body, r.FORGOTTEN)  # a stored receipt loses a text only to forgetting
            stamps = r.stamps_markdown(s)
            download = self._download(s.receipt_id, self.service.restored_receipt(key, s.receipt_id))
        unknown = pasted and not past
        note = r.session_markdown(self.service.session(key), old_key=is_old_format(key), unknown=unknown)
        if unknown:
            gr.Info(r.UNKNOWN_KEY_NOTE)
        return key, key, note, history, stamps, download

    @staticmethod
    def _no_download() -> Any:
        return gr.DownloadButton(label="⬇ Download receipt (after the first answer)", value=None, interactive=False)

    @staticmethod
    def _download(receipt_id: str, path: str | None) -> Any:
        if path is None:
            return gr.DownloadButton(
                label="⬇ Receipt saved on the server, not downloadable now", value=None, interactive=False
            )
        return gr.DownloadButton(label=f"⬇ Download receipt {receipt_id[:13]}…", value=path, interactive=True)

    @staticmethod
    def cleared() -> tuple[Any, ...]:
        """After a session switch: (search status, search results, verdict, report, search explanation) as on a
        fresh page (the explanation quotes the other session's memories)."""
        return "", table(r.SEARCH_HEADERS, []), rv.VERIFY_HELP, table(rv.REPORT_HEADERS, []), ""

    # -- chat ------------------------------------------------------------------------------
    def chat(
        self, message: object, history: object, k: object, key: object, consent: object = False
    ) -> Iterator[tuple[Any, ...]]:
        """Outputs: (chat history, input box, stamps, receipt download). The answer streams when the model does.
        With ask me first on (`consent`, or the session's setting on the server), `propose` handles the message
        instead and this changes nothing."""
        try:  # reading the setting is inside the edge too: a database that cannot be reached is a message, not a traceback
            asks = ct.asks_first(self.service, key, consent)
            if not asks:
                self.service.check_turn(key, message, k)
        except Exception as exc:  # noqa: BLE001 - the edge
            raise to_gr_error(exc) from None
        if asks:
            yield gr.skip(), gr.skip(), gr.skip(), gr.skip()
            return
        assert isinstance(message, str)
        base = list(history) if isinstance(history, list) else []
        asked = r.user_message(message)
        yield [*base, asked, r.answer_message(r.PENDING)], "", gr.skip(), gr.skip()
        stream = _streamed(lambda on_delta: self.service.turn(key, message, k, on_delta=on_delta))
        for item in stream:
            if isinstance(item, str):
                yield [*base, asked, r.answer_message(item)], gr.skip(), gr.skip(), gr.skip()
            elif isinstance(item, BaseException):
                exc = item
                if isinstance(exc, BadInput):  # refused before anything was written: put the message back
                    yield base, message, gr.skip(), gr.skip()
                else:
                    yield [*base, asked, _failed_note(exc)], gr.skip(), gr.skip(), gr.skip()
                raise to_gr_error(exc)
            else:
                try:
                    final, stamps, download = self._answered(item, [*base, asked])
                except Exception as exc:  # noqa: BLE001 - the edge: a generator's exception is not wrapped by @edge
                    raise to_gr_error(exc) from None
                yield final, gr.skip(), stamps, download

    def _answered(self, turn: Turn, before: list[Any]) -> tuple[list[Any], str, Any]:
        """(chat history, stamps, receipt download) once a turn has its receipt."""
        s = r.with_matches(r.stamps_from_body(turn.body), turn.hits)  # the hits say how each memory matched
        final = [*before, r.answer_message(turn.answer), r.stamps_message(s)]
        try:
            copy: str | None = self.service.receipt_download(turn)
        except (OSError, BackendError) as exc:  # the answer and its receipt are stored; only the download copy failed
            # (a disk error, or the database gone between the receipt's write and this read)
            log.error("receipt %s: the download copy could not be written (%s)", turn.receipt_id, type(exc).__name__)
            copy = None
        return final, r.stamps_markdown(s), self._download(turn.receipt_id, copy)

    # -- ask me first (webui/controls.py; the rules are chat.consent's) ----------------------------------------
    # Outputs of propose / consent_cancel: (chat history, input box, pending State, consent box, proposal text,
    # tick boxes). The pending State (server-side: the page cannot change what it answers) holds the turn token
    # and the question, as a ct.Waiting.
    @staticmethod
    def consent_note(on: object) -> str:
        """The chat tab's plain statement of the setting."""
        return rc.CONSENT_ON if on is True else rc.CONSENT_OFF

    @edge
    def load_consent(self, key: object) -> tuple[Any, ...]:
        """Whenever the session loads or switches: (checkbox, note) from the session's setting on the server. A
        settings file that cannot be read shows the setting on, with the reason (naming the file)."""
        try:
            on = ct.consent_setting(self.service, key)
        except BadInput as exc:  # the file is named from the data directory: the server's own path is not shown
            return True, rc.consent_unreadable(str(exc).replace(str(self.service.data_dir), "DATA_DIR"))
        return on, self.consent_note(on)

    @edge
    def change_consent(self, key: object, on: object) -> tuple[Any, ...]:
        """The person ticked or unticked the checkbox: stored for the session at once. Outputs: (checkbox, note)."""
        stored = ct.save_consent(self.service, key, on is True)
        return stored, self.consent_note(stored)

    @edge
    def propose(
        self, message: object, history: object, k: object, key: object, consent: object, waiting: object = None
    ) -> tuple[Any, ...]:
        """Ask me first on (the checkbox or the session's setting): retrieve and show the proposed memories, all
        ticked; nothing is appended or sent."""
        if not ct.asks_first(self.service, key, consent):
            return tuple(gr.skip() for _ in range(6))
        if isinstance(waiting, ct.Waiting):  # a proposal still waiting is replaced: spend it with no turn
            try:
                ct.cancel(self.service, key, waiting.token)
            except (BadInput, SessionKeyError):
                pass  # already spent, expired or another session's: nothing to cancel
        proposal = ct.propose(self.service, key, message, k)
        base = list(history) if isinstance(history, list) else []
        assert isinstance(message, str)
        shown = [*base, r.user_message(message), r.note_message(rc.WAITING, rc.WAITING_TITLE)]
        choices = rc.candidate_choices(proposal.candidates)
        return (
            shown,
            "",
            ct.Waiting(proposal.token, proposal.message),
            gr.Column(visible=True),
            rc.proposal_markdown(len(proposal.candidates), proposal.k, proposal.excluded),
            gr.CheckboxGroup(choices=choices, value=[v for _label, v in choices]),
        )

    def consent_send(self, key: object, waiting: object, picked: object, history: object) -> Iterator[tuple[Any, ...]]:
        """Send with the ticked memories only. Outputs: (chat history, stamps, receipt download, pending State,
        consent box). A refused token or approval is a toast and nothing is appended; the box stays open."""
        approved = [x for x in picked if isinstance(x, str)] if isinstance(picked, list) else []
        try:
            self.service.session(key)
            if not isinstance(waiting, ct.Waiting):
                raise BadInput("nothing to send: the proposal is gone (sent, cancelled or replaced); ask again")
        except Exception as exc:  # noqa: BLE001 - the edge
            raise to_gr_error(exc) from None
        token = waiting.token
        base = _without_waiting(history)
        yield [*base, r.answer_message(r.PENDING)], gr.skip(), gr.skip(), gr.skip(), gr.skip()
        for item in _streamed(lambda on_delta: ct.answer(self.service, key, token, approved, on_delta=on_delta)):
            if isinstance(item, str):
                yield [*base, r.answer_message(item)], gr.skip(), gr.skip(), gr.skip(), gr.skip()
            elif isinstance(item, BaseException):
                if isinstance(item, BadInput):  # refused, nothing appended: the proposal is still on screen
                    yield (
                        [*base, r.note_message(rc.WAITING, rc.WAITING_TITLE)],
                        gr.skip(),
                        gr.skip(),
                        gr.skip(),
                        gr.skip(),
                    )
                else:  # the token was spent: the box closes
                    yield [*base, _failed_note(item)], gr.skip(), gr.skip(), None, gr.Column(visible=False)
                raise to_gr_error(item)
            else:
                final, stamps, download = self._answered(item, base)
                yield final, stamps, download, None, gr.Column(visible=False)

    @edge
    def consent_cancel(self, key: object, waiting: object, history: object) -> tuple[Any, ...]:
        """Cancel: nothing is sent to the model, no event, no receipt; the question goes back into the input box
        (and leaves the chat: it was never stored)."""
        base = _without_waiting(history)
        question = ""
        if isinstance(waiting, ct.Waiting):
            ct.cancel(self.service, key, waiting.token)
            question = waiting.message
            if base and isinstance(base[-1], dict) and base[-1].get("role") == "user":
                base = base[:-1]
        return (
            [*base, r.note_message(rc.CANCELLED, rc.CANCELLED_TITLE)],
            question,
            None,
            gr.Column(visible=False),
            "",
            gr.CheckboxGroup(choices=[], value=[]),
        )

    @staticmethod
    def consent_closed() -> tuple[Any, ...]:
        """After a session switch: a proposal on screen was about the other session (it expires unanswered)."""
        return None, gr.Column(visible=False), "", gr.CheckboxGroup(choices=[], value=[])

    # -- the history the visitor saw ----------------------------------------------------------
    @edge
    def check_history(self, key: object, state: object) -> tuple[Any, ...]:
        """After a page load, a session switch and each turn: prove today's history extends the kept checkpoint.

        Outputs: (kept-checkpoints BrowserState, warning box, warning text, kept download, current download,
        accept button, history status).
        """
        return self._history(key, state, accept=False)

    @edge
    def accept_history(self, key: object, state: object) -> tuple[Any, ...]:
        """The visitor, warned and holding both downloads, keeps the server's current checkpoint from now on
        (it is still checked against the ledger first). Same outputs as check_history."""
        return self._history(key, state, accept=True)

    def _history(self, key: object, state: object, *, accept: bool) -> tuple[Any, ...]:
        session = self.service.session(key)
        kept = kp.kept_for(state, session)
        check = self.service.history_check(key, None if accept else kept.text)
        notes = [n for n in (kept.note, check.note) if n]
        check = dataclasses.replace(check, note="; ".join(notes) or None)
        if check.keep is not None:
            new_state: Any = kp.stored(state, session, check.keep)
        elif notes:  # drop what could not be read, so the note is not shown again on the next visit
            new_state = kp.dropped(state, session) if check.note else kp.normalised(state)
        else:
            new_state = gr.skip()
        text = rh.warning_markdown(check)

        def offer(which: str, label: str, cp: dict[str, Any] | None) -> Any:
            if not check.warning or cp is None:
                return gr.DownloadButton(value=None, visible=False)
            return gr.DownloadButton(label=label, value=self.service.checkpoint_download(which, cp), visible=True)

        return (
            new_state,
            gr.Column(visible=bool(text)),
            text,
            offer("kept", rh.KEPT_LABEL, check.kept),
            offer("current", rh.CURRENT_LABEL, check.current),
            gr.Button(visible=check.warning),
            rh.status_markdown(check),
        )

    # -- search ----------------------------------------------------------------------------
    @edge
    def search(
        self,
        query: object,
        k: object,
        key: object,
        include_revoked: object = False,
        explain: object = False,
        include_superseded: object = False,
        as_of: object = "",
    ) -> tuple[Any, ...]:
        """Outputs: (status, results, explanation). A refused or failed query empties all three: the last query's
        results never stay on screen under a status that is not theirs. Revoked memories only when asked, labelled;
        superseded ones (issue 12) likewise, struck through and naming the seq that replaced them.
        `explain` ("explain each hit"): why each hit ranked where it did, under the table; empty otherwise.
        `as_of` (issue 34): a ledger size — what a turn asked when the session held that many events would have been
        handed, under that time's revocations and supersessions, and what a rule left out; empty: now."""
        if isinstance(as_of, str) and as_of.strip():
            return self._search_as_of(query, k, key, as_of)
        try:
            resp = self.service.search(
                key,
                query,
                k,
                include_revoked=include_revoked is True,
                include_superseded=include_superseded is True,
                explain=explain is True,
            )
            revoked = self.service.revoked(key) if include_revoked is True else {}
            superseded = (
                {s: x.new_seq for s, x in self.service.superseded(key).items()} if include_superseded is True else {}
            )
        except KNOWN as exc:
            return r.search_refused(str(exc)), table(r.SEARCH_HEADERS, []), ""
        except Exception as exc:  # noqa: BLE001 - the edge
            log.error(
                "search failed (%s at %s)", type(exc).__name__, raised_at(exc)
            )  # no message: it may quote the query
            return (
                r.search_refused("the search failed on the server; the details are in the server log"),
                table(r.SEARCH_HEADERS, []),
                "",
            )
        rows = r.search_rows(resp.results, revoked, superseded)
        text_col = r.SEARCH_HEADERS.index("text")
        styling = r.struck_styling([h.seq for h in resp.results], superseded, len(r.SEARCH_HEADERS), text_col)
        return (
            r.search_status(len(resp.results), resp.k, resp.reason, resp.mode),
            table(r.SEARCH_HEADERS, rows, styling),
            r.search_explanation(resp.results, revoked, superseded),
        )

    def _search_as_of(self, query: object, k: object, key: object, as_of: str) -> tuple[Any, ...]:
        try:
            size, got = self.service.search_as_of(key, query, k, as_of)
        except KNOWN as exc:
            return r.search_refused(str(exc)), table(r.SEARCH_HEADERS, []), ""
        except Exception as exc:  # noqa: BLE001 - the edge
            log.error("search as of failed (%s at %s)", type(exc).__name__, raised_at(exc))  # no message: it may quote the query
            return r.search_refused("the search failed on the server; the details are in the server log"), table(r.SEARCH_HEADERS, []), ""
        rows = r.search_rows(got.hits)
        return r.as_of_status(size, len(got.hits), got.rules), table(r.SEARCH_HEADERS, rows), r.as_of_left_out(got.why_out)

    @edge
    def search_again(
        self,
        query: object,
        k: object,
        key: object,
        include_revoked: object = False,
        explain: object = False,
        include_superseded: object = False,
        as_of: object = "",
    ) -> tuple[Any, ...]:
        """After a revoke, restore or correction from the Manual search tab: the same search again (its labels
        changed); nothing when no query was typed."""
        if not isinstance(query, str) or not query.strip():
            return gr.skip(), gr.skip(), gr.skip()
        return self.search(query, k, key, include_revoked, explain, include_superseded, as_of)

    # -- verify ----------------------------------------------------------------------------
    @edge
    def verify(
        self, path: object, key: object, policy: object = None, progress: gr.Progress = gr.Progress()  # noqa: B008 - Gradio's progress bar
    ) -> tuple[Any, ...]:
        """Outputs: (verdict, report table). The verdict opens with what the receipt says (render_receipt). The
        progress bar shows while the receipt is checked against the ledger (a walk of the chain: long on a big one).
        `policy`: a witness policy pasted on the tab (issue 33); empty, the app's own (WITNESS_POLICY) is used."""
        empty = table(rv.REPORT_HEADERS, [])
        try:
            raw = read_upload(path)
            pasted = read_policy(policy)
            progress((0, 1), desc="checking the receipt against the ledger", unit="steps")
            if is_certificate(raw):  # an erasure certificate (from Forget…): dispatch on its payloadType
                cert, creport, cmode = self.service.verify_certificate(raw, key)
                return rv.certificate_markdown(cert, creport, cmode), table(rv.REPORT_HEADERS, rv.report_rows(creport))
            report, mode, home = self.service.verify_where(raw, key, policy=pasted)
        except BadInput as exc:
            return rv.refused_markdown(str(exc)), empty
        except (MalformedReceipt, MalformedCertificate) as exc:
            return rv.malformed_markdown(str(exc)), empty
        panel = rr.panel_for(raw, erased=erased_seqs(report))
        where = f"\n\n{rb.imported_note(home)}" if home is not None else ""  # a session the visitor imported
        first = rv.verdict_line(report, mode, rv.signer_of(raw)) + "\n\n"  # the verdict first, then what it says
        witnessed = rp.witness_markdown(report)  # the cosignature rows, when a policy or the receipt brought any
        witnessed = f"\n\n{witnessed}" if witnessed else ""
        why = self._why_these(raw, report, mode)
        return first + panel + rv.verdict_markdown(report, mode) + witnessed + where + why, table(rv.REPORT_HEADERS, rv.report_rows(report))

    def _why_these(self, raw: bytes, report: Any, mode: str) -> str:
        """"Why these memories" under a verified receipt of the visitor's own session: the replay of its ranking
        (issue 34). A replay that cannot run says why in the section, never in place of the verdict."""
        got = self.service.replay(raw, report, mode)
        return "\n\n" + (ry.skipped_markdown(got) if isinstance(got, str) else ry.replay_markdown(got))

    @edge
    def tamper(
        self,
        path: object,
        target: object,
        key: object,
        progress: gr.Progress = gr.Progress(),  # noqa: B008 - Gradio's progress bar
    ) -> tuple[Any, ...]:
        """Outputs: (verdict, report table, tampered-copy download). The verdict opens with what the tampered
        copy says: the receipt the checks below ran on (against the ledger, under a progress bar, as Verify)."""
        empty = table(rv.REPORT_HEADERS, [])
        none = gr.DownloadButton(value=None, interactive=False)
        try:
            raw = read_upload(path)
            progress((0, 1), desc="changing one byte, then checking the copy against the ledger", unit="steps")
            t, report, mode = self.service.tamper(raw, target if isinstance(target, str) else DEFAULT_TARGET, key)
        except (BadInput, TamperError) as exc:
            return rv.refused_markdown(str(exc)), empty, none
        except MalformedReceipt as exc:
            return rv.malformed_markdown(str(exc)), empty, none
        copy = self.service.downloads.put(f"tampered-{report.receipt_id}.json", t.raw)
        return (
            rr.panel_for(t.raw, rr.TAMPERED_TITLE, erased=erased_seqs(report)) + rv.tamper_markdown(t, report, mode),
            table(rv.REPORT_HEADERS, rv.report_rows(report)),
            gr.DownloadButton(label="⬇ Download the tampered copy", value=copy, interactive=True),
        )

    # -- ledger ------------------------------------------------------------------------------
    @edge
    def ledger(self, key: object, progress: gr.Progress = gr.Progress()) -> tuple[Any, ...]:  # noqa: B008
        """Outputs: (chain status, events table, latest checkpoint). The progress bar shows while the chain is
        verified from genesis (seconds on a session of a million events)."""
        progress((0, 1), desc="verifying the chain from genesis", unit="steps")
        view = self.service.ledger(key)
        ok = view.report is not None and view.report.ok and not view.problem
        revoked = self.service.revoked(key) if ok else {}  # a broken chain: no labels
        superseded = {s: x.new_seq for s, x in self.service.superseded(key).items()} if ok else {}
        rows = r.ledger_rows(view.events, revoked=revoked, superseded=superseded)
        shown = view.events[-r.LEDGER_ROWS :]
        text_col = r.LEDGER_HEADERS.index("text")
        styling = r.struck_styling([e.seq for e in shown], superseded, len(r.LEDGER_HEADERS), text_col)
        status = r.chain_status(view.report, len(rows), view.total)
        if view.problem:
            status += f"\n\n_The events cannot be listed: {r.md(view.problem, 300)}_"
        return status, table(r.LEDGER_HEADERS, rows, styling), r.checkpoint_text(view.checkpoint)

    # -- forgetting (webui/forget.py; the rules are control.forget's) ------------------------------------
    # Every entry point opens the one confirmation panel. Outputs of ask/confirm/cancel: (pending State,
    # panel, panel text, reason box, confirm button, cancel button, certificate download, status line).
    @edge
    def ask_forget(self, key: object, seq: object) -> tuple[Any, ...]:
        """A seq from the turn's dropdown, a search result or the ledger (a selected row or the seq box)."""
        asked = fg.ask(self.service, key, [_seq_value(seq)])
        assert asked.plan is not None
        return self._asking(asked, rf.preview_markdown(asked.plan, asked.events), rf.CONFIRM_LABEL)

    @edge
    def ask_forget_session(self, key: object) -> tuple[Any, ...]:
        asked = fg.ask_session(self.service, key)
        text = rf.session_preview_markdown(asked.pending.session, asked.count, asked.receipts)
        return self._asking(asked, text, rf.CONFIRM_SESSION_LABEL)

    @staticmethod
    def _asking(asked: fg.Asked, text: str, confirm_label: str) -> tuple[Any, ...]:
        return (
            asked.pending,
            gr.Column(visible=True),
            text,
            gr.Textbox(value="", visible=asked.pending.scope == fg.EVENTS),
            gr.Button(value=confirm_label, visible=True),
            gr.Button(value=rf.CANCEL_LABEL),
            gr.DownloadButton(value=None, visible=False),
            "",
        )

    @edge
    def confirm_forget(self, key: object, pending: object, reason: object) -> tuple[Any, ...]:
        """Confirm. A refusal (a reason that repeats the memory, a stale or foreign confirmation) — or a failure — does
        not raise: gr.Error would put an "Error" overlay on every output, locking the panel (issue 28 §6). It is said in
        the status line beside the reason (and a toast); the preview, the reason typed and the buttons stay as they are."""
        try:
            done = fg.confirm(self.service, key, pending, reason)
        except fg.Changed as changed:  # ask again, showing what would go now
            asked = changed.asked
            assert asked.plan is not None
            return (
                asked.pending,
                gr.Column(visible=True),
                rf.preview_markdown(asked.plan, asked.events, changed=True),
                gr.skip(),
                gr.skip(),
                gr.skip(),
                gr.skip(),
                "",
            )
        except fg.ForgetInterrupted as exc:  # the ledger changed: not "nothing was forgotten"; the panel's work is over
            gr.Warning(html.escape(str(exc)), title="Forget")
            return (*(gr.skip() for _ in range(3)), gr.Textbox(visible=False), gr.Button(visible=False), gr.Button(value=rf.CLOSE_LABEL), gr.skip(), rf.interrupted_markdown(str(exc)))
        except Exception as exc:  # noqa: BLE001 - the edge: said beside the reason, never raised (see above)
            return self._forget_refused(exc)
        return (
            fg.DONE_SESSION if done.result.record_seq is None else fg.DONE_EVENTS,
            gr.Column(visible=True),
            rf.result_markdown(done.result, done.copies_removed),
            gr.Textbox(value="", visible=False),
            gr.Button(visible=False),
            gr.Button(value=rf.CLOSE_LABEL),
            gr.DownloadButton(label=rf.CERTIFICATE_LABEL, value=done.certificate_download, visible=True),
            "",
        )

    @staticmethod
    def _forget_refused(exc: BaseException) -> tuple[Any, ...]:
        """The panel as it is (every output skipped: the preview, the reason typed, the buttons) and the refusal in
        the status line; the same text as a toast. Unexpected failures are logged by to_gr_error, as at any edge."""
        err = to_gr_error(exc, for_html=False)
        gr.Warning(html.escape(err.message), title=err.title or "Refused")
        return (*(gr.skip() for _ in range(7)), rf.refused_markdown(err.message))

    @staticmethod
    def cancel_forget() -> tuple[Any, ...]:
        """Cancel (or Close, after a forget): nothing changes; the panel closes."""
        return (
            None,
            gr.Column(visible=False),
            "",
            gr.Textbox(value=""),
            gr.Button(visible=True),
            gr.Button(value=rf.CANCEL_LABEL),
            gr.DownloadButton(value=None, visible=False),
            "",
        )

    @edge
    def after_forget(self, key: object, state: object) -> tuple[Any, ...]:
        """After a confirmed forget: the session outputs again (the chat reads [forgotten]) or, when the whole
        session went, a new session. Nothing to do when the confirmation was asked again instead."""
        if state == fg.DONE_SESSION:
            return self._session(new_session_key())
        if state == fg.DONE_EVENTS:
            return self._session(key if isinstance(key, str) else new_session_key())
        return tuple(gr.skip() for _ in range(6))

    # -- revoke and restore (webui/controls.py; the rules are control.revocation's) ------------------------------
    # A refusal is not raised: gr.Error would put an "Error" overlay on every output of the event (the status line, and
    # for Correct this the new-statement box), covering the row (issue 28 §6). It is said in the status line beside the
    # control (and a toast); what was typed stays. Outputs end with the row's "changed" State: the refreshes chained
    # after the control (the ledger, the search: webui/wiring.py if_changed) run only when it reads True. MCP's tools
    # call webui/controls.py and webui/supersede.py directly, and keep raising.
    @edge
    def revoke(self, key: object, seq: object, reason: object = None) -> tuple[str, bool]:
        """A seq from the turn's dropdown, a search result or the ledger, and the optional reason beside it. Outputs:
        (the control's status line, changed). A refusal (unknown seq, already revoked, a control or erasure record, a
        reason that repeats the memory's words: control.plan.quoted) is said there and in a toast; nothing appended."""
        try:
            result = ct.revoke(self.service, key, seq, reason)
        except Exception as exc:  # noqa: BLE001 - the edge: said beside the control, never raised (see above)
            return self._control_refused(exc, "Not revoked"), False
        return rc.result_markdown(result), True

    @edge
    def restore(self, key: object, seq: object, reason: object = None) -> tuple[str, bool]:
        """As revoke: (status line, changed)."""
        try:
            result = ct.restore(self.service, key, seq, reason)
        except Exception as exc:  # noqa: BLE001 - the edge (see above)
            return self._control_refused(exc, "Not restored"), False
        return rc.result_markdown(result), True

    @staticmethod
    def _control_refused(exc: BaseException, what: str) -> str:
        """The refusal as the status line beside the control, and the same text as a toast (a warning: no overlay).
        Unexpected failures are logged by to_gr_error and read "failed on the server", as at any edge."""
        err = to_gr_error(exc, for_html=False)
        gr.Warning(html.escape(err.message), title=err.title or "Refused")
        return rc.refused_markdown(what, err.message)

    # -- correct this and history (webui/supersede.py; the rules are control.supersession's, issue 12) --------------
    @edge
    def correct(self, key: object, seq: object, new_text: object, reason: object = None) -> tuple[Any, ...]:
        """A seq from the turn's dropdown, a search result or the ledger, the new statement typed beside it and the
        optional reason. Outputs: (the control's status line, the new-statement box, changed): emptied after a
        correction; a refusal (unknown seq, an erased or control record, an empty text, a reason that repeats the
        words) is said in the status line and a toast, the statement typed stays in its box, nothing is appended."""
        try:
            result = sp.correct(self.service, key, seq, new_text, reason)
        except Exception as exc:  # noqa: BLE001 - the edge (see revoke)
            return self._control_refused(exc, "Not corrected"), gr.skip(), False
        assert isinstance(new_text, str)
        return rs.result_markdown(result, new_text.strip()), "", True

    @edge
    def memory_history(self, key: object, seq: object) -> str:
        """The memory's history: every statement of its fact, oldest first (a Markdown table). A refusal (no memory
        chosen, a record, an unknown seq) is said in its place, beside the button, and in a toast."""
        try:
            entries = sp.history(self.service, key, seq)
            return rs.history_markdown(entries, sp.suggestions(self.service, key, entries))
        except Exception as exc:  # noqa: BLE001 - the edge (see revoke)
            return self._control_refused(exc, "No history")

    @edge
    def turn_tools(self, key: object) -> tuple[Any, ...]:
        """Under the stamps, for the latest answer: (its receipt id State, forget dropdown, withhold choices,
        withheld-copy download)."""
        latest = self.service.latest_receipt(key) if is_session_key(key) else None
        none = gr.DownloadButton(label=rf.WITHHELD_LABEL, value=None, interactive=False)
        if latest is None:
            return None, gr.Dropdown(choices=[], value=None), gr.CheckboxGroup(choices=[], value=[]), none
        rid, body = latest
        return (
            rid,
            gr.Dropdown(choices=rf.forget_choices(body), value=None),
            gr.CheckboxGroup(choices=rf.withhold_choices(body), value=[]),
            none,
        )

    @edge
    def withhold(self, key: object, receipt_id: object, seqs: object) -> Any:
        """The ticked memories changed: a copy of the latest receipt without them (or nothing to download)."""
        chosen = (
            [int(s) for s in seqs if isinstance(s, int) or (isinstance(s, str) and s.isdigit())]
            if isinstance(seqs, list)
            else []
        )
        if not chosen:
            return gr.DownloadButton(label=rf.WITHHELD_LABEL, value=None, interactive=False)
        path = self.service.withheld_copy(key, receipt_id, chosen)
        names = ", ".join(f"seq {s}" for s in chosen)
        return gr.DownloadButton(label=f"⬇ Download a copy without {names}", value=path, interactive=True)

    @staticmethod
    def pick_ledger_row(evt: gr.SelectData) -> Any:
        """A selected row of the ledger: its seq goes into the seq box beside Forget…."""
        return _seq_of_row(evt, r.LEDGER_HEADERS.index("seq"))

    @staticmethod
    def pick_search_row(evt: gr.SelectData) -> Any:
        """A selected search result: its seq goes into the seq box beside Forget…."""
        return _seq_of_row(evt, r.SEARCH_HEADERS.index("seq"))


def _seq_of_row(evt: gr.SelectData, at: int) -> Any:
    row = evt.row_value if isinstance(evt.row_value, list) else []
    return str(row[at]) if len(row) > at and row[at] not in (None, "") else gr.skip()


def _seq_value(value: object) -> object:
    """What an entry point gave as the seq: the dropdown's int, a selected row's or a typed number."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise BadInput("forget: choose a memory first (pick it in the list, select its row, or type its seq)")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value.strip() if isinstance(value, str) else value


def erased_seqs(report: Report) -> set[int]:
    """The cited seqs the ledger erased, as the ledger checks found them (empty when checked offline)."""
    return {c.seq for c in report.cited if c.content == ERASED}


def _failed_note(exc: BaseException) -> dict[str, Any]:
    return r.note_message(
        f"No answer: {shown_text(exc)}" if isinstance(exc, KNOWN) else "No answer: the turn failed on the server."
    )


def _without_waiting(history: object) -> list[Any]:
    """The chat history without the trailing "waiting for your choice" note."""
    base = list(history) if isinstance(history, list) else []
    if base and isinstance(base[-1], dict) and (base[-1].get("metadata") or {}).get("title") == rc.WAITING_TITLE:
        base = base[:-1]
    return base


def _streamed(work: Callable[[Callable[[str], None]], Turn]) -> Iterator[str | Turn | BaseException]:
    """Run a turn in its own thread, yielding its text so far as it streams, then the Turn or the exception.

    A closed page stops this generator, not the turn, which completes and writes its receipt."""
    pieces: queue.SimpleQueue[object] = queue.SimpleQueue()
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["turn"] = work(pieces.put)
        except BaseException as exc:  # noqa: BLE001 - handed to the generator below
            box["error"] = exc
        finally:
            pieces.put(_DONE)

    threading.Thread(target=run, name="mre-turn", daemon=True).start()
    text = ""
    for chunk in _batches(pieces):
        text += chunk
        yield text
    yield box["error"] if "error" in box else box["turn"]


def _batches(pieces: queue.SimpleQueue[object]) -> Iterator[str]:
    """Streamed text in batches (whatever arrived since the last yield) until the turn is done."""
    while True:
        item = pieces.get()
        batch = []
        while True:
            if item is _DONE:
                if batch:
                    yield "".join(batch)
                return
            batch.append(str(item))
            try:
                item = pieces.get_nowait()
            except queue.Empty:
                break
        yield "".join(batch)
