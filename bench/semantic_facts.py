"""Does the semantic extra help decide "same attribute" for facts that change (issue 32)? Measured on the families.

    python bench/semantic_facts.py --families tune|held-out [--sessions 60] [--seed 32] [--taus 0.4,0.5,0.6]

The sessions, systems and figures of bench/changing_facts_families.py (the same generator, seed and fixed split),
run twice in the same process over the same sessions: once over a lexical index (today's answers, no extra) and
once over an index searching in hybrid mode with the extra's model (all-MiniLM-L6-v2 int8 ONNX,
requirements-semantic.txt; storage/common/semantic.py, retrieval/semantic.py's fusion, called, not changed).
Three designs for the semantic signal:

(a) hybrid  every search the turn makes runs hybrid: the write-time detector's shortlist, the question's own K, and
            the resolver's candidate searches (chat.supersede.resolved_for_now: the question, its topic words, the
            slot's values), so the dense top-M of the session's events feeds the same resolver (facts.resolve).
            This is what a turn already does when its index searches semantic (chat.retrieve -> resolved_for_now ->
            index.search, hybrid): no new code, measured here.
(b) cos>=t  "same attribute" as cosine: the session's user statements (not questions; no also/too/another nor a
            hypothetical cue: facts.patterns.COEXIST_RE, HYPOTHETICAL_RE) whose cosine with the question is >= t are
            the slot's statements; the newest of them has the newest slot, and when it carries a change cue
            (MARKER_RE, NEGATION_RE, ANYMORE_RE) the older ones are earlier (left out of the K, as the resolver
            leaves its own; the next hits of the question's ranking take their places), on top of the resolver over
            the lexical index. `--pairs t:p`: an older one is earlier only when its cosine with that newest is >= p
            too (the slot's earlier statement). t and p are set on the tune families only.
(c) newest  `--designs c`: the lexical resolver's K (what is left out unchanged), with the newest slot given to the
            statement the resolution over the hybrid searches finds newest (resolved_newest). Not wired anywhere: a
            turn's index searches either lexical or hybrid, not both.

Figures per system and K as in changing_facts_families: live-fact recall, dead served as live, and false
supersessions of the question-time resolution (statements left out as earlier that are live or state no older
value), over all left out. The held-out families are reported once per kept design; tune chooses t.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import changing_facts_families as cff  # noqa: E402
from bench.common import machine  # noqa: E402
from chat.supersede import RESOLVE_DEPTH, SHORTLIST_K, candidates, resolved_for_now, with_newest  # noqa: E402
from facts import patterns as pat  # noqa: E402
from facts.asked import asked  # noqa: E402
from facts.resolve import resolve  # noqa: E402
from facts.rules import detect, shortlist_query  # noqa: E402
from retrieval.model import MAX_K, Hit  # noqa: E402
from storage.common import semantic  # noqa: E402
from storage.contract import SemanticUnavailable  # noqa: E402
from storage.files.ledger.store import Ledger  # noqa: E402
from storage.files.retrieval.db import Index  # noqa: E402

KS = cff.KS
CUES = (pat.MARKER_RE, pat.NEGATION_RE, pat.ANYMORE_RE)


@dataclass
class Figures:
    live: dict[tuple[str, int], list[int]] = field(default_factory=lambda: defaultdict(list))
    dead: dict[tuple[str, int], list[int]] = field(default_factory=lambda: defaultdict(list))
    left: dict[tuple[str, int], int] = field(default_factory=lambda: defaultdict(int))
    wrong: dict[tuple[str, int], int] = field(default_factory=lambda: defaultdict(int))
    proposals: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    false: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, system: str, k: int, st: cff.State, fact: int, got: set[int], left: set[int]) -> None:
        live, dead = st.seqs(fact, True), st.seqs(fact, False)
        got = got - left  # handed marked as earlier, or left out: not served as live
        self.live[(system, k)].append(int(bool(live & got)))
        self.dead[(system, k)].append(int(bool(dead & got - live)))
        self.left[(system, k)] += len(left)
        self.wrong[(system, k)] += sum(1 for s in left if s in live or not any(
            v != st.current[f] for f, v in st.stated.get(s, [])))


def _cued(text: str) -> bool:
    return any(p.search(text) is not None for p in CUES)


def _beside(text: str) -> bool:
    return "?" in text or pat.COEXIST_RE.search(text) is not None or pat.HYPOTHETICAL_RE.search(text) is not None


def cos_resolved(index: Index, session: str, question: str, k: int, exclude: list[int], q_vec: np.ndarray,
                 vecs: dict[int, np.ndarray], texts: dict[int, str], tau: float,
                 pair: float | None = None) -> tuple[list[Hit], set[int]]:
    """Design (b): the resolver, with the statements whose cosine with the question is >= tau as the slot's; with
    `pair`, an older one is earlier only when its cosine with the newest is >= pair too (the slot's earlier statement)."""
    base, base_left = resolved_for_now(index, session, question, k, exclude)
    if asked(question) is None:
        return base, set(base_left)
    cands = sorted(s for s, v in vecs.items() if s not in exclude and not _beside(texts[s]) and float(v @ q_vec) >= tau)
    if not cands:
        return base, set(base_left)
    newest = cands[-1]
    extra = set(cands[:-1]) if _cued(texts[newest]) else set()
    if pair is not None:
        extra = {s for s in extra if float(vecs[s] @ vecs[newest]) >= pair}
    shown = {h.seq for h in base}
    extra = {s for s in extra if s in shown and s not in base_left}  # left out of the K the resolver hands
    hits = base
    if extra:  # the next hits of the question's own ranking take their places, as the resolver's own earlier do
        pool = index.search(session, question, min(MAX_K, k + RESOLVE_DEPTH), exclude_seqs=exclude).results
        kept = [h for h in base if h.seq not in extra]
        for h in pool:
            if len(kept) >= k:
                break
            if h.seq not in extra and h.seq not in base_left and all(h.seq != g.seq for g in kept):
                kept.insert(len([g for g in kept if not g.newest]), h)
        hits = kept[:k]
        base_left = {**base_left, **{s: newest for s in extra}}
    if all(h.seq != newest for h in hits):
        found = [h for h in index.search(session, texts[newest], min(MAX_K, k + RESOLVE_DEPTH)).results if h.seq == newest]
        if found:
            hits = with_newest(hits, found[0], k)
    return hits, set(base_left)


def resolved_newest(index: Index, session: str, question: str, k: int, exclude: list[int]) -> Hit | None:
    """The statement resolved_for_now gives the newest slot (the newest current one of the asked slot), found with
    `index`'s searches (chat.supersede.candidates), for design (c)."""
    gathered = candidates(index, session, question, k, exclude)
    if gathered is None:
        return None
    _pool, statements = gathered
    newest = max(resolve(question, [(s, h.text) for s, h in statements.items()]).current, default=None)
    return statements[newest] if newest is not None else None


def run_session(session: cff.Session, plain: tuple[Ledger, Index], hybrid: tuple[Ledger, Index],
                model: semantic.Embedder, taus: list[float], pairs: list[tuple[float, float]],
                designs: str, fig: Figures) -> None:
    st = cff.State()
    vecs: dict[int, np.ndarray] = {}
    superseded: dict[str, set[int]] = {"lexical": set(), "hybrid": set()}
    for turn in session.turns:
        if turn.probe is not None:
            if turn.fact in st.current and turn.probe == "now":
                probe(session, turn, plain[1], hybrid[1], st, superseded, vecs, model, taus, pairs, designs, fig)
            continue
        seq = -1
        for mode, (ledger, index) in (("lexical", plain), ("hybrid", hybrid)):
            ev = ledger.append(session.name, turn.role, turn.text)
            index.index_session(session.name, [ev])
            seq = ev.seq
            if turn.role != "user" or (query := shortlist_query(turn.text)) is None:
                continue
            hits = index.search(session.name, query, k=SHORTLIST_K, exclude_seqs=[ev.seq]).results
            for p in detect(turn.text, [(h.seq, h.text) for h in hits if h.role == "user"], new_seq=ev.seq):
                fig.proposals[mode] += 1
                old, new = dict(st.stated.get(p.older_seq, [])), dict(turn.facts)
                if not any(f in old and old[f] != v for f, v in new.items()):
                    fig.false[mode] += 1
                superseded[mode].add(p.older_seq)
        st.texts[seq] = turn.text
        if turn.role == "user":
            vecs[seq] = model.embed([turn.text])[0]
        if turn.facts:
            st.stated[seq] = list(turn.facts)
            for f, v in turn.facts:
                if f in st.current and st.current[f] != v:
                    st.previous[f] = st.current[f]
                st.current[f] = v


def probe(session: cff.Session, turn: cff.Turn, plain: Index, hybrid: Index, st: cff.State,
          superseded: dict[str, set[int]], vecs: dict[int, np.ndarray], model: semantic.Embedder,
          taus: list[float], pairs: list[tuple[float, float]], designs: str, fig: Figures) -> None:
    q_vec = model.embed([turn.text])[0]
    for k in KS:
        with_c = "c" in designs
        for system, index, mode in (("resolved (lexical, no extra)", plain, "lexical"),
                                    ("(a) resolved, hybrid", hybrid, "hybrid")):
            hits, left = resolved_for_now(index, session.name, turn.text, k, sorted(superseded[mode]))
            fig.add(system, k, st, turn.fact, {h.seq for h in hits}, set(left))
        if with_c:  # (c): the lexical resolver's K, the newest slot from the hybrid resolution
            hits, left = resolved_for_now(plain, session.name, turn.text, k, sorted(superseded["lexical"]))
            hits = with_newest(hits, resolved_newest(hybrid, session.name, turn.text, k, sorted(superseded["hybrid"])), k)
            fig.add("(c) resolved, newest slot from hybrid", k, st, turn.fact, {h.seq for h in hits}, set(left))
        for tau in taus:
            hits, left2 = cos_resolved(plain, session.name, turn.text, k, sorted(superseded["lexical"]), q_vec, vecs,
                                       st.texts, tau)
            fig.add(f"(b) resolved + cos>={tau:.2f}", k, st, turn.fact, {h.seq for h in hits}, left2)
        for tau, pair in pairs:
            hits, left2 = cos_resolved(plain, session.name, turn.text, k, sorted(superseded["lexical"]), q_vec, vecs,
                                       st.texts, tau, pair)
            fig.add(f"(b) resolved + cos>={tau:.2f}, with the newest >={pair:.2f}", k, st, turn.fact,
                    {h.seq for h in hits}, left2)


def _mean(xs: list[int]) -> str:
    return f"{sum(xs) / len(xs):.3f}" if xs else "-"


def table(fig: Figures) -> str:
    lines = ["| system | K | live-fact recall | dead served as live | false (resolver) |", "|---|---:|---:|---:|---:|"]
    for system, k in fig.live:
        n, bad = fig.left[(system, k)], fig.wrong[(system, k)]
        lines.append(f"| {system} | {k} | {_mean(fig.live[(system, k)])} | {_mean(fig.dead[(system, k)])} | "
                     f"{bad}/{n} ({bad / n if n else 0.0:.3f}) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--families", choices=tuple(cff.SPLITS), required=True)
    p.add_argument("--sessions", type=int, default=60)
    p.add_argument("--seed", type=int, default=32)
    p.add_argument("--taus", default="0.4,0.5,0.6", help="cosine thresholds for design (b), comma-separated")
    p.add_argument("--pairs", default="", help="design (b) with the newest: question:pair thresholds, e.g. 0.4:0.7,0.5:0.6")
    p.add_argument("--designs", default="", help="'c': also design (c), the lexical K with the hybrid newest slot")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    try:
        model = semantic.load(threads=args.threads)
    except SemanticUnavailable as exc:
        print(exc)
        return 2
    taus = [float(t) for t in args.taus.split(",") if t.strip()]
    pairs = [(float(a), float(b)) for a, b in (x.split(":") for x in args.pairs.split(",") if x.strip())]
    rng = random.Random(args.seed)
    made = [cff.make_session(rng, n, cff.SPLITS[args.families]) for n in range(args.sessions)]
    started = time.perf_counter()
    fig = Figures()
    with tempfile.TemporaryDirectory(prefix="semantic-facts-") as tmp:
        (Path(tmp) / "a").mkdir()
        (Path(tmp) / "b").mkdir()
        la, lb = Ledger(Path(tmp) / "a"), Ledger(Path(tmp) / "b")
        ia, ib = Index(Path(tmp) / "a", la), Index(Path(tmp) / "b", lb)
        ib.use_semantic(model)
        for s in made:
            run_session(s, (la, ia), (lb, ib), model, taus, pairs, args.designs, fig)
        ia.close()
        ib.close()
    elapsed = time.perf_counter() - started
    print(f"The semantic extra for facts that change (issue 32) — {machine()}")
    print(f"\n{args.families} families {', '.join(cff.SPLITS[args.families])}; seed {args.seed}: {args.sessions} "
          f"sessions; model {model.describe()['model']}\n")
    print(table(fig))
    for mode in ("lexical", "hybrid"):
        n, bad = fig.proposals[mode], fig.false[mode]
        print(f"\nfalse supersessions (detector, {mode} shortlist): {bad} of {n} ({bad / n if n else 0.0:.3f})")
    print(f"\n_{elapsed:.1f}s_")
    return 0


if __name__ == "__main__":
    sys.exit(main())
