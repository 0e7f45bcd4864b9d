"""The turn: the only code that knows the order of the steps.

1. append the user's message; 2. retrieve the top-K memories (not that
message); 3. build the prompt from the versioned template; 4. call the model
(or the offline stand-in); 5. append the answer; 6. write the signed receipt.
No receipt, no answer: if step 6 fails the turn raises TurnError.

Receipts are written in format 2 (docs/FORMAT.md §15): the signed body cites
each event in erased form and the texts travel beside it as disclosures, so a
stored receipt can later be redacted (receipts.redact) and still verify.

Every append through the engine (a turn's two, `remember`, the failure notes)
is followed, under the session's turn lock, by a signed checkpoint over the
whole session (receipts.checkpoints), so every acknowledged event is under a
signature a visitor can keep and hold us to.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chat.citing import Cites
from chat.llm import LLM, Completion
from chat.retrieve import RETRIEVAL, Retrieved, ranking_config_of, retrieve
from chat.stand_ins import StandIns
from chat.supersede import record_supersessions
from chat.withheld import check_handed, model_view
from control.revocation import current as current_controls
from control.settings import SettingsError, refuse_direct_turn
from control.settle import ErasureUnfinished, settle
from control.state import Revocation
from control.steps import delete_session
from control.suggestions import keep_suggestions
from control.supersession_state import Supersession
from control.where import where
from ledger import Event
from ledger.canonical import dumps_unchecked
from ledger.event import EventError, now_ts, validate_session_id
from receipts import body as rbody
from receipts import checkpoints
from receipts.keys import SigningKey
from receipts.prompt import (
    TEMPLATE_V1,
    TEMPLATE_V2,
    TEMPLATE_V3,
    build_messages,
    earlier_mark,
    prompt_hash,
    superseded_mark,
)
from receipts.ranking import ranking_part
from receipts.states import states_part
from retrieval.model import Hit, SearchError, check_k
from storage.local import load_or_create
from storage.stores import Stores, file_stores, open_stores

if TYPE_CHECKING:
    from receipts.cosignature import Policy
    from storage.api import SearchIndex

log = logging.getLogger("chat")
MAX_MESSAGE_CHARS = 8000


class TurnError(RuntimeError):
    """The turn did not complete; no answer is to be shown as if it had one."""


class InputError(ValueError):
    """The user's input was refused before anything was written."""


@dataclass(frozen=True)
class Consent:
    """A person's decision on a proposal (chat.consent): the events proposed, best first, when, and the seqs the
    person approved (only those may reach the model; chat.withheld)."""

    proposed: list[Event]
    proposed_at: str
    approved: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Turn:
    answer: str
    receipt_id: str
    receipt_path: Path
    envelope: dict[str, Any]  # the receipt file as written (format 2: the DSSE envelope and its disclosures)
    body: dict[str, Any]  # what the receipt says (receipts.body.Receipt.body: format 2 with the disclosures merged in)
    hits: list[Hit]
    completion: Completion
    user_event: Event
    assistant_event: Event


def check_message(message: object) -> str:
    if not isinstance(message, str):
        raise InputError("message: must be text")
    if not message.strip():
        raise InputError("message: is empty")
    if len(message) > MAX_MESSAGE_CHARS:
        raise InputError(f"message: {len(message)} characters is over the limit of {MAX_MESSAGE_CHARS}")
    return message


