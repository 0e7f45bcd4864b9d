"""Review of issue 32 (earlier statements handed back marked, FORMAT.md §20.1): properties of how they take slots
(chat.supersede.with_earlier) generated over slot histories, and what a replay compares."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chat.citing import Cites
from chat.engine import Engine
from chat.llm import LLM
from chat.replay import DIFFERS, REPLAYED, replay
from chat.supersede import with_earlier
from receipts import body as rbody
from receipts.body import Receipt, parse_receipt
from receipts.prompt import build_messages, prompt_hash
from receipts.states import prompt_marks
from retrieval.model import Hit
from storage.offline import verify_bytes

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


HARBOUR = "I live near the old harbour and I like ships."


@pytest.fixture
def past_turn(tmp_path: Path) -> Iterator[tuple[Engine, Receipt]]:
    """A question about the past at K=5: Paris (0) marked earlier, replaced by Berlin (4); the harbour (1) live."""
    e = Engine(tmp_path / "data", llm=LLM(api_key=""))
    try:
        for text in ("I live in Paris and I work as a nurse.", HARBOUR, "The weather is lovely today.", "I watched a film about old ships.",
                     "I moved to Berlin last month."):
            e.remember(S, text)
        t = e.turn(S, "Where did I live before?", k=5)
        assert [(x["seq"], x["newer"]) for x in t.body["states"]["earlier"]] == [(0, 4)] and 1 in [m["event"]["seq"] for m in t.body["memories"]]
        yield e, parse_receipt(rbody.dump_file(t.envelope))
    finally:
        e.index.close()
        e.ledger.close()


def _forged(e: Engine, r: Receipt, change: Callable[[dict[str, Any]], None]) -> bytes:
    """The receipt with its earlier list changed, the prompt hash re-derived to match and re-signed by its own key:
    a signer telling the model (and the receipt) something the resolution did not say."""
    signed, view = copy.deepcopy(r.signed_body), copy.deepcopy(r.body)
    for b in (signed, view):
        change(b)
    messages = build_messages(view["prompt"]["template"], view["query"]["event"]["text"], [m["event"] for m in view["memories"]], prompt_marks(view))
    signed["prompt"]["sha256"] = prompt_hash(messages)
    return rbody.dump_file(rbody.sign_receipt(signed, e.key, list(r.disclosures.values())))


def _live_marked_earlier(b: dict[str, Any]) -> None:
    rank = next(m["rank"] for m in b["memories"] if m["event"]["seq"] == 1)
    b["states"]["earlier"] = sorted([*b["states"]["earlier"], {"rank": rank, "seq": 1, "id": b["memories"][rank - 1]["event"]["id"], "newer": 4}], key=lambda x: x["rank"])


def _another_newer(b: dict[str, Any]) -> None:
    b["states"]["earlier"][0]["newer"] = 1


@pytest.mark.parametrize("change", [_live_marked_earlier, _another_newer], ids=["a-live-memory-marked-earlier", "the-mark-names-another-newer"])
def test_a_receipt_whose_earlier_marks_the_resolution_does_not_give_verifies_but_does_not_replay(
    past_turn: tuple[Engine, Receipt], change: Callable[[dict[str, Any]], None]
) -> None:
    e, r = past_turn
    assert replay(e.stores, Cites(e.stores), r).verdict == REPLAYED  # the honest receipt
    raw = _forged(e, r, change)
    assert verify_bytes(raw, trusted=[e.key.public_key], data_dir=e.data_dir).verdict == "verified"  # §20.1: a reading of texts, not a record
    got = replay(e.stores, Cites(e.stores), parse_receipt(raw))
    assert got.verdict == DIFFERS and any("earlier statement" in line for line in got.lines()), got.lines()


def test_a_receipt_leaving_an_earlier_statement_unmarked_beside_another_does_not_replay(past_turn: tuple[Engine, Receipt]) -> None:
    e, r = past_turn

    def swap(b: dict[str, Any]) -> None:  # the harbour marked, Paris (the true earlier statement) served unmarked
        _live_marked_earlier(b)
        b["states"]["earlier"] = [x for x in b["states"]["earlier"] if x["seq"] != 0]

    got = replay(e.stores, Cites(e.stores), parse_receipt(_forged(e, r, swap)))
    assert got.verdict == DIFFERS and any("does not list it" in line for line in got.lines()), got.lines()


def test_a_superseded_memory_passed_off_as_an_earlier_statement_fails_with_the_ledger(tmp_path: Path) -> None:
    """Leeds (0) superseded by a record (Bristol, 2, said after it): a receipt re-signed listing it as an earlier
    statement instead (v3 prompt, hash re-derived) passes offline, where no record is named, and fails
    `ledger.states`: the ledger's record makes it dead, and an earlier statement claims it was live (§20.1)."""
    e = Engine(tmp_path / "data", llm=LLM(api_key=""))
    try:
        for text in ("I live in Leeds.", "The weather is lovely today.", "We have just moved to Bristol."):
            e.remember(S, text)
        t = e.turn(S, "Where did I live before?", k=4)
        r = parse_receipt(rbody.dump_file(t.envelope))
        assert [x["seq"] for x in t.body["states"]["superseded"]] == [0] and 2 in [m["event"]["seq"] for m in t.body["memories"]]

        def as_earlier(b: dict[str, Any]) -> None:
            (sup,) = b["states"]["superseded"]
            b["states"] = {"v": 2, "superseded": [], "excluded": b["states"]["excluded"],
                           "earlier": [{"rank": sup["rank"], "seq": 0, "id": sup["id"], "newer": 2}]}
            b["prompt"]["template"] = "mre-prompt/v3"

        raw = _forged(e, r, as_earlier)
        assert verify_bytes(raw, trusted=[e.key.public_key]).verdict == "verified"  # offline: nothing names the record
        report = verify_bytes(raw, trusted=[e.key.public_key], data_dir=e.data_dir)
        row = next(c for c in report.checks if c.name == "ledger.states")
        assert report.verdict == "failed" and row.status == "fail" and "seq 0 is claimed live" in row.message, row.message
    finally:
        e.index.close()
        e.ledger.close()


