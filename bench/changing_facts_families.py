"""Changing facts by phrasing family (issue 32): does the live statement reach the model, however the change is said?

    python bench/changing_facts.py --families held-out [--sessions 60] [--seed 32] [--misses]
    python bench/changing_facts.py --families tune

Sessions are generated (seeded) from ATTRIBUTES in bench/changing_facts_data.py (18 attributes, each changed in
seven families of phrasing, with co-existing statements beside them). `--families held-out` uses only
HELD_OUT_FAMILIES (implied, third-person, negation-first, compound, coexist-b) — phrasings no rule was tuned on;
`tune` only TUNE_FAMILIES. The split is fixed in the data file. Compound first statements ("I live in Leeds and
I work as a nurse": one event, two facts) come with the compound family.

Every event goes through a real ledger and index (storage.files, as bench/changing_facts.py); the detector
(facts.rules.detect) runs on each user event against the lexical shortlist, as a chat turn does, and its
proposals are kept out of retrieval from then on. Probes are searched, never appended: "now" questions mid-session
and at the end, "before" questions at the end. Systems, in the same run, offline (no model):

- search    Index.search, nothing left out: the raw baseline;
- detector  today's turn: what the detector superseded left out, the newest statement's slot (chat.supersede);
- resolved  the detector, and the question resolves the rest (chat.supersede.resolved_for_now, facts.resolve):
            the slot's statements are those the claims reader reads as it and those found by its values (a later
            statement naming a value of the slot with a change sign, facts.slots); an earlier statement of the
            slot a question about now asks is left out or handed marked as earlier, the newest has a slot;
- oracle    the statements that are dead for the asked fact left out (a perfect resolver).

Figures, per system and K: live-fact recall (a statement of the current value among the K, not marked earlier),
dead served as live (a statement of an older value of the asked fact among the K, on a question about now, and not
in the resolver's `earlier`: a dead statement handed to the model marked as an earlier statement is not served as
live), history recall (a
statement of the previous value among the K on a "before" question: nothing is left out then). False
supersessions: the detector's proposals whose older statement is no older value of a fact the newer one states,
over its proposals; and the resolver's, each statement it left out of a question's K that states the asked
fact's current value or no older value of any fact, over all it left out.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from bench.changing_facts_data import (
    ACKS,
    ATTRIBUTES,
    CHANGE_FAMILIES,
    CHATTER,
    COEXIST_FAMILIES,
    HELD_OUT_FAMILIES,
    TUNE_FAMILIES,
    Attribute,
)
from bench.common import machine
from chat.supersede import SHORTLIST_K, newest_statement, resolved_for_now, with_newest
from facts.rules import detect, shortlist_query
from storage.files.ledger.store import Ledger
from storage.files.retrieval.db import Index

KS = (5, 8)
SYSTEMS = ("search", "detector", "resolved", "oracle")
SPLITS = {"tune": TUNE_FAMILIES, "held-out": HELD_OUT_FAMILIES}


@dataclass
class Turn:
    role: str
    text: str
    facts: list[tuple[int, str]] = field(default_factory=list)  # (fact, value) it states
    family: str = ""
    fact: int = -1  # a probe's fact
    probe: str | None = None


@dataclass
class Session:
    name: str
    facts: list[tuple[Attribute, list[str]]]
    turns: list[Turn] = field(default_factory=list)


def _article(v: str) -> str:
    return "an" if v[:1].lower() in "aeiou" and not v.startswith(("Uni", "One", "UX", "Eu")) else "a"


def _say(template: str, v: str, old: str = "", x: str = "") -> str:
    text = template.format(v=v, V=v[:1].upper() + v[1:], a=_article(v), old=old, x=x, a_x=_article(x))
    return text[:1].upper() + text[1:]


def make_session(rng: random.Random, n: int, families: tuple[str, ...]) -> Session:
    change_families = [f for f in families if f in CHANGE_FAMILIES]
    coexist_families = [f for f in families if f in COEXIST_FAMILIES]
    attrs = rng.sample(ATTRIBUTES, rng.randint(6, 8))
    session = Session(f"cff-{n:03d}", [])
    streams: list[list[Turn]] = []
    for f, a in enumerate(attrs):
        values = rng.sample(a.values, rng.randint(2, 4))
        session.facts.append((a, values))
        stream = [Turn("user", _say(rng.choice(a.first), values[0]), [(f, values[0])], "first")]
        for i in range(1, len(values)):
            family = rng.choice(change_families)
            template = rng.choice(a.changes[family])
            stream.append(Turn("user", _say(template, values[i], values[i - 1]), [(f, values[i])], family))
        streams.append(stream)
    if "compound" in families:  # first statements of two facts joined in one event
        order = list(range(len(attrs)))
        rng.shuffle(order)
        for f, g in zip(order[::2], order[1::2], strict=False):
            if rng.random() < 0.5:
                a, b = attrs[f], attrs[g]
                va, vb = session.facts[f][1][0], session.facts[g][1][0]
                text = _say(a.clause, va) + " and " + b.clause.format(v=vb, a=_article(vb)) + "."
                streams[f][0] = Turn("user", text, [(f, va), (g, vb)], "compound-first")
                streams[g].pop(0)
    used: set[tuple[str, str]] = set()  # a co-existing sentence said twice with two values would be a change
    while any(streams):
        stream = rng.choice([s for s in streams if s])
        turn = stream.pop(0)
        session.turns.append(turn)
        if rng.random() < 0.3:
            session.turns.append(Turn("assistant", rng.choice(ACKS)))
        if rng.random() < 0.6:
            f = rng.randrange(len(attrs))
            a, values = session.facts[f]
            x = rng.choice([v for v in a.values if v not in values])
            family = rng.choice(coexist_families)
            template = rng.choice(a.coexist[family])
            if (a.name, template) not in used:
                used.add((a.name, template))
                session.turns.append(Turn("user", _say(template, "", x=x), [], family))
        elif rng.random() < 0.5:
            session.turns.append(Turn("user", rng.choice(CHATTER)))
        if turn.facts and rng.random() < 0.3:
            stated = sorted({f for t in session.turns for f, _ in t.facts})
            f = rng.choice(stated)
            session.turns.append(Turn("user", rng.choice(session.facts[f][0].ask_now), fact=f, probe="now"))
    for f, (a, _) in enumerate(session.facts):
        session.turns.append(Turn("user", rng.choice(a.ask_now), fact=f, probe="now"))
        session.turns.append(Turn("user", rng.choice(a.ask_before), fact=f, probe="before"))
    return session


@dataclass
class Scores:
    live: dict[tuple[str, int], list[int]] = field(default_factory=lambda: defaultdict(list))
    dead: dict[tuple[str, int], list[int]] = field(default_factory=lambda: defaultdict(list))
    history: dict[tuple[str, int], list[int]] = field(default_factory=lambda: defaultdict(list))
    proposals: int = 0
    false: int = 0
    left_out: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    left_false: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    dead_by: Counter[str] = field(default_factory=Counter)  # (attribute, family of the dead's replacement)
    live_by: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)


@dataclass
class State:
    stated: dict[int, list[tuple[int, str]]] = field(default_factory=dict)
    texts: dict[int, str] = field(default_factory=dict)
    current: dict[int, str] = field(default_factory=dict)
    previous: dict[int, str] = field(default_factory=dict)
    superseded: set[int] = field(default_factory=set)
    family: dict[int, str] = field(default_factory=dict)  # fact -> family of its last change

    def seqs(self, fact: int, live: bool) -> set[int]:
        return {s for s, fs in self.stated.items() for f, v in fs if f == fact and (v == self.current[f]) == live}


def run_session(session: Session, index: Index, ledger: Ledger, scores: Scores) -> None:
    st = State()
    for turn in session.turns:
        if turn.probe is not None:
            if turn.fact in st.current:
                probe(session, turn, index, st, scores)
            continue
        ev = ledger.append(session.name, turn.role, turn.text)
        index.index_session(session.name, [ev])
        st.texts[ev.seq] = turn.text
        if turn.facts:
            st.stated[ev.seq] = list(turn.facts)
            for f, v in turn.facts:
                if f in st.current and st.current[f] != v:
                    st.previous[f] = st.current[f]
                    st.family[f] = turn.family
                st.current[f] = v
        if turn.role != "user" or (query := shortlist_query(turn.text)) is None:
            continue
        hits = index.search(session.name, query, k=SHORTLIST_K, exclude_seqs=[ev.seq]).results
        for p in detect(turn.text, [(h.seq, h.text) for h in hits if h.role == "user"], new_seq=ev.seq):
            scores.proposals += 1
            old = dict(st.stated.get(p.older_seq, []))
            new = dict(turn.facts)
            if not any(f in old and old[f] != v for f, v in new.items()):
                scores.false += 1
                scores.notes.append(f"false supersession: {st.texts[p.older_seq]!r} by {turn.text!r} ({p.rule})")
            st.superseded.add(p.older_seq)


def probe(session: Session, turn: Turn, index: Index, st: State, scores: Scores) -> None:
    fact = turn.fact
    live, dead = st.seqs(fact, True), st.seqs(fact, False)
    name = session.facts[fact][0].name
    for k in KS:
        if turn.probe == "before":
            if fact not in st.previous:
                continue
            before = {s for s, fs in st.stated.items() if (fact, st.previous[fact]) in fs}
            got = {h.seq for h in index.search(session.name, turn.text, k).results}
            for system in SYSTEMS:  # a question about the past: nothing is left out, in any system
                scores.history[(system, k)].append(int(bool(before & got)))
            continue
        for system in SYSTEMS:
            if system == "search":
                hits = list(index.search(session.name, turn.text, k).results)
            elif system == "oracle":
                exclude = sorted(dead - live)
                hits = list(index.search(session.name, turn.text, k, exclude_seqs=exclude).results)
                hits = with_newest(hits, newest_statement(index, session.name, turn.text, exclude), k)
            elif system == "detector":
                exclude = sorted(st.superseded)
                hits = list(index.search(session.name, turn.text, k, exclude_seqs=exclude).results)
                hits = with_newest(hits, newest_statement(index, session.name, turn.text, exclude), k)
            else:
                hits, left = resolved_for_now(index, session.name, turn.text, k, sorted(st.superseded))
                scores.left_out[k] += len(left)
                wrong = [s for s in left if s in live or not any(v != st.current[f] for f, v in st.stated.get(s, []))]
                scores.left_false[k] += len(wrong)
                if k == KS[0]:
                    scores.notes.extend(f"resolver left out {st.texts[s]!r} for {turn.text!r}" for s in wrong)
            got = {h.seq for h in hits}
            if system == "resolved":  # handed to the model marked as an earlier statement: not served as live
                got -= set(left)
            scores.live[(system, k)].append(int(bool(live & got)))
            scores.dead[(system, k)].append(int(bool(dead & got - live)))
            if system == "resolved" and k == KS[0]:
                if dead & got - live:
                    scores.dead_by[f"{name} / {st.family.get(fact, 'first')}"] += 1
                    scores.notes.extend(f"dead served [{name}] {turn.text!r}: {st.texts[s]!r}" for s in sorted(dead & got - live))
                if not live & got:
                    scores.live_by[f"{name} / {st.family.get(fact, 'first')}"] += 1
                    scores.notes.append(f"live missed [{name}] {turn.text!r}: {[st.texts[s] for s in sorted(live)]}")


def _mean(xs: list[int]) -> str:
    return f"{sum(xs) / len(xs):.3f}" if xs else "-"


def table(scores: Scores) -> str:
    lines = ["| system | K | live-fact recall | dead served as live | history recall |", "|---|---:|---:|---:|---:|"]
    for system in SYSTEMS:
        for k in KS:
            key = (system, k)
            lines.append(f"| {system} | {k} | {_mean(scores.live[key])} | {_mean(scores.dead[key])} | {_mean(scores.history[key])} |")
    return "\n".join(lines)


def run(split: str, sessions: int, seed: int, misses: bool) -> int:
    families = SPLITS[split]
    rng = random.Random(seed)
    made = [make_session(rng, n, families) for n in range(sessions)]
    changes = sum(len(v) - 1 for s in made for _, v in s.facts)
    by_family = Counter(t.family for s in made for t in s.turns if t.family)
    probes = Counter(t.probe for s in made for t in s.turns if t.probe)
    events = sum(1 for s in made for t in s.turns if t.probe is None)
    started = time.perf_counter()
    scores = Scores()
    with tempfile.TemporaryDirectory(prefix="changing-facts-families-") as tmp:
        ledger = Ledger(Path(tmp))
        index = Index(Path(tmp), ledger)
        for s in made:
            run_session(s, index, ledger, scores)
        index.close()
    elapsed = time.perf_counter() - started
    print(f"Changing facts by phrasing family (issue 32) — {machine()}")
    print(f"\n{split} families {', '.join(families)}; seed {seed}: {sessions} sessions, {events} events, "
          f"{len(ATTRIBUTES)} attributes, {changes} changes, {probes['now']} 'now' and {probes['before']} 'before' probes")
    print(f"statements by family: {dict(sorted(by_family.items()))}\n")
    print(table(scores))
    print("\n(resolved: a dead statement in the resolver's `earlier`, handed to the model marked as an earlier "
          "statement or left out, is not served as live)")
    rate = scores.false / scores.proposals if scores.proposals else 0.0
    print(f"\nfalse supersessions (detector): {scores.false} of {scores.proposals} proposals ({rate:.3f})")
    for k in KS:
        n, bad = scores.left_out[k], scores.left_false[k]
        print(f"false supersessions (resolver, K={k}): {bad} of {n} statements left out as earlier "
              f"({bad / n if n else 0.0:.3f})")
    print(f"\n_{elapsed:.1f}s_")
    if misses:
        print("\nresolved, K=5: dead served by attribute / family of the last change:", dict(scores.dead_by.most_common()))
        print("resolved, K=5: live missed by attribute / family:", dict(scores.live_by.most_common()))
        print("\n".join(scores.notes))
    return 0
