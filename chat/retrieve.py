"""A turn's retrieval: the top K for a question under a session's control state, and the rules that shaped it.

One function, `retrieve`, used by the live turn (chat.engine, over the deployment's index and the state now) and by a
replay (chat.replay, over an index of the ledger's prefix and the state as it stood then; docs/FORMAT.md §24): the
same code over the same inputs gives the same list, which is what lets a receipt's ranking be re-run.

Left out of the K: the question itself (`also`), each revoked event and each answer that may quote one (chat.withheld),
each superseded statement unless the question asks about the past (facts.asks_about_past), and each answer that cited
a superseded statement (chat.citing). A question about now is then resolved by the question (chat.supersede).

With `mark_earlier` (a format-2 turn, and the replay of a receipt that lists earlier statements: FORMAT.md §20,
states v2) the earlier statements that resolution left out are handed back, each after the statement replacing it,
and a question about the past has the earlier statements among its K named: `Retrieved.earlier`, for the prompt's
marks and the receipt. Without it a turn ranks exactly as before (a receipt signed before, a format-1 turn, a
consent turn's proposal).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from chat.supersede import earlier_among, newest_statement, resolved_for_now, with_earlier, with_newest
from chat.withheld import withheld
from control.state import ControlState, Revocation
from control.supersession_state import Supersession
from facts.asked import asks_about_past
from receipts.ranking import Ranked
from retrieval.config import ranking_config
from retrieval.model import Hit
from retrieval.sql import TOKENIZER

RETRIEVAL = "fts5-bm25+collapse/v1"  # the method's name: every receipt's `retrieval`, and its ranking config's `method`


def ranking_config_of(index: SearchIndex) -> dict[str, object]:
    """The configuration `index` ranks with, as a receipt's `ranking` commits to its hash (docs/FORMAT.md §24)."""
    return ranking_config(index.config, method=RETRIEVAL, tokenizer=TOKENIZER)


ECHO = "an echo: it repeats what the session held (an earlier question, a reply with nothing new), so it takes no slot"
RESOLVED = "an earlier statement of what the question asks about, or its place given to the newest one (resolved for now)"

if TYPE_CHECKING:
    from chat.citing import Cites
    from chat.stand_ins import StandIns
    from storage.api import SearchIndex


@dataclass(frozen=True)
class Retrieved:
    """What retrieval chose for a turn, and why it left events out."""

    hits: list[Hit]
    excluded: list[Revocation]  # the revocations that kept an event out of the top K (FORMAT.md §17)
    left_out: list[Supersession]  # the supersessions that kept an event out of the top K (FORMAT.md §20)
    mode: str = "lexical"  # how the search that chose them ran: "hybrid" with the semantic extra (FORMAT.md §25)
    rules: tuple[str, ...] = field(default=())  # the rules that left an event out of the K or gave one a place (§24)
    # seq -> (its rank in the search without the rules, why it is not in `hits`), for each event that search ranked
    # in its top K and the rules left out
    why_out: dict[int, tuple[int, str]] = field(default_factory=dict)
    # seq -> the newer statement's seq (also in `hits`), for each earlier statement in `hits` (with mark_earlier)
    earlier: dict[int, int] = field(default_factory=dict)

    def ranked(self) -> list[Ranked]:
        """The list as a receipt commits it (§24): seq, the score the ranking used, how it matched."""
        return [Ranked(h.seq, h.score, h.match) for h in self.hits]


def retrieve(
    index: SearchIndex, cites: Cites, state: ControlState, session: str, message: str, k: int, also: Sequence[int],
    *, stand_ins: StandIns | None = None, echoes_take_slots: bool = False, mark_earlier: bool = False,
) -> Retrieved:
    """`_retrieve`, and with `stand_ins` never one of the offline stand-in's replies (chat.stand_ins, issue 31): they
    are left out of every search here before its limit, as if they had no index row (like a control record), so they
    are in neither the list nor what the rules left out. A turn always passes them; a replay does unless the receipt's
    list holds one (its turn came before the rule: chat.replay). Echoes take no slot (`_without_echoes`) unless
    `echoes_take_slots` (a replay of a receipt whose list holds one: its turn came before that rule)."""
    if stand_ins is None:
        got = _retrieve(index, cites, state, session, message, k, also, mark_earlier)
    else:
        got = stand_ins.left_out(
            session, lambda skip: _retrieve(index, cites, state, session, message, k, [*also, *skip], mark_earlier), lambda got: got.hits
        )
    return got if echoes_take_slots else _without_echoes(got)


def _without_echoes(got: Retrieved) -> Retrieved:
    """K is a ceiling, not a quota (issue 31): an echo — an earlier question with no new words, a reply that only
    repeats what the session held (retrieval.scoring.is_echo) — takes no slot. Echoes rank below every other hit, so
    none takes another's place: the list is shorter. The rule `echo` fires when one is left out (FORMAT.md §24)."""
    gone = {h.seq: i for i, h in enumerate(got.hits, start=1) if h.echo}
    if not gone:
        return got
    hits = [replace(h, rank=i) for i, h in enumerate((h for h in got.hits if not h.echo), start=1)]
    kept = {h.seq for h in hits}
    earlier = {s: n for s, n in got.earlier.items() if s in kept and n in kept}
    why = dict(got.why_out)
    for s, i in gone.items():
        why[s] = (i, ECHO)
    return replace(got, hits=hits, rules=tuple(sorted({*got.rules, "echo"})), why_out=why, earlier=earlier)