@pytest.mark.parametrize(
    ("earlier", "cut"),
    [({0: 3}, 1), ({0: 1, 1: 3}, 1), ({2: 3}, 1), ({1: 3, 2: 3}, 1), ({0: 1, 1: 3}, 0), ({0: 2}, 2), ({0: 1}, 2)],
    ids=["newer-cut", "chain-cut", "below-newer-cut", "two-under-a-cut-newer", "chain-whole", "newer-cut-two", "both-kept"],
)
def test_whatever_fits_in_the_receipt_it_verifies_and_never_names_a_newer_statement_not_handed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, earlier: dict[int, int], cut: int
) -> None:
    """The engine's last step before the prompt (chat.engine.Engine._complete): the receipt cites only as many memories
    as fit (receipts.body.citable, here made to fit `cut` fewer); an earlier statement whose newer one did not fit is
    not handed over. Before, it was taken out of the middle of the list (ranking.memories failed: the memories were
    no longer the ranked list's first ones) and one whose newer statement was taken out that way stayed, its mark
    naming a statement not handed (states.earlier failed): the engine signed receipts that did not verify."""
    import chat.engine as engine_module

    e = Engine(tmp_path / "data", llm=LLM(api_key=""))
    try:
        for text in ("I like green tea.", "I like black tea.", "I drink tea with milk.", "Tea is my favourite drink."):
            e.remember(S, text)
        from chat.retrieve import retrieve as real_retrieve

        real_citable = rbody.citable

        def named(*a: Any, **kw: Any) -> Any:  # the resolution named these (seq -> newer), all among the K
            got = real_retrieve(*a, **kw)
            assert sorted(h.seq for h in got.hits) == [0, 1, 2, 3]
            return replace(got, earlier=dict(earlier))

        monkeypatch.setattr(engine_module, "retrieve", named)
        monkeypatch.setattr(rbody, "citable", lambda user, mems, *a: min(real_citable(user, mems, *a), len(mems) - cut))
        t = e.turn(S, "What tea do I like?", k=4)
        cited = [m["event"]["seq"] for m in t.body["memories"]]
        listed = {x["seq"]: x["newer"] for x in t.body.get("states", {}).get("earlier", [])}
        assert {s: n for s, n in earlier.items() if s in cited} == listed, "an earlier statement handed unmarked"
        assert all(n in cited for n in listed.values())
        report = verify_bytes(rbody.dump_file(t.envelope), trusted=[e.key.public_key], data_dir=e.data_dir)
        assert report.verdict == "verified", [(c.name, c.message) for c in report.checks if c.status != "pass"]
    finally:
        e.index.close()
        e.ledger.close()