class Engine:
    """One deployment's stores (storage.stores: files in DATA_DIR, or PostgreSQL), signing key and model client."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        llm: LLM | None = None,
        key: SigningKey | None = None,
        index: SearchIndex | None = None,
        receipt_format: int = rbody.RECEIPT_VERSION_2,
        stores: Stores | None = None,
    ) -> None:
        """`receipt_format`: 2 (detached disclosures, the default) or 1 (texts signed whole; kept for tests
        of format-1 verification — a format-1 receipt cannot be redacted when a memory is forgotten).

        `stores`: where the memory is kept (storage.stores); by default `index`'s data directory when one is given,
        else storage.stores.open_stores(data_dir): PostgreSQL when DATABASE_URL is set, the files in it otherwise.
        On PostgreSQL `data_dir` holds the signing key and the receipt copies a visitor keeps."""
        if receipt_format not in rbody.PAYLOAD_TYPES:
            raise ValueError(f"receipt_format: {receipt_format!r} is not a known receipt format (1 or 2)")
        self.receipt_format = receipt_format
        self.data_dir = Path(data_dir)
        if stores is None:
            stores = file_stores(self.data_dir, index=index) if index is not None else open_stores(self.data_dir)
        self.stores = stores
        self.ledger = stores.ledger
        self.index = stores.index
        self.backend = stores.receipts  # receipts, the producer's trees, .cites records, checkpoints; the turn lock
        self.rows = stores.rows  # the derived receipts / receipt_cites rows
        self.cites = Cites(self.stores)  # which answers may quote a revoked memory
        self.stand_ins = StandIns(self.ledger)  # the offline stand-in's replies: never handed back as memories
        try:
            # index.sqlite's rows are derived from the receipt files (refilled if it was rebuilt); on PostgreSQL they
            # are the record: None, nothing to refill
            generation = self.rows.restore_derived()
            if generation is not None:
                self.cites.filled(generation)
            self.key = key if key is not None else load_or_create(self.data_dir)
        except BaseException:
            stores.close()  # a PostgreSQL pool opened for nothing
            raise
        self.llm = llm if llm is not None else LLM()
        self.write_receipt: Callable[[Path, str, str, dict[str, Any]], Path] = self._store_receipt
        self.clock: Callable[[], float] = time.time  # consent tokens' expiry (tests move it)
        # §22: witnesses asked to cosign each turn's checkpoint before its receipt is signed (a face sets the policy:
        # WITNESS_POLICY); each one bounded by witness_timeout, a witness down or refusing never stops a turn
        self.witnesses: Policy | None = None
        self.witness_timeout = 3.0
        self._witnessed_sizes: dict[tuple[str, int, str], int] = {}  # (witness, key hash, session) -> size it cosigned

    def _store_receipt(self, _data_dir: Path, session: str, receipt_id: str, envelope: dict[str, Any]) -> Path:
        """The receipt stored durably (complete or not at all); the file a visitor can keep (on PostgreSQL a copy
        of the row, which is the record). Tests replace `write_receipt` to make this step fail."""
        return Path(self.backend.write_receipt(session, receipt_id, envelope))

    def close(self) -> None:
        """Release the stores (a PostgreSQL pool); the engine is not used after."""
        self.stores.close()

    # -- ask me first (chat.consent; docs/FORMAT.md §18) ---------------------------------------------
    def propose(self, session: str, message: str, k: int = 8) -> Any:
        """Step 1 of a consent turn: the top-K candidates and a one-time token (chat.consent.Proposal); appends nothing."""
        from chat import consent

        return consent.propose(self, session, message, k)

    def answer(self, token: str, approved_ids: Any, *, session: str | None = None, on_delta: Callable[[str], None] | None = None) -> Turn:
        """Step 2: spend the token; only the approved memories go into the prompt. ConsentError: nothing appended."""
        from chat import consent

        return consent.answer(self, token, approved_ids, session=session, on_delta=on_delta)

    def cancel(self, token: str, *, session: str | None = None) -> None:
        """End a consent turn with nothing sent to the model: no event, no receipt."""
        from chat import consent

        consent.cancel(self, token, session=session)

    def forget(self, session: str, *, idle_before: float | None = None) -> bool:
        """Delete a session: its ledger, receipts, Merkle tree, checkpoint, audit cache, index rows, consent
        proposals and settings (control.steps.delete_session, the one implementation, which
        control.forget.forget_session also runs; on PostgreSQL the search rows go first, so a failure there leaves
        the session whole and a retry deletes it all), under the session's turn lock.

        With `idle_before` (a Unix time), only if its ledger was last written
        before then — checked under that lock, so a turn that is
        running or just finished is never deleted. Returns whether it was deleted.
        On PostgreSQL the rows are deleted and the tables VACUUMed (storage.pg: what the server still keeps).
        """
        from ledger.event import validate_session_id

        validate_session_id(session)
        w = where(self.data_dir, self.stores)
        with self.backend.turn_lock(session):
            if idle_before is not None:
                written = self.last_written(session)
                if written is None or written >= idle_before:
                    return False
            delete_session(w, session)
            self.cites.forget(session)  # this process's note that the session's cites were read whole
            self.stand_ins.forget(session)
        return True

    def last_written(self, session: str) -> float | None:
        """When the session's ledger was last written (Unix time), or None when there is no such session."""
        return self.ledger.last_written(session)

    def remember(self, session: str, text: str, role: str = "user", meta: dict[str, Any] | None = None) -> Event:
        """Append a message without a model turn (import, notes, MCP 'remember')."""
        check_message(text)
        self.settle(session)
        try:
            with self.backend.turn_lock(session):
                ev = self.ledger.append(session, role, text, meta or {})
                self.detect_changes(ev)
                self.backend.issue_checkpoint(self.ledger, session, self.key)
        except EventError as exc:
            raise InputError(str(exc)) from None
        self.index.index_session(session, [ev])  # and any supersession records after it: read from the ledger, skipped
        return ev

    def settle(self, session: str) -> None:
        """Before a turn, a proposal or a `remember`: an erasure of the session that stopped half way is finished
        first (control.settle): its index rows still hold the forgotten words. InputError, one line, when it cannot be
        finished now (nothing is appended or sent)."""
        try:
            validate_session_id(session)
        except EventError as exc:
            raise InputError(str(exc)) from None
        try:
            settle(self.data_dir, session, stores=self.stores, key=self.key)
        except ErasureUnfinished as exc:
            raise InputError(str(exc)) from None

    def detect_changes(self, ev: Event, *, consent_turn: bool = False) -> int:
        """Under the turn lock, right after the user event `ev` was appended: the supersession records it makes
        (chat.supersede; docs/RETRIEVAL.md). The caller keeps its checkpoint after. Returns how many.
        `consent_turn`: `ev` is the question of a turn whose memories a person chose (chat.consent), whatever the
        session's setting: then no model is shown any earlier statement (the local rules decide, sending nothing)."""
        view = model_view(self.stores, self.cites, ev.session)  # what a model may be shown (chat.withheld)
        if consent_turn:
            view = replace(view, ask_first=True)
        return len(record_supersessions(self.ledger, self.index, self.llm, ev, view, self._keep_suggestions))

    def detect_imported(self, session: str, events: Sequence[Event]) -> int:
        """`ledger import --detect-changes` (issue 32): the change detector over the imported user statements in
        order, each against the statements before it (chat.supersede: the lexical shortlist only holds earlier
        seqs), recording what it decides as a turn would, under the turn lock, and one checkpoint after. The local
        rules decide (no model is asked about an import: a history of thousands of statements would be as many
        requests). Returns how many supersession records were appended."""
        self.settle(session)
        self.index.index_session(session)
        rules_only = LLM(api_key="")
        done = 0
        with self.backend.turn_lock(session):
            start = self.ledger.head(session)[0]
            view = model_view(self.stores, self.cites, session)  # what a model may be shown: no withheld statement
            try:
                for ev in sorted((e for e in events if e.role == "user" and e.session == session), key=lambda e: e.seq):
                    done += len(record_supersessions(self.ledger, self.index, rules_only, ev, view))
            finally:  # a failure half way still signs the records it appended: none is left after the last checkpoint
                if self.ledger.head(session)[0] > start:
                    self.backend.issue_checkpoint(self.ledger, session, self.key)
        self.index.index_session(session)
        return done

    def _keep_suggestions(self, session: str, pairs: list[tuple[int, str, int, str]], suggested_by: str) -> None:
        """A model's proposals the rules did not confirm: kept for a person to confirm or not (control.suggestions)."""
        keep_suggestions(self.stores, session, pairs, suggested_by)

    def turn(
        self, session: str, message: str, k: int = 8, *, on_delta: Callable[[str], None] | None = None, settled: bool = False
    ) -> Turn:
        """`settled`: the caller has just run `control.settle` for the session itself (the app's Service.turn, with its
        download folders), so the turn does not check for an erasure stopped half way a second time (issue 30)."""
        check_message(message)
        try:
            k = check_k(k)
        except SearchError as exc:
            raise InputError(str(exc)) from None
        receipt_id = "rcpt_" + os.urandom(16).hex()
        if not settled:
            self.settle(session)
        try:
            with self.backend.turn_lock(session):
                # "ask me first" on: only propose / answer may hand memories to the model (control.settings). Read
                # under the lock: the switch may have been turned on (on any replica) while this turn waited for it
                refuse_direct_turn(self.stores, session)
                return self._turn(session, message, k, receipt_id, on_delta)
        except SettingsError as exc:
            raise InputError(str(exc)) from None
        except EventError as exc:
            raise InputError(str(exc)) from None

    def _turn(self, session: str, message: str, k: int, receipt_id: str, on_delta: Callable[[str], None] | None) -> Turn:
        # the index holds every event before the question (a failure note, say, is appended unindexed): the search
        # sees exactly the ledger's events below the question's seq, as its receipt says (FORMAT.md §24)
        self.index.index_session(session)
        # 1. the user's message
        user_ev = self.ledger.append(session, "user", message, {"kind": "chat"})
        try:
            self.detect_changes(user_ev)
            # signed and in place while the model runs; its folder's fsync is the answer's checkpoint's (issue 30)
            self.backend.issue_checkpoint(self.ledger, session, self.key, durable=False)
            return self._answer(session, message, k, receipt_id, on_delta, user_ev)
        except TurnError:
            self._index_after_failure(session)
            raise
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"
            # the log and the ledger's note get the class only: a message may quote the query or a memory
            log.error("session %s: turn for seq %d failed (%s)", session, user_ev.seq, type(exc).__name__)
            self._note(session, f"the turn for the message at seq {user_ev.seq} failed before an answer was signed ({type(exc).__name__})", "turn_failure", receipt_id)
            self._index_after_failure(session)
            raise TurnError(f"the turn failed ({reason}); no answer was given") from exc

    def _index_after_failure(self, session: str) -> None:
        """Best effort: a turn that failed before its question was indexed (in its search, say) leaves it indexed. A
        search asks the index as it is (the app's, MCP's: no catch-up), so a question left to the next turn would be
        missing from every search a person ran meanwhile."""
        try:
            self.index.index_session(session)
        except Exception as exc:  # noqa: BLE001 - the turn fails either way; the next turn's catch-up tries again
            log.error("session %s: could not index after a failed turn (%s)", session, type(exc).__name__)

    def _note(self, session: str, text: str, kind: str, receipt_id: str) -> None:
        """Best effort: leave a system event saying what went wrong, so the ledger never just stops."""
        try:
            self.ledger.append(session, "system", text, {"kind": kind, "receipt_id": receipt_id})
            self.backend.issue_checkpoint(self.ledger, session, self.key)
        except Exception as exc:  # noqa: BLE001 - the turn fails either way
            log.error("session %s: could not record %s (%s)", session, kind, type(exc).__name__)  # no traceback: it may quote text

    def _answer(
        self, session: str, message: str, k: int, receipt_id: str, on_delta: Callable[[str], None] | None, user_ev: Event
    ) -> Turn:
        # 2. the top-K memories, never the message just appended, a revoked event or an answer that may quote one,
        # nor an answer that may quote a superseded statement (control events are not in the index).
        # Search before indexing it: the index gives each event its neighbours' words as context, so
        # once the new message is indexed, the turns just before it would match its own words.
        controls = self.ledger.head(session)[0]  # the question and the supersession records it made: the state searched under
        # earlier statements are handed over marked only where the receipt can say so (format 2: FORMAT.md §20 states v2)
        got = self._retrieve_all(session, message, k, [user_ev.seq], mark_earlier=self.receipt_format == rbody.RECEIPT_VERSION_2)
        # the question is indexed now, before the model, in a write of its own: indexed with the answer it would take
        # the answer's words as context (context_after), and forgetting the answer would rewrite the question's row,
        # which left the forgotten words in the page's free space (test_control_strong's forget during another
        # process's turns). A turn that fails before its answer has it indexed already (`_index_after_failure`)
        self.index.index_session(session, [user_ev])  # and any supersession records after it: read from the ledger, skipped
        memories = self._memories(session, got.hits)
        ranking = ranking_part(config=self.ranking_config(), indexed=user_ev.seq, controls=controls, rules=got.rules, ranked=got.ranked())
        return self._complete(
            session, message, k, receipt_id, on_delta, user_ev, got.hits, memories, got.excluded, None, got.left_out, mode=got.mode,
            ranking=ranking, earlier=got.earlier,
        )

    def _retrieve(self, session: str, message: str, k: int, also: list[int]) -> tuple[list[Hit], list[Revocation]]:
        """The top K and the revocations that kept an event out of it (`_retrieve_all` without the supersessions)."""
        got = self._retrieve_all(session, message, k, also)
        return got.hits, got.excluded

    def _retrieve_all(self, session: str, message: str, k: int, also: list[int], *, mark_earlier: bool = False) -> Retrieved:
        """The top K, and the revocations and supersessions that kept an event out of it (chat.retrieve, under the
        control state now), never one of the offline stand-in's replies (chat.stand_ins); with `mark_earlier` the
        earlier statements resolution names, handed over to be marked (chat.retrieve)."""
        return retrieve(
            self.index, self.cites, current_controls(self.ledger, session), session, message, k, also, stand_ins=self.stand_ins,
            mark_earlier=mark_earlier,
        )

    def ranking_config(self) -> dict[str, object]:
        """The configuration this engine's searches rank with (docs/FORMAT.md §24)."""
        return ranking_config_of(self.index)

    def _memories(self, session: str, hits: list[Hit]) -> list[Event]:
        memories = self.ledger.read_events(session, [h.seq for h in hits])
        for h, ev in zip(hits, memories, strict=True):
            if h.digest != ev.digest or h.event_id != ev.id:
                raise TurnError(f"session {session}: the index disagrees with the ledger at seq {h.seq}; rebuild the index")
        return memories

    def _complete(
        self,
        session: str,
        message: str,
        k: int,
        receipt_id: str,
        on_delta: Callable[[str], None] | None,
        user_ev: Event,
        hits: list[Hit],
        memories: list[Event],
        excluded: list[Revocation],
        consent: Consent | None,
        left_out: list[Supersession] | None = None,
        *,
        mode: str = "lexical",
        ranking: Mapping[str, Any] | None = None,
        earlier: Mapping[int, int] | None = None,
    ) -> Turn:
        """Steps 3–6 for the memories chosen (by retrieval, or by a person: `consent`).

        Each chosen memory superseded by now (a question about the past, or a person's approval) is marked in the
        prompt (template v2); the receipt records the states (FORMAT.md §20) once the session holds any. Each earlier
        statement retrieval named (`earlier`: seq -> the newer statement's seq, resolved at question time) is marked
        too, with when it was said and what replaced it (template v3, states v2)."""
        state = current_controls(self.ledger, session, save=True)  # a turn appends: keep control-state.json level (issue 15)
        held = state.supersessions
        earlier = dict(earlier or {}) if self.receipt_format == rbody.RECEIPT_VERSION_2 else {}
        with_states = self.receipt_format == rbody.RECEIPT_VERSION_2 and (bool(held.links) or bool(earlier))
        if self.receipt_format != rbody.RECEIPT_VERSION_2:
            excluded = []  # a format-1 receipt cannot carry them (FORMAT.md §17); retrieval still left them out
            if any(ev.seq in held.superseded for ev in memories):
                # nor a marked prompt (template v2 is format 2's, FORMAT.md §20): a superseded memory is not handed
                # to the model at all, rather than unmarked or under a template its receipt cannot name
                if consent is not None:
                    raise TurnError(f"session {session}: an approved memory is superseded and a format-1 receipt cannot mark it")
                keep = [i for i, ev in enumerate(memories) if ev.seq not in held.superseded]
                hits, memories = [hits[i] for i in keep], [memories[i] for i in keep]
        left = list(left_out or []) if with_states else []
        controls = self.ledger.read_events(session, [r.control_seq for r in excluded])
        # only as many memories as one receipt can cite within MAX_RECEIPT_BYTES (best first)
        reserve = sum(len(dumps_unchecked(ev.to_dict())) + rbody.PROOF_RESERVE + 200 for ev in controls)
        if with_states:  # each memory may be listed with its record (at most K), and each left-out one
            record_bytes = rbody.MAX_ERASED_RECORD_BYTES + 1024 + rbody.PROOF_RESERVE + 200  # a record: fixed text, a reason of at most 1000
            reserve += (len(memories) + len(left)) * (record_bytes + 2 * rbody.MAX_ERASED_RECORD_BYTES)
        if consent is not None:
            reserve += len(consent.proposed) * (rbody.MAX_ERASED_RECORD_BYTES + rbody.PROOF_RESERVE + rbody.CITATION_OVERHEAD + 40) + 1024
        fit = rbody.citable(user_ev, memories, self.receipt_format, reserve)
        if consent is not None and fit < len(memories):
            raise TurnError(f"session {session}: the {len(memories)} approved memories do not fit in one receipt; approve fewer")
        hits, memories = hits[:fit], memories[:fit]
        # an earlier statement whose newer one did not fit is not handed over: its mark would name a statement not there.
        # The memories end before it (they stay the ranked list's first ones: §24 ranking.memories), again until none
        # is left, since a statement cut may be the newer one of another before it (Paris -> Berlin -> London)
        while True:
            handed = {ev.seq for ev in memories}
            unmarked = {s for s, n in earlier.items() if s in handed and n not in handed and s not in held.superseded}
            if not unmarked:
                break
            cut = min(i for i, ev in enumerate(memories) if ev.seq in unmarked)
            hits, memories = hits[:cut], memories[:cut]
        marked = {rank: held.superseded[ev.seq] for rank, ev in enumerate(memories, start=1) if ev.seq in held.superseded}
        records = {ev.seq: ev for ev in self.ledger.read_events(session, sorted({x.record_seq for x in [*marked.values(), *left]}))}
        marks = {rank: superseded_mark(records[x.record_seq].ts, x.new_seq) for rank, x in marked.items()}
        was = {rank: (ev, earlier[ev.seq]) for rank, ev in enumerate(memories, start=1) if ev.seq in earlier and ev.seq not in held.superseded}
        marks |= {rank: earlier_mark(ev.ts, newer) for rank, (ev, newer) in was.items()}
        template = TEMPLATE_V3 if was else TEMPLATE_V2 if marks else TEMPLATE_V1
        # the last guard before the model: nothing the visitor withheld, nothing a person did not approve
        check_handed(model_view(self.stores, self.cites, session, state=state), memories, approved=consent.approved if consent is not None else None)
        # 3. the prompt
        messages = build_messages(template, message, [ev.to_dict() for ev in memories], marks)
        p_hash = prompt_hash(messages)
        # 4. the model (or the labelled stand-in)
        completion = self.llm.complete(
            messages, query=message, memories=memories, on_delta=on_delta, marks={ev.seq: marks[r] for r, ev in enumerate(memories, start=1) if r in marks}
        )
        # 5. the answer
        meta = {"kind": "chat", "receipt_id": receipt_id, "provider": completion.provider, "model": completion.model, "prompt_sha256": p_hash}
        self.backend.write_cites(session, receipt_id, user_ev.seq, [ev.seq for ev in memories])
        asst_ev = self.ledger.append(session, "assistant", completion.text, meta)
        # what it cited, before anything else can fail: an answer this process cannot tie to its memories would carry
        # them to a model after they are revoked (chat.citing reads the `.cites` record left above on every call too)
        self.cites.record(session, receipt_id, asst_ev.seq, [user_ev.seq, *(ev.seq for ev in memories)])
        # and any supersession records between the question and the answer: then read from the ledger, skipped
        self.index.index_session(session, [asst_ev])
        # 6. the receipt
        try:
            states = (
                (
                    [(rank, x.old_seq, x.old_id, records[x.record_seq]) for rank, x in marked.items()],
                    [(x.old_seq, x.old_id, records[x.record_seq]) for x in left],
                    [(rank, ev.seq, ev.id, newer) for rank, (ev, newer) in was.items()],
                )
                if with_states and (held.links or was)
                else None
            )
            envelope, body = self._sign(
                session, k, receipt_id, user_ev, memories, asst_ev, completion, p_hash, list(zip(excluded, controls, strict=True)), consent, template, states,
                semantic=self.index.semantic if mode == "hybrid" else None, ranking=ranking,
            )
            path = self.write_receipt(self.data_dir, session, receipt_id, envelope)
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"
            log.error("session %s: receipt %s could not be written (%s)", session, receipt_id, type(exc).__name__)
            self._note(session, f"receipt {receipt_id} for the answer at seq {asst_ev.seq} could not be written; that answer was withheld", "receipt_failure", receipt_id)
            raise TurnError(f"the receipt could not be written ({reason}); the answer was withheld") from exc
        try:  # the receipt says it now; a failed receipt keeps it (control.steps.citations)
            self.backend.drop_cites(session, receipt_id)
        except Exception as exc:  # noqa: BLE001 - a left-over record only keeps an answer out of retrieval longer
            log.warning("session %s: .cites record of %s not dropped (%s)", session, receipt_id, type(exc).__name__)
        self._record(session, receipt_id, path, body)
        return Turn(completion.text, receipt_id, path, envelope, body, hits, completion, user_ev, asst_ev)

    def _sign(
        self,
        session: str,
        k: int,
        receipt_id: str,
        user_ev: Event,
        memories: list[Event],
        asst_ev: Event,
        completion: Completion,
        p_hash: str,
        excluded: list[tuple[Revocation, Event]] | None = None,
        consent: Consent | None = None,
        template: str = TEMPLATE_V1,
        states: tuple[list[tuple[int, int, str, Event]], list[tuple[int, str, Event]], list[tuple[int, int, str, int]]] | None = None,
        *,
        semantic: Mapping[str, str] | None = None,
        ranking: Mapping[str, Any] | None = None,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        store = self.backend.synced_tree(self.ledger, session)
        try:
            tree_size = asst_ev.seq + 1
            if store.size != tree_size:
                raise TurnError(f"session {session}: Merkle tree holds {store.size} leaves, expected {tree_size}")
            # the checkpoint after this append: the one the receipt carries, kept as the latest
            checkpoint = checkpoints.sign_tree(session, store, asst_ev.chain, self.key)
            self.backend.keep_checkpoint(session, checkpoint)
            cosigned = None
            if self.witnesses is not None and self.receipt_format == rbody.RECEIPT_VERSION_2:
                cosigned = self._witnessed(session, checkpoint, store, tree_size)
            cited_states, left_states, earlier_states = states if states is not None else ([], [], [])
            proof = store.inclusion_proofs(  # every event the receipt proves, in one read of the tree
                [user_ev.seq, *(ev.seq for ev in memories), asst_ev.seq,
                 *(ev.seq for ev in (consent.proposed if consent is not None else ())),
                 *(rec.seq for *_, rec in cited_states), *(rec.seq for *_, rec in left_states),
                 *(ctl.seq for _, ctl in excluded or ())],
                tree_size,
            ).__getitem__
            part = None
            if consent is not None:
                part = rbody.consent_part(
                    proposed=[(ev, proof(ev.seq)) for ev in consent.proposed],
                    approved=[ev.seq for ev in memories],
                    proposed_at=consent.proposed_at,
                )
            states_member = None
            if states is not None:
                states_member = states_part(
                    superseded=[(rank, seq, eid, rec, proof(rec.seq)) for rank, seq, eid, rec in cited_states],
                    excluded=[(seq, eid, rec, proof(rec.seq)) for seq, eid, rec in left_states],
                    earlier=earlier_states,
                )
            body = rbody.build_body(
                receipt_id=receipt_id,
                issued_at=now_ts(),
                session=session,
                k=k,
                retrieval=RETRIEVAL,
                query=user_ev,
                query_proof=proof(user_ev.seq),
                memories=[(ev, proof(ev.seq)) for ev in memories],
                response=asst_ev,
                response_proof=proof(asst_ev.seq),
                provider=completion.provider,
                model=completion.model,
                fallback_reason=completion.fallback_reason,
                template=template,
                prompt_sha256=p_hash,
                checkpoint=checkpoint,
                receipt_format=self.receipt_format,
                exclusions=[(r.seq, r.event_id, ctl, proof(ctl.seq)) for r, ctl in excluded or ()],
                consent=part,
                states=states_member,
                semantic=semantic if self.receipt_format == rbody.RECEIPT_VERSION_2 else None,
                witnesses=cosigned,
                ranking=ranking if self.receipt_format == rbody.RECEIPT_VERSION_2 else None,
            )
        finally:
            store.close()
        if self.receipt_format == rbody.RECEIPT_VERSION:
            return rbody.sign_receipt(body, self.key), body
        disclosures = rbody.disclosures_for([user_ev, *memories, asst_ev])
        view = rbody.receipt_view(body, {d["seq"]: d for d in disclosures})
        return rbody.sign_receipt(body, self.key, disclosures), view

    def _witnessed(self, session: str, checkpoint: dict[str, Any], store: Any, size: int) -> list[tuple[str, str]]:
        """§22: each witness of the policy asked to cosign the turn's checkpoint as a C2SP note (storage.witness, one
        after another, each bounded by witness_timeout); (key name, base64 signature) of the cosignatures that verify.
        A witness that is down, slow or refuses is a warning in the log, and the receipt names only those that
        cosigned."""
        from receipts.note import b64, parse_note, sign_checkpoint_note
        from storage.witness import ask

        assert self.witnesses is not None
        note = parse_note(sign_checkpoint_note(checkpoint, self.key))
        out: list[tuple[str, str]] = []
        for w in self.witnesses.witnesses.values():
            known = (w.name, w.key_hash, session)
            got = ask(
                note, size, w, lambda m: store.consistency_proof(m, size),
                known_size=self._witnessed_sizes.get(known, 0), timeout=self.witness_timeout,
            )
            if got.ok:
                self._witnessed_sizes[known] = size
                out += [(c.name, b64(c.key_hash.to_bytes(4, "big") + c.sig)) for c in got.cosignatures]
            else:
                log.warning("session %s: witness %s did not cosign the checkpoint of %d events (%s)", session, w.label or w.name, size, got.problem)
        return out[: rbody.MAX_COSIGNATURES]

    def _record(self, session: str, receipt_id: str, path: Path, body: dict[str, Any]) -> None:
        try:
            self.rows.record_row(session, receipt_id, str(path), body)
        except Exception as exc:  # noqa: BLE001 - the row is derived; the file is the record
            log.warning("receipt %s: index row not written (%s); the receipt file is intact", receipt_id, exc)
