"""Replay a receipt's retrieval, and search the memory as it stood (issue 34; docs/FORMAT.md §24).

A format-2 receipt with a `ranking` member commits to the search that chose its memories: the configuration, the
ledger sizes it saw (`indexed`: its index held the events below it; `controls`: the control state was the ledger's
first `controls` events'), the rules that fired and the ranked list with scores. `replay` rebuilds that search — an
index of the session's first `indexed` events (storage.asof), the control state folded from its first `controls`
events — re-runs the question through the turn's own retrieval (chat.retrieve) and compares, rank by rank.

Verdicts: "replayed" (exit 0: the same memories, order, matches and rules, scores within receipts.ranking's
tolerance), "differs" (exit 1: a row per difference), "not_replayable" (exit 3, with why: an old receipt without the
member, another configuration, a hybrid search, the question erased, an event the search saw erased since — the rest
is still compared and reported). Nothing later — turns, revokes, forgets, new facts — enters a replay: only events
below the sizes the receipt names are read.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import takewhile
from typing import TYPE_CHECKING, Any

from chat.offline import is_stand_in_reply
from chat.retrieve import Retrieved, ranking_config_of, retrieve
from chat.stand_ins import StandIns
from control.revocation import current as current_controls
from control.state import ControlState, Fold, derive
from ledger.event import is_erasure_record
from receipts.body import RECEIPT_VERSION_2, Receipt
from receipts.ranking import Difference, Ranked, check_ranking, committed, compare, config_hash, score_text
from storage.asof import PrefixUnavailable, prefix_index

if TYPE_CHECKING:
    from chat.citing import Cites
    from storage.api import SearchIndex, Stores

REPLAYED, DIFFERS, NOT_REPLAYABLE = "replayed", "differs", "not_replayable"
EXIT = {REPLAYED: 0, DIFFERS: 1, NOT_REPLAYABLE: 3}


class AsOfError(ValueError):
    """An --as-of size or session that cannot be searched: one line, nothing read beyond it."""


@dataclass(frozen=True)
class LeftOut:
    """An event that ranked in the search's top K without the rules, and is not in the list: why."""

    seq: int
    rank: int  # its rank in the search without the rules
    why: str


@dataclass(frozen=True)
class Replay:
    receipt_id: str
    session: str
    verdict: str
    reasons: list[str] = field(default_factory=list)  # why it is not replayable (or not exactly)
    differences: list[Difference] = field(default_factory=list)
    committed: list[Ranked] = field(default_factory=list)
    replayed: list[Ranked] = field(default_factory=list)
    left_out: list[LeftOut] = field(default_factory=list)
    cited: int = 0  # how many of the ranked list the receipt cites (the first ones)
    rules: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return EXIT[self.verdict]

    def headline(self) -> str:
        if self.verdict == REPLAYED:
            return (f"REPLAYED: the search as it stood gives the same {len(self.committed)} ranked memories, in the same order, "
                    "with the same scores")
        if self.verdict == DIFFERS:
            return f"DIFFERS: the search as it stood ranks otherwise ({len(self.differences)} difference(s))"
        return "NOT REPLAYABLE: " + "; ".join(self.reasons)

    def lines(self) -> list[str]:
        out = [self.headline()]
        if self.verdict == NOT_REPLAYABLE and not self.committed:
            return out
        out += [f"  {d.line()}" for d in self.differences]
        for i, r in enumerate(self.committed, start=1):
            mark = "cited" if i <= self.cited else "ranked, not cited (did not fit the receipt)"
            out.append(f"  #{i} seq {r.seq} score {score_text(r.score)} ({r.match}) — {mark}")
        for lo in self.left_out:
            out.append(f"  left out: seq {lo.seq} (rank {lo.rank} without the rules) — {lo.why}")
        return out

    def to_dict(self) -> dict[str, Any]:
        def ranked(rs: list[Ranked]) -> list[dict[str, Any]]:
            return [{"seq": r.seq, "score": score_text(r.score), "match": r.match} for r in rs]

        return {
            "receipt_id": self.receipt_id,
            "session": self.session,
            "verdict": self.verdict,
            "reasons": self.reasons,
            "differences": [{"rank": d.rank, "what": d.what, "committed": ranked([d.committed]) if d.committed else None,
                             "replayed": ranked([d.replayed]) if d.replayed else None} for d in self.differences],
            "committed": ranked(self.committed),
            "replayed": ranked(self.replayed),
            "cited": self.cited,
            "rules": list(self.rules),
            "left_out": [{"seq": lo.seq, "rank": lo.rank, "why": lo.why} for lo in self.left_out],
        }


def state_at(stores: Stores, session: str, size: int, now: int) -> ControlState:
    """The session's control state when its ledger held `size` events (revocations, restores, supersessions,
    erasures recorded below it): the current one when it holds exactly that many `now`."""
    if now == size:
        return current_controls(stores.ledger, session)
    return derive(takewhile(lambda ev: ev.seq < size, stores.ledger.events(session)))