def _retrieve(
    index: SearchIndex, cites: Cites, state: ControlState, session: str, message: str, k: int, also: Sequence[int], mark_earlier: bool = False
) -> Retrieved:
    """The top K of `message` in `session`'s index under `state`, and the revocations and supersessions that kept an
    event out of it.

    Superseded events are left out like revoked ones, unless the question asks about the past: then they may rank,
    and the prompt marks each (FORMAT.md §20). Every answer that cited a superseded event (or such an answer) is left
    out always, past question or not: it may repeat the dead fact with no mark. The revocations returned are those in
    force for what the same search without them would have returned in its top K — a revoked event, or an answer that
    may quote it (then the revocation of the event it may quote) — once each, by revoked seq."""
    superseded = state.supersessions.superseded
    past = asks_about_past(message)
    dead = {} if past else superseded
    rules: set[str] = {"past-question"} if past and superseded else set()
    if not state.revoked and not superseded:
        first = index.search(session, message, k, exclude_seqs=also)
        hits, earlier = _with_newest(index, session, message, k, list(first.results), list(also), past, rules, mark_earlier)
        kept = {h.seq for h in hits}
        gone = {h.seq: (i, RESOLVED) for i, h in enumerate(first.results, start=1) if h.seq not in kept}
        return Retrieved(hits, [], [], first.mode, tuple(sorted(rules)), gone, earlier)
    why = withheld(cites, session, state)  # the one rule every model call takes its texts through
    echoes = cites.quoting(session, superseded)  # answers that may repeat a dead fact, unmarked (chat.citing)
    left = [*also, *why, *dead, *echoes]
    resp = index.search(session, message, k, exclude_seqs=left)
    # a superseded statement is marked by its record (§20), never also as earlier
    hits, earlier = _with_newest(index, session, message, k, list(resp.results), left, past, rules, mark_earlier, superseded)
    unrestricted = index.search(session, message, k, exclude_seqs=also)
    top = [h.seq for h in unrestricted.results]
    for s in top:
        if s in why:
            rules.add("revoked" if s in state.revoked else "quotes-revoked")
        elif s in dead:
            rules.add("superseded")
        elif s in echoes:
            rules.add("quotes-superseded")
    excluded = {why[s].seq: why[s] for s in top if s in why}
    left_out = {s: dead[s] for s in top if s in dead}
    kept = {h.seq for h in hits}
    out: dict[int, tuple[int, str]] = {}
    for i, s in enumerate(top, start=1):
        if s in kept:
            continue
        if s in why:
            r = why[s]
            out[s] = (i, f"revoked (control record at seq {r.control_seq})" if s in state.revoked else f"may quote revoked seq {r.seq}")
        elif s in dead:
            out[s] = (i, f"superseded by seq {dead[s].new_seq}")
        elif s in echoes:
            out[s] = (i, f"may quote superseded seq {echoes[s].old_seq}")
        else:
            out[s] = (i, RESOLVED)
    return Retrieved(
        hits, [excluded[s] for s in sorted(excluded)], [left_out[s] for s in sorted(left_out)], resp.mode, tuple(sorted(rules)), out, earlier
    )


def _with_newest(
    index: SearchIndex, session: str, message: str, k: int, hits: list[Hit], left: list[int], past: bool, rules: set[str], mark_earlier: bool,
    superseded: Collection[int] = (),
) -> tuple[list[Hit], dict[int, int]]:
    """A question about now, resolved by the question (chat.supersede.resolved_for_now): an earlier statement of
    the slot it asks about gives its place to the next hit, and the newest has the last of the K slots; with
    `mark_earlier` the earlier statements are handed back after the statement replacing each (chat.supersede.
    with_earlier). A question about the past gets the search's K as it is; with `mark_earlier` the newest statement
    of what it asks about takes the last slot when that makes an earlier statement among the K one it replaces, and
    the earlier statements are named (chat.supersede.earlier_among). Returns the K and seq -> newer seq for each
    earlier statement, never one of `superseded` (its record marks it)."""
    if past:
        if not mark_earlier:
            return hits, {}
        with_it = with_newest(hits, newest_statement(index, session, message, left), k)
        named = {s: n for s, n in earlier_among(message, with_it).items() if s not in superseded}
        if not named:
            return hits, {}
        if [h.seq for h in with_it] != [h.seq for h in hits]:
            rules.add("resolved-for-now")
        return with_it, named
    got, left_out = resolved_for_now(index, session, message, k, left, hits)
    earlier: dict[int, int] = {}
    if mark_earlier:
        got, earlier = with_earlier(message, got, [h for h in hits if h.seq in left_out and h.seq not in superseded], k)
    if [h.seq for h in got] != [h.seq for h in hits]:
        rules.add("resolved-for-now")
    return got, earlier


__all__ = ["RETRIEVAL", "Retrieved", "ranking_config_of", "retrieve"]
