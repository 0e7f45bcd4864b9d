"""Facts change (issue 12), in the turn: the detector on each new user statement, and questions about the past.

`record_supersessions` runs under the session's turn lock right after a user event is appended (a turn's
question, `remember`, a consent turn's question): one lexical search for earlier statements of the same
attributes (facts.rules.shortlist_query; none when the text states no fact the detector reads),
then the model when Groq is configured (facts.model, asked through `propose_with_model`: it proposes, code decides), else — offline,
or when the model failed — the deterministic detector. One supersession record (docs/FORMAT.md §19) is
appended per proposal; the caller keeps its checkpoint after its appends, as it already does.

Questions about the past (`facts.asks_about_past`) may see superseded statements, marked; a question about what
holds now gets the newest statement of what it asks about (`newest_statement`, `with_newest`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import groq
import httpx

from chat.llm import LLM, NO_KEY_REASON, BadAnswer, NoKey, log_reason
from chat.withheld import ModelView
from control.supersession import SupersedeError, SupersedeResult, supersede_locked
from control.supersession_state import stored_reason
from facts import (
    MAX_PROPOSALS,
    Ask,
    AskFailed,
    EventLike,
    ModelVerdict,
    Proposal,
    Statement,
    answers,
    asked,
    detect,
    propose,
    shortlist_query,
    topic_query,
)
from facts.model import (
    AUTH,
    BAD_REPLY,
    BAD_RESPONSE,
    CONNECTION,
    HTTP_STATUS,
    NO_KEY,
    RATE_LIMIT,
    TIMEOUT,
    UNEXPECTED,
)
from facts.resolve import resolve, values_asked
from facts.slots import value_query
from ledger import Event
from retrieval.model import MAX_K, Hit

if TYPE_CHECKING:
    from storage.api import LedgerStore, SearchIndex
    pass

log = logging.getLogger("chat")
SHORTLIST_K = 50  # earlier statements searched for each new one (bench/changing_facts.py uses the same)
DEFAULT_TIMEOUT = 5.0  # seconds: a turn waits for this, and the detector is always there to fall back on
MODEL_TIMEOUT = DEFAULT_TIMEOUT

def newest_statement(index: SearchIndex, session: str, question: str, exclude: list[int]) -> Hit | None:
    """The newest user statement of an attribute `question` asks about, of the subject it asks about
    (facts.asked), among what one search with the attributes' words finds (SHORTLIST_K, leaving out
    `exclude`: what the turn leaves out anyway); None when the question asks about no tracked attribute of the
    speaker or theirs, or nothing states one. Newest, not best-ranked: when a fact changed, the newest
    statement of it is the one that holds (a superseded one is in `exclude`)."""
    q = asked(question)
    query = topic_query(question) if q is not None else None
    if q is None or query is None:
        return None
    hits = index.search(session, query, SHORTLIST_K, exclude_seqs=exclude).results
    found = [h for h in hits if h.role == "user" and answers(q, h.text)]
    return max(found, key=lambda h: h.seq, default=None)


VALUE_ROUNDS = 2  # searches with the asked slot's values: the values read, then those the statements moving on name
RESOLVE_DEPTH = 8  # hits below the K the question's own ranking lends, to take the place of earlier statements


def candidates(
    index: SearchIndex, session: str, question: str, k: int, exclude: list[int]
) -> tuple[list[Hit], dict[int, Hit]] | None:
    """What resolution reads for a question about now: the question's own best k + RESOLVE_DEPTH (the pool), and the
    user statements among them, those one search with its attributes' words finds and those up to VALUE_ROUNDS
    searches with the asked slot's values find (facts.slots), by seq. None: the question asks about no tracked
    attribute of the speaker or theirs."""
    q = asked(question)
    query = topic_query(question) if q is not None else None
    if q is None or query is None:
        return None
    pool = list(index.search(session, question, min(MAX_K, k + RESOLVE_DEPTH), exclude_seqs=exclude).results)
    topic = [h for h in index.search(session, query, SHORTLIST_K, exclude_seqs=exclude).results if h.role == "user"]
    statements = {h.seq: h for h in [*pool, *topic] if h.role == "user"}
    searched: set[str] = set()
    for _ in range(VALUE_ROUNDS):  # the slot's statements found by its values, not the question's words (facts.slots)
        values = values_asked(question, [(s, h.text) for s, h in statements.items()]) - searched
        if (by_value := value_query(values)) is None:
            break
        searched |= values
        found = index.search(session, by_value, SHORTLIST_K, exclude_seqs=exclude).results
        statements.update((h.seq, h) for h in found if h.role == "user" and h.seq not in statements)
    return pool, statements


def resolved_for_now(
    index: SearchIndex, session: str, question: str, k: int, exclude: list[int], hits: list[Hit] | None = None
) -> tuple[list[Hit], dict[int, int]]:
    """The K a question about now is handed, resolved by the question (facts.resolve, issue 32): among the
    question's own best k + RESOLVE_DEPTH, the statements one search with its attributes' words finds and those
    up to VALUE_ROUNDS searches with the asked slot's values find (facts.slots: "Leeds is behind us now"), a
    statement a newer one replaces for the slot it asks about is left out (the next hit takes its place), and
    the newest statement of that slot has the last slot when it is not among the K already (`with_newest`).
    Returns the K and what was left out as earlier (seq -> the newer statement's seq). A question that asks
    about no tracked attribute of the speaker or theirs gets exactly the search's K (`hits`, when the caller
    has searched already)."""
    gathered = candidates(index, session, question, k, exclude)
    if gathered is None:
        return (list(hits) if hits is not None else list(index.search(session, question, k, exclude_seqs=exclude).results)), {}
    pool, statements = gathered
    got = resolve(question, [(s, h.text) for s, h in statements.items()])
    kept = [replace(h, rank=i) for i, h in enumerate((h for h in pool if h.seq not in got.earlier), start=1)][:k]
    newest = max(got.current, default=None)
    left = {s: n for s, n in got.earlier.items() if s in {h.seq for h in pool[:k]}}
    return with_newest(kept, statements[newest] if newest is not None else None, k), left


def with_earlier(question: str, kept: list[Hit], earlier: list[Hit], k: int) -> tuple[list[Hit], dict[int, int]]:
    """The K of a question about now (`kept`, from resolved_for_now) with the earlier statements it left out
    (`earlier`: among the search's own top k) handed back, each right after the statement that replaces it, to be
    marked as earlier (FORMAT.md §20, states v2). Returns the K and seq -> the newer statement's seq, for each
    earlier statement in it.

    Which statement replaces which is resolved again over what the K holds (facts.resolve), so the newer
    statement a mark names is always among the memories: one that is not earlier among them is not handed back.
    Slots: an earlier statement takes back the slot the search gave it, from the lowest-ranked hit that took its
    place (never the newest statement, nor one that replaces a statement handed back); when none is left, the
    lowest-ranked earlier statement stays out. The list never holds more than k."""
    if not earlier:
        return kept, {}
    pool = {h.seq: h for h in [*kept, *earlier]}
    got = resolve(question, [(h.seq, h.text) for h in pool.values() if h.role == "user"])
    base = list(kept)
    # only those whose newer statement is in the K, or is itself handed back after one that is: any other could be
    # placed after nothing, and must not take a slot (a hit dropped for it would be lost, the K short of k)
    back = _placeable(sorted((h for h in earlier if h.seq in got.earlier), key=lambda h: h.rank), base, got.earlier)
    if not back:
        return kept, {}
    while len(base) + len(back) > k:
        targets = {got.earlier[h.seq] for h in back}
        drop = next((i for i in range(len(base) - 1, -1, -1) if base[i].seq not in targets and not base[i].newest), None)
        if drop is None:  # the lowest-ranked one no other hangs under stays out: it leaves none unplaceable
            back.pop(max(i for i, h in enumerate(back) if h.seq not in targets))
        else:
            base.pop(drop)
    under: dict[int, list[Hit]] = {}
    for h in back:
        under.setdefault(got.earlier[h.seq], []).append(h)
    out: list[Hit] = []

    def place(h: Hit) -> None:
        out.append(h)
        for child in under.pop(h.seq, []):
            place(child)

    for h in base:
        place(h)
    placed = {h.seq for h in out}
    marks = {h.seq: got.earlier[h.seq] for h in out if h.seq in got.earlier and got.earlier[h.seq] in placed}
    out = [h for h in out if h.seq not in got.earlier or h.seq in marks or h.seq in {x.seq for x in kept}]
    return [replace(h, rank=i) for i, h in enumerate(out, start=1)], marks


def _placeable(back: list[Hit], base: list[Hit], newer: dict[int, int]) -> list[Hit]:
    """Those of `back` (best first) whose chain of newer statements reaches a hit of `base`."""
    reached, out, grew = {h.seq for h in base}, set(), True
    while grew:
        grew = False
        for h in back:
            if h.seq not in out and newer[h.seq] in reached:
                reached.add(h.seq)
                out.add(h.seq)
                grew = True
    return [h for h in back if h.seq in out]


def earlier_among(question: str, hits: list[Hit]) -> dict[int, int]:
    """For a question about the past, which of `hits` are earlier statements of what it asks about, each -> the
    newer statement among `hits` that replaced it (facts.resolve over the list itself): they stay where the search
    ranked them, marked."""
    got = resolve(question, [(h.seq, h.text) for h in hits if h.role == "user"])
    return dict(sorted(got.earlier.items()))


def with_newest(hits: list[Hit], newest: Hit | None, k: int) -> list[Hit]:
    """`hits` (at most k, best first) with `newest` in the last place when it is not among them already:
    one slot of the K, after the question's own k-1 best (docs/RETRIEVAL.md)."""
    if newest is None or any(h.seq == newest.seq for h in hits):
        return hits
    kept = hits[: k - 1]
    return [*kept, replace(newest, rank=len(kept) + 1, newest=True)]


# ---------------------------------------------------------------- the model, asked through facts.model.propose


def failure_class(exc: BaseException) -> str:
    """Which of facts.model.FAILURES an exception from LLM.ask is. Order matters: APITimeoutError is an
    APIConnectionError."""
    if isinstance(exc, NoKey):
        return NO_KEY
    if isinstance(exc, groq.APIStatusError):
        if exc.status_code in (401, 403):
            return AUTH
        return RATE_LIMIT if exc.status_code == 429 else HTTP_STATUS
    if isinstance(exc, groq.APITimeoutError | httpx.TimeoutException):
        return TIMEOUT
    if isinstance(exc, groq.APIConnectionError | httpx.HTTPError):
        return CONNECTION
    if isinstance(exc, BadAnswer | ValueError):  # json.JSONDecodeError from a garbled body is a ValueError
        return BAD_RESPONSE
    return UNEXPECTED


def model_ask(llm: LLM, timeout: float) -> Ask:
    """The `ask` facts.model.propose calls: one non-streamed request through `llm` (its key, base URL and model),
    bounded by `timeout` seconds and not retried. Every failure is logged by class and raised as AskFailed, whose
    detail is never the server's or the model's words."""

    def ask(messages: list[dict[str, str]]) -> tuple[str, str]:
        try:
            text, served = llm.ask(messages, timeout=timeout)
        except Exception as exc:  # broad for the reasons chat.llm gives: groq 1.7 does not wrap every failure
            failure = failure_class(exc)
            detail = llm.redact(log_reason(exc, timeout=timeout))
            log.warning("supersession model failed (%s); the detector alone decides: %s", failure, detail)
            raise AskFailed(failure, detail) from None
        return text, served or llm.model

    return ask


def propose_with_model(
    llm: LLM,
    new: EventLike,
    shortlist: Sequence[EventLike],
    *,
    timeout: float = DEFAULT_TIMEOUT,
    max_proposals: int = MAX_PROPOSALS,
) -> ModelVerdict:
    """facts.model.propose with `llm` as the model: no key, no request (failure NO_KEY); any provider failure
    comes back as a verdict with decided_by None, never as an exception. A bad `timeout` is the caller's error."""
    if not timeout > 0:  # also rejects NaN
        raise ValueError(f"supersede_model: timeout {timeout!r} must be a positive number of seconds")
    ask = model_ask(llm, timeout) if llm.configured else None
    verdict = propose(ask, new, shortlist, max_proposals=max_proposals, no_model=NO_KEY_REASON)
    if verdict.failure == BAD_REPLY:
        log.warning("supersession model: %s; the detector alone decides", verdict.detail)
    elif verdict.decided_by is not None:
        log.info("supersession model %s at seq %d: %s", verdict.decided_by, new.seq, verdict.detail)
        for refusal in verdict.refused:
            log.debug("supersession model refused %s", refusal)
    return verdict


def _shortlist(ledger: LedgerStore, index: SearchIndex, ev: Event, view: ModelView) -> list[Statement]:
    """Earlier user statements of the attributes `ev` states, as the ledger holds them: never one the visitor
    withheld (chat.withheld: revoked, or an answer that may quote one) nor an erased one — a withheld statement is
    out of play, so nothing decides it is superseded and no model is shown it."""
    query = shortlist_query(ev.text)
    if query is None:
        return []
    hits = index.search(ev.session, query, SHORTLIST_K, exclude_seqs=[ev.seq, *view.withheld]).results
    seqs = [h.seq for h in hits if h.role == "user" and h.seq < ev.seq and h.seq not in view.withheld]
    events = ledger.read_events(ev.session, seqs) if seqs else []
    return [Statement(e.id, e.seq, e.session, e.text) for e in events if not e.erased and e.role == "user"]


def decide(llm: LLM, ev: Event, shortlist: list[Statement], view: ModelView) -> Decision:
    """The model's accepted proposals when it gave a verdict (and what it proposed that the rules did not confirm:
    `suggested`), else the detector's (decided_by None: each proposal's own rule decided). The model is asked only
    when the view lets a model see earlier statements at all (not with ask me first on: the local rules decide, and
    send nothing)."""
    if not shortlist:
        return Decision([], None, None)
    if llm.configured and view.proposer_may_run:
        shown = [s for s in shortlist if view.may_see(s.seq)]  # the rule, applied again where the texts leave
        verdict = propose_with_model(llm, ev, shown, timeout=MODEL_TIMEOUT)
        if verdict.decided_by is not None:
            return Decision(list(verdict.accepted), verdict.decided_by, verdict.checked_by, list(verdict.suggested))
    return Decision(detect(ev.text, [(s.seq, s.text) for s in shortlist], new_seq=ev.seq), None, None)


@dataclass(frozen=True, slots=True)
class Decision:
    proposals: list[Proposal]
    decided_by: str | None
    checked_by: str | None
    suggested: list[Proposal] = field(default_factory=list)  # the model's, not confirmed by the rules: for a person


Keep = Callable[[str, list[tuple[int, str, int, str]], str], None]  # (session, [(new, new_id, older, older_id)], by)


def record_supersessions(
    ledger: LedgerStore, index: SearchIndex, llm: LLM, ev: Event, view: ModelView, keep: Keep | None = None
) -> list[SupersedeResult]:
    """Append the supersession records the new user event `ev` makes (the caller holds the turn lock and keeps
    the checkpoint; `view` is chat.withheld's rule for the session, read under that lock). What the model proposed
    and the rules did not confirm goes to `keep` (control.suggestions), never to the ledger. Best effort: a failure
    is logged by class (never text) and the turn goes on — a missed change can be corrected by hand (Correct
    this), and a turn must not fail for want of one."""
    if ev.role != "user":
        return []
    done: list[SupersedeResult] = []
    try:
        shortlist = _shortlist(ledger, index, ev, view)
        decision = decide(llm, ev, shortlist, view)
        proposals, decided_by, checked_by = decision.proposals, decision.decided_by, decision.checked_by
        texts = {s.seq: s.text for s in shortlist}
        ids = {s.seq: s.id for s in shortlist}
        if decision.suggested and keep is not None and decided_by is not None:
            keep(ev.session, [(ev.seq, ev.id, p.older_seq, ids[p.older_seq]) for p in decision.suggested if p.older_seq in ids], decided_by)
        seen: set[int] = set()
        for p in proposals:
            if p.older_seq in seen or p.older_seq not in texts:
                continue
            seen.add(p.older_seq)
            reason = stored_reason(p.attribute, texts[p.older_seq], ev.text) if p.attribute else None
            try:
                done.append(
                    supersede_locked(
                        ledger, ev.session, ev.seq, p.older_seq, reason=reason,
                        decided_by=decided_by or p.rule, checked_by=checked_by if decided_by else None,
                    )
                )
            except SupersedeError as exc:  # e.g. the pair is already linked; names seqs only
                log.info("session %s: supersession of seq %d not recorded: %s", ev.session, p.older_seq, exc)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        log.error("session %s: the supersession detector failed for seq %d (%s)", ev.session, ev.seq, type(exc).__name__)
    return done