@contextmanager
def index_at(stores: Stores, session: str, size: int, now: int) -> Iterator[SearchIndex]:
    """The index a search saw when the session's ledger held `size` events: the deployment's own when the ledger
    holds exactly that many `now` (caught up first: FORMAT.md §24, "Cost"), else one built of the first `size` events."""
    if now == size:
        stores.index.index_session(session)
        yield stores.index
        return
    with prefix_index(stores.ledger, session, size, stores.index.config) as idx:
        yield idx


def _over(cites: Cites, index: SearchIndex) -> Cites:
    """`cites` asking `index` which lines are not the person's own (Cites.unattributed, for chat.withheld): the
    prefix's index, so that the deployment's index — deleted, rebuilt and not yet caught up, or holding later lines
    — never changes what a replay withholds. The receipt_cites rows stay the deployment's (refilled from the receipt
    files when the index is new)."""
    view = copy.copy(cites)
    view.index = index
    return view


def search_as_of(stores: Stores, cites: Cites, session: str, query: str, k: int, size: int) -> Retrieved:
    """`retrieval search --as-of SIZE`: the top K a turn would have handed the model when the session's ledger held
    `size` events, under that time's control state (chat.retrieve)."""
    if not stores.ledger.exists(session):
        raise AsOfError(f"session {session}: no such session")
    now = stores.ledger.head(session)[0]
    if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= now:
        raise AsOfError(f"--as-of {size!r}: the session holds {now} events; expected a size from 0 to {now}")
    state = state_at(stores, session, size, now)
    try:
        with index_at(stores, session, size, now) as idx:
            return retrieve(idx, _over(cites, idx), state, session, query, k, [], stand_ins=StandIns(stores.ledger))
    except PrefixUnavailable as exc:
        raise AsOfError(str(exc)) from None


def _erased_since(stores: Stores, session: str, below: int, since: int, now: int) -> dict[int, int]:
    """seq (below `below`) -> the seq of the erasure record that erased it at or after `since`."""
    out: dict[int, int] = {}
    for ev in stores.ledger.system_events(session, since, now):
        if not is_erasure_record(ev):
            continue
        items = ev.meta["erasure"].get("erased")
        for item in items if isinstance(items, list) else []:
            seq = item.get("seq") if isinstance(item, dict) else None
            if type(seq) is int and seq < below:
                out.setdefault(seq, ev.seq)
    return out


def _state_at(stores: Stores, session: str, size: int, until: int | None = None) -> tuple[ControlState, list[int]]:
    """The control state of the session's first `size` events (control.state.derive), and, folding on up to `until`,
    the seqs of the events from `size` on that change it (a revoke, restore, supersession or erasure record)."""
    fold = Fold()
    changed: list[int] = []
    stop = size if until is None else max(size, until)
    for ev in takewhile(lambda ev: ev.seq < stop, stores.ledger.events(session)):
        if ev.seq < size:
            fold.apply(ev)
            continue
        st = fold.state
        before = (len(st.controls), len(st.supersessions.links), len(st.revoked))
        fold.apply(ev)
        if is_erasure_record(ev) or before != (len(st.controls), len(st.supersessions.links), len(st.revoked)):
            changed.append(ev.seq)
    return fold.state, changed


def _sizes_lie(stores: Stores, session: str, body: dict[str, Any], late: list[int]) -> list[str]:
    """Why the receipt's `indexed` and `controls` are not the sizes its turn's search saw (§24), else []: a search over
    another prefix can give a list that replays to itself while hiding what the turn's own search ranked. Offline
    (receipts.ranking.check_ranking): a turn's index held the events below its question, its control state lies
    after the question and at or before the answer; a proposal's are one size. Against the ledger: no control
    record lies between a turn's `controls` and its answer (the turn holds the session's lock, so every record
    before the answer is its question's: `late`, from _state_at), and a proposal's size is no event the ledger held
    before it was made."""
    row = check_ranking(body)
    if not row[1]:
        return [f"the ranking's sizes or list are not the turn's: {row[2]}"]
    rk, q_seq = body["ranking"], body["query"]["event"]["seq"]
    if "consent" not in body:
        return [f"the control record at seq {s} came before the answer, so the turn searched under it; the receipt's "
                f"control state ends at {rk['controls']}" for s in late]
    if rk["indexed"] < q_seq:
        (first_unseen,) = stores.ledger.read_events(session, [rk["indexed"]])
        at = body["consent"]["proposed_at"]
        if len(first_unseen.ts) == len(at) and first_unseen.ts < at:
            return [f"the proposal was made at {at}; seq {rk['indexed']} was written before it ({first_unseen.ts}), so the "
                    f"proposal's search saw it, and the receipt says it saw only {rk['indexed']} events"]
    return []


