"""Changing facts (issue 12): is the live statement handed to the model, and a superseded one kept out?

    python bench/changing_facts.py [--sessions 40] [--seed 12] [--held-out] [--misses]
    python bench/changing_facts.py --families held-out|tune [--sessions 60] [--seed 32] [--misses]

`--families` runs issue 32's evaluation instead (bench/changing_facts_families.py): 18 attributes changed in
phrasing families, reported on the held-out families only; the rest of this docstring is issue 12's.

Generated, seeded sessions (templates: bench/changing_facts_data.py): each states 6-8 facts of different
kinds (39 kinds), each changed 1-4 times in paraphrase, between chatter, questions, acknowledgements and
facts that legitimately co-exist (two pets, friends in other cities, "I also…", hypotheticals). Every event
goes through a real ledger.Ledger and retrieval.Index in a temp dir. On each user event the detector
(facts.rules.detect) runs against the earlier user events a lexical shortlist finds
(Index.search with shortlist_query, K=50); the events it supersedes are left out of retrieval
(exclude_seqs) from then on.

Probes (searched, never appended): "now" questions about a fact's current value, mid-session and at the
end; "before" questions about its previous value at the end. Each is searched three ways: as written; as
written with the last of the K slots given to the newest statement of the attribute it asks about
(chat.supersede.newest_statement / with_newest — what a turn hands the model, "now" questions only); and
with the topic words of the attributes it mentions (topic_query: "How old am I?" shares no word with "I
turned 43"), which the engine does not use (it costs LoCoMo recall; bench/HISTORY.md).
Systems, all in the same run:

- raw       the same Index.search, no supersession (today's behaviour);
- detector  superseded events excluded; for "before" questions nothing is excluded and superseded hits
            are marked (what the issue asks the prompt to do);
- oracle    the true superseded statements excluded / marked (what a perfect detector would give).

Figures: live-fact recall (a statement of the current value among the K), dead-fact served (a statement
of an older value of the asked fact among the K, unmarked), history recall (a statement of the previous
value among the K on "before" questions), false supersessions (proposals whose older statement is not an
earlier value of the same fact, over all proposals). `--held-out` swaps in change phrasings and
distractors written after the tuning and never tuned on.
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.changing_facts_data import (  # noqa: E402
    ACKS,
    CARS,
    CHATTER,
    CITIES,
    COEXIST,
    COMPANIES,
    FRIENDS,
    HELD_OUT_CHANGE,
    HELD_OUT_COEXIST,
    IN_CHAT_QUESTIONS,
    KINDS,
    MORE_CHANGE,
    MORE_COEXIST,
    Kind,
    Templates,
)
from bench.common import machine  # noqa: E402
from chat.supersede import newest_statement, with_newest  # noqa: E402  # noqa: E402
from facts.asked import asks_about_past
from facts.rules import Proposal, detect, shortlist_query, topic_query  # noqa: E402
from storage.files.ledger.store import Ledger  # noqa: E402  # noqa: E402
from storage.files.retrieval.db import Index  # noqa: E402  # noqa: E402

KS = (5, 8)
SHORTLIST_K = 50
SYSTEMS = ("raw", "detector", "oracle")
MODES = ("as asked", "as asked + newest", "+ topic words")


@dataclass
class Turn:
    role: str
    text: str
    fact: int | None = None  # which of the session's facts it states
    value: str | None = None  # the value it states
    probe: str | None = None  # "now" / "before": a question searched, not appended


@dataclass
class Session:
    name: str
    facts: list[tuple[Kind, list[str]]]
    turns: list[Turn] = field(default_factory=list)


def article(v: str) -> str:
    return "an" if v[:1].lower() in "aeiou" and not v.startswith(("Uni", "One", "UX", "Eu")) else "a"


def say(rng: random.Random, templates: Templates, value: str, old: str | None) -> str:
    options = templates[value] if isinstance(templates, dict) else templates
    if old is None or isinstance(templates, dict):
        options = tuple(t for t in options if "{old}" not in t) or options
    t = rng.choice(options)
    return t.format(v=value, V=value[:1].upper() + value[1:], a=article(value), old=old or "")


def fill(rng: random.Random, template: str, used: set[str]) -> str:
    """A distractor; each person it names is new to the session (a friend's city said twice would be a change)."""
    people = [p for p in FRIENDS if p not in used]
    if template in used or ("{person" in template and len(people) < 2):
        template = rng.choice(CHATTER)  # a relation's city said twice would be a change the labels do not know
    if template in COEXIST or template in MORE_COEXIST or template in HELD_OUT_COEXIST:
        used.add(template)
    person, person2 = rng.sample(people, 2) if len(people) >= 2 else ("", "")
    if "{person}" in template:
        used.add(person)
    if "{person2}" in template:
        used.add(person2)
    city, city2 = rng.sample(CITIES, 2)
    car = rng.choice(CARS)
    return template.format(person=person, person2=person2, city=city, city2=city2, company=rng.choice(COMPANIES),
                           car=car, a_car=article(car), lang=rng.choice(("Rust", "Go", "Haskell", "Ruby")),
                           port=rng.choice(("5050", "6000", "7070", "9090")))


def merged(a: Templates, b: Templates) -> Templates:
    if isinstance(a, dict) and isinstance(b, dict):
        return {v: a.get(v, ()) + b.get(v, ()) for v in a.keys() | b.keys()}
    assert isinstance(a, tuple) and isinstance(b, tuple)
    return a + b


def phrased(kind: Kind, unseen: bool) -> Kind:
    """The kind with its held-out change phrasings (HELD_OUT_CHANGE), or with both tuning sets."""
    if unseen:
        return replace(kind, change=HELD_OUT_CHANGE.get(kind.name, kind.change))
    more = MORE_CHANGE.get(kind.name, {} if isinstance(kind.change, dict) else ())
    return replace(kind, change=merged(kind.change, more))


def make_session(rng: random.Random, n: int, *, unseen: bool = False) -> Session:
    kinds = [phrased(k, unseen) for k in rng.sample(KINDS, rng.randint(6, 8))]
    coexist = HELD_OUT_COEXIST if unseen else COEXIST + MORE_COEXIST
    session = Session(f"cf-{n:03d}", [])
    streams: list[list[Turn]] = []
    for f, kind in enumerate(kinds):
        changes = rng.randint(1, 4)
        if len(kind.values) > changes:
            values = rng.sample(kind.values, changes + 1)
        else:  # a yes/no fact goes back and forth
            values = [rng.choice(kind.values)]
            while len(values) <= changes:
                values.append(rng.choice([v for v in kind.values if v != values[-1]]))
        if kind.ordered:
            values.sort(key=int)
        session.facts.append((kind, values))
        stream = [Turn("user", say(rng, kind.first, values[0], None), f, values[0])]
        for i in range(1, len(values)):
            stream.append(Turn("user", say(rng, kind.change, values[i], values[i - 1]), f, values[i]))
            if kind.restate and rng.random() < 0.3:
                stream.append(Turn("user", say(rng, kind.restate, values[i], None), f, values[i]))
        streams.append(stream)
    used: set[str] = set()
    while any(streams):
        live = [s for s in streams if s]
        turn = rng.choice(live).pop(0)
        session.turns.append(turn)
        if rng.random() < 0.3:
            session.turns.append(Turn("assistant", rng.choice(ACKS)))
        for _ in range(rng.choice((0, 1, 1, 2))):
            pool = rng.choices((coexist, CHATTER, IN_CHAT_QUESTIONS), weights=(5, 3, 1))[0]
            session.turns.append(Turn("user", fill(rng, rng.choice(pool), used)))
        if turn.value is not None and turn.value != session.facts[turn.fact or 0][1][0] and rng.random() < 0.3:  # ask about some fact stated so far, now
            stated = sorted({t.fact for t in session.turns if t.fact is not None})
            session.turns.append(Turn("user", "", rng.choice(stated), None, "now"))
    for f, (kind, _) in enumerate(session.facts):
        session.turns.append(Turn("user", rng.choice(kind.ask_now), f, None, "now"))
        session.turns.append(Turn("user", rng.choice(kind.ask_before), f, None, "before"))
    for t in session.turns:
        if t.probe == "now" and not t.text:
            t.text = rng.choice(session.facts[t.fact or 0][0].ask_now)
    return session


@dataclass
class Scores:
    live: dict[tuple[str, str, int], list[int]] = field(default_factory=lambda: defaultdict(list))
    dead: dict[tuple[str, str, int], list[int]] = field(default_factory=lambda: defaultdict(list))
    history: dict[tuple[str, str, int], list[int]] = field(default_factory=lambda: defaultdict(list))
    history_dead: dict[tuple[str, str, int], list[int]] = field(default_factory=lambda: defaultdict(list))
    proposals: int = 0
    false: int = 0
    true_supersessions: int = 0
    found: int = 0
    misses: list[str] = field(default_factory=list)
    false_examples: list[str] = field(default_factory=list)
    live_misses: list[str] = field(default_factory=list)
    by_kind: Counter[str] = field(default_factory=Counter)


def run_session(session: Session, index: Index, ledger: Ledger, scores: Scores) -> None:
    stated: dict[int, tuple[int, str]] = {}  # seq -> (fact, value) of fact statements so far
    texts: dict[int, str] = {}
    current: dict[int, str] = {}  # fact -> current value
    previous: dict[int, str] = {}  # fact -> the value before it
    superseded: dict[int, Proposal] = {}
    for turn in session.turns:
        if turn.probe is not None:
            probe(session, turn, index, stated, current, previous, superseded, texts, scores)
            continue
        ev = ledger.append(session.name, turn.role, turn.text)
        index.index_session(session.name, [ev])
        texts[ev.seq] = turn.text
        if turn.fact is not None and turn.value is not None:
            stated[ev.seq] = (turn.fact, turn.value)
            if turn.fact in current and current[turn.fact] != turn.value:
                previous[turn.fact] = current[turn.fact]
            current[turn.fact] = turn.value
        if turn.role != "user":
            continue
        query = shortlist_query(turn.text)
        if query is None:
            continue
        hits = index.search(session.name, query, k=SHORTLIST_K, exclude_seqs=[ev.seq]).results
        earlier = [(h.seq, h.text) for h in hits if h.role == "user"]
        for p in detect(turn.text, earlier, new_seq=ev.seq):
            scores.proposals += 1
            old = stated.get(p.older_seq)
            new = stated.get(ev.seq)
            if old is None or new is None or old[0] != new[0] or old[1] == new[1]:
                scores.false += 1
                scores.false_examples.append(f"{session.name}: {texts[p.older_seq]!r} killed by {turn.text!r} ({p.rule})")
            superseded.setdefault(p.older_seq, p)
    dead = {s for s, (f, v) in stated.items() if v != current[f]}
    scores.true_supersessions += len(dead)
    scores.found += len(dead & set(superseded))


def probe(session: Session, turn: Turn, index: Index, stated: dict[int, tuple[int, str]], current: dict[int, str],
          previous: dict[int, str], superseded: dict[int, Proposal], texts: dict[int, str], scores: Scores) -> None:
    fact = turn.fact if turn.fact is not None else 0
    now = current.get(fact)
    if now is None:
        return
    dead_all = {s for s, (f, v) in stated.items() if v != current[f]}
    live = {s for s, (f, v) in stated.items() if f == fact and v == now}
    dead = {s for s in dead_all if stated[s][0] == fact}
    kind = session.facts[fact][0].name
    modes = (("as asked", turn.text), ("as asked + newest", turn.text), ("+ topic words", topic_query(turn.text)))
    for k, (mode, query) in itertools.product(KS, modes):
        query = query or turn.text
        if turn.probe == "now":
            for system in SYSTEMS:
                exclude = sorted({"raw": set(), "detector": set(superseded), "oracle": dead_all}[system])
                engine_past = mode == "as asked + newest" and asks_about_past(turn.text)
                if engine_past:  # what a turn does with a question it reads as about the past: nothing left out
                    exclude = []
                hits = index.search(session.name, query, k=k, exclude_seqs=exclude).results
                if mode == "as asked + newest" and not engine_past:  # what a turn hands the model: one slot for it
                    hits = with_newest(hits, newest_statement(index, session.name, turn.text, exclude), k)
                got = [h.seq for h in hits]
                scores.live[(system, mode, k)].append(int(bool(live & set(got))))
                scores.dead[(system, mode, k)].append(int(bool(dead & set(got))))
                if system == "oracle" and mode == MODES[-1] and k == KS[-1] and not live & set(got):
                    scores.live_misses.append(f"{session.name} [{kind}] {turn.text!r}: live "
                                              f"{[texts[s] for s in sorted(live)]}")
                if system == "detector" and mode == MODES[-1] and k == KS[0] and dead & set(got):
                    scores.by_kind[kind] += 1
                    for s in sorted(dead & set(got)):
                        scores.misses.append(f"{session.name} [{kind}] {turn.text!r}: served {texts[s]!r}")
        elif fact in previous and mode != "as asked + newest":  # a turn gives a question about the past no slot
            before = {s for s, (f, v) in stated.items() if f == fact and v == previous[fact]}
            got = [h.seq for h in index.search(session.name, query, k=k).results]
            for system in SYSTEMS:
                marked = {"raw": set(), "detector": set(superseded), "oracle": dead_all}[system]
                scores.history[(system, mode, k)].append(int(bool(before & set(got))))
                scores.history_dead[(system, mode, k)].append(int(bool((dead & set(got)) - marked)))


def mean(xs: list[int]) -> str:
    return f"{sum(xs) / len(xs):.3f}" if xs else "-"


def table(scores: Scores) -> str:
    lines = ["| system | question | K | live-fact recall | dead-fact served | history recall | "
             "history: dead served unmarked |", "|---|---|---:|---:|---:|---:|---:|"]
    for mode in MODES:
        for system in SYSTEMS:
            for k in KS:
                key = (system, mode, k)
                lines.append(f"| {system} | {mode} | {k} | {mean(scores.live[key])} | {mean(scores.dead[key])} | "
                             f"{mean(scores.history[key])} | {mean(scores.history_dead[key])} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sessions", type=int, default=40)
    p.add_argument("--seed", type=int, default=12)
    p.add_argument("--misses", action="store_true",
                   help="list dead facts served (detector, + topic words, K=5), live statements missed (oracle, "
                        "+ topic words, K=8) and false supersessions")
    p.add_argument("--held-out", action="store_true",
                   help="change phrasings and distractors written after the detector (never tuned on)")
    p.add_argument("--families", choices=("tune", "held-out"),
                   help="issue 32's families (bench/changing_facts_families.py): report on one side of the fixed split")
    args = p.parse_args(argv)
    if args.families:
        from bench.changing_facts_families import run

        return run(args.families, args.sessions if args.sessions != 40 else 60, args.seed if args.seed != 12 else 32, args.misses)
    rng = random.Random(args.seed)
    sessions = [make_session(rng, n, unseen=args.held_out) for n in range(args.sessions)]
    facts = sum(len(s.facts) for s in sessions)
    kinds = len({k.name for s in sessions for k, _ in s.facts})
    changes = sum(len(v) - 1 for s in sessions for _, v in s.facts)
    events = sum(1 for s in sessions for t in s.turns if t.probe is None)
    probes = Counter(t.probe for s in sessions for t in s.turns if t.probe)
    started = time.perf_counter()
    scores = Scores()
    with tempfile.TemporaryDirectory(prefix="changing-facts-") as tmp:
        ledger = Ledger(Path(tmp))
        index = Index(Path(tmp), ledger)
        for session in sessions:
            run_session(session, index, ledger, scores)
        index.close()
    elapsed = time.perf_counter() - started
    print(f"Changing facts (issue 12) — {machine()}")
    print(f"\n{'held-out phrasings, ' if args.held_out else ''}seed {args.seed}: {len(sessions)} sessions, {events} events, {facts} facts over {kinds} kinds, "
          f"{changes} changes, {probes['now']} 'now' and {probes['before']} 'before' probes\n")
    print(table(scores))
    rate = scores.false / scores.proposals if scores.proposals else 0.0
    print(f"\nfalse supersessions: {scores.false} of {scores.proposals} proposals ({rate:.3f}); "
          f"statements made dead by a later change: {scores.true_supersessions}, "
          f"of which the detector superseded {scores.found}")
    print(f"\n_{elapsed:.1f}s_")
    if args.misses:
        print("\ndead facts served by the detector system (K=5), by kind:", dict(scores.by_kind.most_common()))
        print("\n".join(scores.misses))
        print(f"\nlive statement not among the K={KS[-1]} even with the true superseded excluded (oracle):")
        print("\n".join(scores.live_misses))
        print("\nfalse supersessions:")
        print("\n".join(scores.false_examples))
    return 0


if __name__ == "__main__":
    sys.exit(main())
