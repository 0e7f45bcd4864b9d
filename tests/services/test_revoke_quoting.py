"""Revoked words do not come back through the answers that quoted them (issue 11; FORMAT.md §17).

An answer may repeat what its turn handed the model (here a model that quotes every memory it was given,
tests/quoting_model.py: the offline stand-in's replies quote them too, but are never handed back as memories). While a
memory is revoked, retrieval also leaves out every answer whose turn cited it — by its receipt, or by the `.cites`
record a turn without a receipt left — and every answer citing one of those; the receipt names the revocation, and
it still verifies offline and against the ledger. A restore brings them back. The state of what each turn cited is
derived (index.sqlite's receipt_cites), so an index without it, or replaced under a running engine, is refilled.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import control
from chat.engine import Engine, Turn, TurnError
from control.state import quoting_answers
from receipts.body import parse_receipt
from receipts.verify import PASS
from storage.files.receipts import files
from storage.files.receipts.api import verify_bytes
from webui.mcp_tools import make_tools
from webui.service import Service

from ..forget_support import engine
from ..quoting_model import quoting_engine

MOVE = "I moved to Lisbon in March"
QUESTION = "Where did I move to?"
WORDS = "Lisbon in March"


def _session(data: Path) -> tuple[Engine, Turn]:
    eng = quoting_engine(data)
    eng.remember("alice", MOVE)  # 0
    eng.remember("alice", "I like green tea")  # 1
    first = eng.turn("alice", QUESTION)  # question 2, answer 3
    assert 0 in [h.seq for h in first.hits] and WORDS in first.answer, "the first answer must quote the memory"
    return eng, first


def _statuses(eng: Engine, turn: Turn) -> dict[str, str]:
    report = verify_bytes(turn.receipt_path.read_bytes(), trusted=[eng.key.public_key], data_dir=eng.data_dir)
    return {c.name: c.status for c in report.checks} | {"verdict": report.verdict}


def _exclusions(turn: Turn) -> list[tuple[int, int]]:
    body = parse_receipt(turn.receipt_path.read_bytes()).signed_body
    return [(e["seq"], e["control"]["event"]["seq"]) for e in body.get("exclusions", {}).get("revoked", [])]


def _no_revoked_words(turn: Turn) -> None:
    assert not [h.seq for h in turn.hits if WORDS in h.text], "a memory handed to the model repeats the revoked words"


# -- the pure closure ----------------------------------------------------------------------------------------------
def _edges(pairs: Iterable[tuple[int, int]]):  # type: ignore[no-untyped-def]
    pairs = list(pairs)

    def citing(seqs: Collection[int]) -> list[tuple[int, int]]:
        return [(c, a) for c, a in pairs if c in seqs]

    return citing


class TestQuotingAnswers:
    def test_an_answer_citing_a_revoked_event_is_found_with_that_event(self) -> None:
        assert quoting_answers({0}, _edges([(0, 3), (1, 3), (1, 5)])) == {3: 0}

    def test_an_answer_citing_such_an_answer_is_found_too(self) -> None:
        assert quoting_answers({0}, _edges([(0, 3), (3, 7), (7, 9), (4, 9)])) == {3: 0, 7: 0, 9: 0}

    def test_an_answer_reached_from_two_revoked_events_is_attributed_to_the_lower(self) -> None:
        assert quoting_answers({4, 1}, _edges([(4, 8), (1, 8)])) == {8: 1}
        assert quoting_answers({1, 4}, _edges([(1, 8), (4, 8)])) == {8: 1}

    def test_a_revoked_answer_is_out_by_its_own_revocation_not_as_a_quote(self) -> None:
        assert quoting_answers({0, 3}, _edges([(0, 3), (3, 5)])) == {5: 3}

    def test_nothing_revoked_reads_nothing(self) -> None:
        def never(seqs: Collection[int]) -> list[tuple[int, int]]:
            raise AssertionError("read with nothing revoked")

        assert quoting_answers(set(), never) == {}

    def test_a_cycle_of_citations_ends(self) -> None:  # impossible in a ledger (an answer cites older seqs), but cheap
        assert quoting_answers({0}, _edges([(0, 2), (2, 4), (4, 2)])) == {2: 0, 4: 0}


# -- the engine --------------------------------------------------------------------------------------------------
def test_after_a_revoke_an_answer_that_quoted_the_memory_is_not_handed_to_the_model(tmp_path: Path) -> None:
    eng, first = _session(tmp_path / "d")
    rev = control.revoke(eng.data_dir, "alice", 0, ledger=eng.ledger, key=eng.key)
    again = eng.turn("alice", QUESTION)
    seqs = [h.seq for h in again.hits]
    assert 0 not in seqs and first.assistant_event.seq not in seqs
    _no_revoked_words(again)
    assert WORDS not in again.answer
    # the receipt names the revocation that kept the answer out (the memory alone would not have been in the top K:
    # the answer is what the same search without revocations returns)
    assert _exclusions(again) == [(0, rev.control_seq)]
    statuses = _statuses(eng, again)
    assert statuses["verdict"] == "verified"
    assert statuses["exclusions.records"] == PASS and statuses["ledger.exclusions"] == PASS


def test_a_restore_brings_the_quoting_answer_back(tmp_path: Path) -> None:
    eng, first = _session(tmp_path / "d")
    control.revoke(eng.data_dir, "alice", 0, ledger=eng.ledger, key=eng.key)
    assert first.assistant_event.seq not in [h.seq for h in eng.turn("alice", QUESTION).hits]
    control.restore(eng.data_dir, "alice", 0, ledger=eng.ledger, key=eng.key)
    back = eng.turn("alice", QUESTION)
    assert {0, first.assistant_event.seq} <= {h.seq for h in back.hits}
    assert _exclusions(back) == []


def test_an_answer_that_cited_a_quoting_answer_is_left_out_as_well(tmp_path: Path) -> None:
    eng, first = _session(tmp_path / "d")
    second = eng.turn("alice", "You told me where I moved: say it again")
    assert first.assistant_event.seq in [h.seq for h in second.hits] and WORDS in second.answer
    control.revoke(eng.data_dir, "alice", 0, ledger=eng.ledger, key=eng.key)
    third = eng.turn("alice", "Where did I move to? Say it again")
    seqs = {h.seq for h in third.hits}
    assert not seqs & {0, first.assistant_event.seq, second.assistant_event.seq}
    _no_revoked_words(third)
    assert _statuses(eng, third)["verdict"] == "verified"


def test_an_answer_whose_receipt_was_never_written_is_left_out_by_its_cites_record(tmp_path: Path) -> None:
    data = tmp_path / "d"
    eng = quoting_engine(data)
    eng.remember("alice", MOVE)
    eng.remember("alice", "I like green tea")

    def broken(*_args: object) -> Path:
        raise OSError("disk full")

    eng.write_receipt = broken  # type: ignore[method-assign]
    with pytest.raises(TurnError):
        eng.turn("alice", QUESTION)
    answer = next(ev for ev in eng.ledger.events("alice") if ev.role == "assistant")
    assert WORDS in answer.text and files.list_cites(data, "alice"), "the receipt-less answer and its record"
    control.revoke(data, "alice", 0, ledger=eng.ledger, key=eng.key)
    # a fresh process whose index lost the rows: only the .cites record left behind says what that answer cited
    with eng.index.write() as db:
        db.execute("DELETE FROM receipt_cites")
    eng.index.close()
    fresh = quoting_engine(data)
    turn = fresh.turn("alice", QUESTION)
    assert answer.seq not in [h.seq for h in turn.hits]
    _no_revoked_words(turn)


def test_an_index_from_before_the_cites_table_is_refilled_from_the_receipt_files(tmp_path: Path) -> None:
    eng, first = _session(tmp_path / "d")
    with eng.index.write() as db:
        db.execute("DROP TABLE receipt_cites")  # as an index written before it existed
    eng.index.close()
    control.revoke(tmp_path / "d", "alice", 0)
    fresh = quoting_engine(tmp_path / "d")
    turn = fresh.turn("alice", QUESTION)
    assert first.assistant_event.seq not in [h.seq for h in turn.hits]
    _no_revoked_words(turn)


def test_an_index_replaced_under_a_running_engine_is_refilled_before_the_next_turn(tmp_path: Path) -> None:
    eng, first = _session(tmp_path / "d")
    control.revoke(eng.data_dir, "alice", 0, ledger=eng.ledger, key=eng.key)
    assert first.assistant_event.seq not in [h.seq for h in eng.turn("alice", QUESTION).hits]
    for p in eng.data_dir.glob("index.sqlite*"):  # gone: the engine reopens a new, empty file (its derived tables too)
        p.unlink()
    turn = eng.turn("alice", QUESTION)
    assert first.assistant_event.seq not in [h.seq for h in turn.hits]
    _no_revoked_words(turn)


def test_a_consent_answer_approving_an_answer_that_quotes_a_memory_revoked_since_is_refused(tmp_path: Path) -> None:
    eng, first = _session(tmp_path / "d")
    p = eng.propose("alice", QUESTION)
    assert first.assistant_event.seq in [c.seq for c in p.candidates]
    control.revoke(eng.data_dir, "alice", 0, ledger=eng.ledger, key=eng.key)
    count = eng.ledger.head("alice")[0]
    from chat.consent import ConsentError

    with pytest.raises(ConsentError, match=f"memory seq {first.assistant_event.seq} is an answer that cited seq 0, revoked since"):
        eng.answer(p.token, [first.assistant_event.id], session="alice")
    assert eng.ledger.head("alice")[0] == count


def test_a_proposal_leaves_the_quoting_answer_out_and_its_receipt_names_the_revocation(tmp_path: Path) -> None:
    eng, first = _session(tmp_path / "d")
    rev = control.revoke(eng.data_dir, "alice", 0, ledger=eng.ledger, key=eng.key)
    p = eng.propose("alice", QUESTION)
    assert first.assistant_event.seq not in [c.seq for c in p.candidates] and p.excluded == (0,)
    turn = eng.answer(p.token, [c.event_id for c in p.candidates], session="alice")
    assert _exclusions(turn) == [(0, rev.control_seq)]
    _no_revoked_words(turn)
    assert _statuses(eng, turn)["verdict"] == "verified"


def test_deleting_a_session_drops_what_its_turns_cited(tmp_path: Path) -> None:
    eng, _first = _session(tmp_path / "d")
    assert eng.forget("alice")
    with eng.index.read() as conn:
        assert conn.execute("SELECT count(*) FROM receipt_cites WHERE session = 'alice'").fetchone()[0] == 0


# -- neighbour context: a stated limit (docs/guides/revoke-and-ask-first.md "Revoke and restore", FORMAT.md §17) ---------------------------------
def test_a_revoked_memorys_words_may_make_a_neighbour_match_but_never_reach_the_model(tmp_path: Path) -> None:
    eng = engine(tmp_path / "d")
    eng.remember("alice", MOVE)  # 0
    eng.remember("alice", "I like green tea")  # 1: its context column holds seq 0's words
    control.revoke(eng.data_dir, "alice", 0, ledger=eng.ledger, key=eng.key)
    turn = eng.turn("alice", "Lisbon")
    by_seq = {h.seq: h for h in turn.hits}
    assert 0 not in by_seq
    assert 1 in by_seq and by_seq[1].context_only, "the neighbour matched through the revoked memory's words"
    _no_revoked_words(turn)
    assert "Lisbon" not in "".join(h.text for h in turn.hits if h.seq != turn.user_event.seq)


# -- the property: at no point does a turn hand the model an answer quoting what is revoked now --------------------
TEXTS = ("grey cat Miso", "Lisbon in March", "sister Ana", "cat food brand")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["revoke", "restore", "turn", "turn"]), st.integers(0, 3)), min_size=2, max_size=10))
def test_random_revoke_restore_turn_sequences_never_hand_the_model_a_quote_of_a_revoked_memory(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, int]]
) -> None:
    eng = quoting_engine(tmp_path_factory.mktemp("quotes") / "d")
    for text in TEXTS:
        eng.remember("p", text)
    revoked: set[int] = set()
    for action, target in steps:
        if action == "turn":
            t = eng.turn("p", "what about Miso, Lisbon, Ana and the cat food?", k=8)
            quotes = {TEXTS[s] for s in revoked}  # the model quotes each memory's words
            assert not [h.seq for h in t.hits if h.seq in revoked or any(q in h.text for q in quotes)]
            named = {e["seq"] for e in parse_receipt(t.receipt_path.read_bytes()).signed_body.get("exclusions", {}).get("revoked", [])}
            assert named <= revoked
        elif (action == "revoke") != (target in revoked):
            (control.revoke if action == "revoke" else control.restore)(eng.data_dir, "p", target, ledger=eng.ledger, key=eng.key)
            (revoked.add if action == "revoke" else revoked.discard)(target)


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review4_mcp_search_quoting.py):
# Reviewer finding (issue 28, item 1, at the MCP edge): MCP's search_memories leaves revoked memories out by default
# ("as answers never use them"), but not the answers that quote them — the closure chat.withheld keeps from every model.
# An MCP client is itself a model: the calling agent is handed the revoked words, unlabelled (revoked_by null).
# --------------------------------------------------------------------------------------------------------------------


MARKER = "Quuxborough"


def test_search_memories_leaves_out_answers_that_quote_a_revoked_memory(tmp_path: Path) -> None:
    service = Service(quoting_engine(tmp_path / "data"))
    try:
        tools = {fn.__name__: fn for fn in make_tools(service)}
        key = json.loads(tools["new_session_key"]())["session_key"]
        mem = json.loads(tools["remember"](key, f"my locker code word is {MARKER}"))
        asked = json.loads(tools["ask"](key, "what is my locker code word?"))
        assert MARKER in asked["answer"]  # the model quotes the memory it was handed
        tools["revoke_memory"](key, mem["event_id"])
        found = json.loads(tools["search_memories"](key, "locker code word"))
        leaked = [r for r in found["results"] if MARKER.lower() in r["text"].lower()]
        assert not leaked, f"the revoked words reached the MCP client in {[(r['seq'], r['role'], r['revoked_by']) for r in leaked]}"
    finally:
        service.engine.close()
