"""Review of issue 32 (earlier statements handed back marked, FORMAT.md §20.1): properties of how they take slots
(chat.supersede.with_earlier) generated over slot histories, and what a replay compares."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from chat.supersede import with_earlier
from retrieval.model import Hit

S = "bob"
Q = "Where do I live?"
CITIES = ["Paris", "Berlin", "London", "Leeds", "Rome"]


def hit(seq: int, rank: int, text: str, newest: bool = False) -> Hit:
    return Hit(S, f"e{seq}", seq, "user", text, {}, "d" * 64, "c" * 64, "2026-01-01T00:00:00Z", 1.0, 0.0, 1.0, rank, newest=newest)


def test_an_earlier_statement_whose_newer_one_stays_out_takes_no_slot_from_a_hit() -> None:
    """Paris (1) -> Berlin (2) -> London (3, the newest, in the K); K = 2: Berlin takes the chatter's slot and Paris,
    which would hang under Berlin, stays out; before, Berlin was dropped and Paris placed after nothing, the chatter
    lost for neither: a K of one, no mark (and a replay of the receipt differed from the turn)."""
    paris, berlin = hit(1, 1, "I live in Paris."), hit(2, 2, "I live in Berlin.")
    chatter, london = hit(4, 1, "The weather is lovely today."), hit(3, 2, "I live in London.", newest=True)
    out, marks = with_earlier(Q, [chatter, london], [paris, berlin], 2)
    assert [h.seq for h in out] == [3, 2] and marks == {2: 3}


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[Hit], list[Hit], int]:
    """A K resolved for now (chatter and the newest statement) and the earlier statements resolution left out."""
    n = draw(st.integers(1, 5))
    cities = draw(st.lists(st.sampled_from(CITIES), min_size=n, max_size=n))
    statements = [(seq, f"I live in {c}.") for seq, c in enumerate(cities)]
    chatter = [hit(10 + i, 0, f"I watched film number {i}.") for i in range(draw(st.integers(0, 4)))]
    newest = hit(statements[-1][0], 0, statements[-1][1], newest=True)
    kept = [*chatter, newest]
    earlier = [hit(seq, 0, text) for seq, text in draw(st.permutations(statements[:-1]))]
    k = draw(st.integers(1, 8))
    kept = kept[-k:] if len(kept) > k else kept
    return [replace(h, rank=i) for i, h in enumerate(kept, 1)], [replace(h, rank=i) for i, h in enumerate(earlier, 1)], k


@settings(max_examples=200, deadline=None)
@given(histories())
def test_the_k_is_never_exceeded_and_no_slot_is_given_up_for_an_unmarked_statement(h: tuple[list[Hit], list[Hit], int]) -> None:
    kept, earlier, k = h
    out, marks = with_earlier(Q, kept, earlier, k)
    seqs = [x.seq for x in out]
    assert len(out) <= k and len(set(seqs)) == len(seqs)
    assert [x.rank for x in out] == list(range(1, len(out) + 1))
    kept_seqs = {x.seq for x in kept}
    back = [s for s in seqs if s not in kept_seqs]
    assert all(s in marks for s in back), "an earlier statement handed back unmarked"
    assert all(n in seqs and seqs.index(n) < seqs.index(s) for s, n in marks.items()), "a mark names a statement not before it"
    assert len(out) >= min(k, len(kept)), "a hit gave up its slot and the K came out short"
    if not marks:
        assert seqs == [x.seq for x in kept], "nothing marked, yet the K differs from the one without marks"
    assert any(x.newest for x in out) == any(x.newest for x in kept)
