"""Facts change (issue 12), in the turn: the detector on each new user statement, and questions about the past.

`record_supersessions` runs under the session's turn lock right after a user event is appended (a turn's
question, `remember`, a consent turn's question): one lexical search for earlier statements of the same
attributes (control.supersede_rules.shortlist_query; none when the text states no fact the detector reads),
then the model when Groq is configured (control.supersede_model: it proposes, code decides), else — offline,
or when the model failed — the deterministic detector. One supersession record (docs/FORMAT.md §19) is
appended per proposal; the caller keeps its checkpoint after its appends, as it already does.

`asks_about_past` is the small pure rule that lets a question see superseded statements, marked
(docs/RETRIEVAL.md, "Questions about the past").
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from chat.llm import LLM
from chat.withheld import ModelView
from control.supersede_asked import answers, asked
from control.supersede_model import DEFAULT_TIMEOUT, Statement, propose_with_model
from control.supersede_rules import Proposal, detect, shortlist_query, topic_query
from control.supersession import SupersedeError, SupersedeResult, supersede_locked
from control.supersession_state import stored_reason
from ledger import Event
from retrieval.model import Hit

if TYPE_CHECKING:
    from storage.api import LedgerStore, SearchIndex

log = logging.getLogger("chat")
SHORTLIST_K = 50  # earlier statements searched for each new one (bench/changing_facts.py uses the same)
MODEL_TIMEOUT = DEFAULT_TIMEOUT

# Words that ask about what held before, not what holds now (docs/RETRIEVAL.md). Whole words, any case.
PAST_WORDS = (
    "before", "used to", "previously", "previous", "former", "formerly", "old", "originally", "original",
    "history", "change", "changed", "changes", "earlier", "past", "no longer", "anymore", "any more", "prior",
)
_PAST_RE = re.compile(
    r"\b(?:" + "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in PAST_WORDS) + r"|did\s+\w+\s+use\s+to)\b", re.IGNORECASE
)
# "How old am I?" asks an age, now: "old" after "how" is not a past word
_HOW_OLD_RE = re.compile(r"\bhow\s+old\b", re.IGNORECASE)


def asks_about_past(question: str) -> bool:
    """Whether a question asks what held before ("where did I live before?", "what was my old port?"): then
    retrieval may hand the model superseded statements, each marked as superseded, with when and by what."""
    return _PAST_RE.search(_HOW_OLD_RE.sub("how", question)) is not None


def newest_statement(index: SearchIndex, session: str, question: str, exclude: list[int]) -> Hit | None:
    """The newest user statement of an attribute `question` asks about, of the subject it asks about
    (control.supersede_asked), among what one search with the attributes' words finds (SHORTLIST_K, leaving out
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


def with_newest(hits: list[Hit], newest: Hit | None, k: int) -> list[Hit]:
    """`hits` (at most k, best first) with `newest` in the last place when it is not among them already:
    one slot of the K, after the question's own k-1 best (docs/RETRIEVAL.md)."""
    if newest is None or any(h.seq == newest.seq for h in hits):
        return hits
    kept = hits[: k - 1]
    return [*kept, replace(newest, rank=len(kept) + 1, newest=True)]


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