def _earlier_differs(body: dict[str, Any], got: Retrieved) -> list[str]:
    """The earlier statements a receipt lists (§20.1) against those the replayed resolution names among its memories:
    a verifier checks only that each mark names a statement handed with it; which statement is earlier is the
    resolution's to say, so a receipt marking a live memory earlier, or naming another newer one, differs here."""
    st = body.get("states", {})
    if "earlier" not in st:
        return []
    handed = {m["event"]["seq"] for m in body["memories"]}
    superseded = {e["seq"] for e in st["superseded"]}
    listed = {e["seq"]: e["newer"] for e in st["earlier"]}
    named = {s: n for s, n in got.earlier.items() if s in handed and s not in superseded}
    out = [f"the receipt lists seq {s} as an earlier statement replaced by seq {n}; the replay's resolution "
           + (f"names seq {named[s]}" if s in named else "does not name it earlier") for s, n in sorted(listed.items()) if named.get(s) != n]
    out += [f"the replay's resolution names cited seq {s} an earlier statement replaced by seq {n}; the receipt does not list it"
            for s, n in sorted(named.items()) if s not in listed]
    return out


def replay(stores: Stores, cites: Cites, receipt: Receipt) -> Replay:
    """Re-run the search a receipt's `ranking` commits to, over the session as it stood, and compare (the module).
    The caller has verified the receipt (its signature under a trusted key, its events against the ledger)."""
    body = receipt.signed_body
    rid, session = receipt.receipt_id, receipt.session

    def cannot(*why: str) -> Replay:
        return Replay(rid, session, NOT_REPLAYABLE, list(why))

    if receipt.format != RECEIPT_VERSION_2 or "ranking" not in body:
        return cannot(f"format {receipt.format} without a ranking commitment: it says which memories, not how they were ranked")
    rk = body["ranking"]
    want = committed(rk)
    cited = len(body["consent"]["proposed"]) if "consent" in body else len(body["memories"])
    mine = ranking_config_of(stores.index)
    if config_hash(mine) != rk["config_sha256"]:
        return cannot(f"ranked under configuration {rk['config']} sha256 {rk['config_sha256'][:16]}…; this deployment ranks under "
                      f"{mine['name']} sha256 {config_hash(mine)[:16]}…")
    if "semantic" in body:
        return cannot("a hybrid search (the semantic extra, §25): a replay re-runs the lexical search only")
    if not stores.ledger.exists(session):
        return cannot(f"session {session}: not in this data directory")
    now = stores.ledger.head(session)[0]
    indexed, controls = rk["indexed"], rk["controls"]
    if now < controls:
        return cannot(f"the ledger holds {now} events; the search saw {controls}")
    q_seq = body["query"]["event"]["seq"]
    if q_seq >= now:
        return cannot(f"the ledger holds {now} events; the question is seq {q_seq} (verify the receipt with --data)")
    (question,) = stores.ledger.read_events(session, [q_seq])
    if question.erased:
        return cannot(f"the question (seq {q_seq}) was erased: its text is gone")
    if question.digest != body["query"]["event"]["digest"]:
        return cannot(f"the ledger's event at seq {q_seq} is not the receipt's question (verify the receipt with --data)")
    state, late = _state_at(stores, session, controls, None if "consent" in body else body["response"]["event"]["seq"])
    lies = _sizes_lie(stores, session, body, late)  # rows after the rank-by-rank comparison, which runs still
    if rk["config"] != mine["name"]:  # the hash (checked above) is of a configuration named otherwise
        lies.append(f"the receipt names the configuration {rk['config']!r}, but its config_sha256 is that of {mine['name']!r}")
    reasons = [f"seq {s} was erased by the record at seq {by}, after this turn: its text is gone, so the search cannot be rebuilt "
               "as it was; the rest is compared" for s, by in sorted(_erased_since(stores, session, indexed, controls, now).items())]
    # the offline stand-in's replies are left out of a turn's search (issue 31), unless the committed list holds one:
    # its turn ranked before that rule, and is replayed as it ran
    before_rule = any(is_stand_in_reply(ev.role, ev.meta) for ev in stores.ledger.read_events(session, [r.seq for r in want]))
    try:
        with prefix_index(stores.ledger, session, indexed, stores.index.config) as idx:
            got = retrieve(
                idx, _over(cites, idx), state, session, question.text, body["k"], [],
                stand_ins=None if before_rule else StandIns(stores.ledger),
                echoes_take_slots=any(r.match == "echo" for r in want),  # its turn ranked before echoes took no slot
                # earlier statements were handed over, marked (§20 states v2); a receipt without them ranked as before
                mark_earlier="earlier" in body.get("states", {}),
            )
    except PrefixUnavailable as exc:
        return cannot(str(exc))
    diffs = compare(want, got.ranked())
    if list(got.rules) != list(rk["rules"]):
        diffs.append(Difference(0, None, None, f"the rules that fired: the receipt names {rk['rules'] or 'none'}, the replay {list(got.rules) or 'none'}"))
    diffs += [Difference(0, None, None, x) for x in lies]
    diffs += [Difference(0, None, None, x) for x in _earlier_differs(body, got)]
    left = [LeftOut(s, rank, why) for s, (rank, why) in got.why_out.items()]
    verdict = DIFFERS if lies else NOT_REPLAYABLE if reasons else DIFFERS if diffs else REPLAYED
    return Replay(rid, session, verdict, reasons, diffs, want, got.ranked(), left, cited, tuple(rk["rules"]))


__all__ = ["AsOfError", "LeftOut", "Replay", "index_at", "replay", "search_as_of", "state_at"]
