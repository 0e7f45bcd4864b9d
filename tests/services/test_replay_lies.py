"""Replay must never say "replayed" for a ranking the turn's search does not reproduce (issue 34; docs/FORMAT.md §24).

A producer that signs its own receipts can make `indexed` and `controls` name another prefix than the one a turn
searches, and rank over that prefix so the list is self-consistent: the memory it hides (the newest, most relevant
statement; a supersession its question made) then never shows up in the replay unless the replay holds the sizes
to the question and the answer they belong to. Each test is such a producer, built from the real engine with one
step swapped, and shows the replay refuses its receipt. And what a hostile review found besides: a session's first turn
(an empty prefix), an index that cannot be built (one line, no folder left), and a replay that must not depend on the
deployment's own index (deleted, not caught up)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import chat.consent
import chat.engine
from chat.citing import Cites
from chat.engine import Engine
from chat.llm import LLM
from chat.replay import REPLAYED, replay
from chat.retrieve import Retrieved, retrieve
from control.settings import set_consent
from control.state import derive
from ledger.messages import Message
from receipts import body as rbody
from receipts.body import parse_receipt
from storage.asof import prefix_index
from storage.offline import verify_bytes
from storage.stores import Stores, file_stores

S = "bob"
FACTS = ["The tax form is due on Friday", "My brother plays the cello", "Our bakery sells almond croissants"]
HIDDEN = "My favourite colour is green, a deep forest green"
QUESTION = "What is my favourite colour?"


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[tuple[Engine, Stores]]:
    data = tmp_path / "data"
    data.mkdir()
    stores = file_stores(data)
    try:
        yield Engine(data, llm=LLM(api_key=""), stores=stores), stores
    finally:
        stores.close()


def _prefix_search(e: Engine, session: str, message: str, k: int, size: int, controls: int) -> Retrieved:
    """What a lying producer ranks: the index of the first `size` events, the control state of the first `controls`."""
    state = derive(ev for ev in e.ledger.events(session) if ev.seq < controls)
    with prefix_index(e.ledger, session, size, e.index.config) as idx:
        return retrieve(idx, e.cites, state, session, message, k, [])


def _verdict(e: Engine, stores: Stores, raw: bytes) -> tuple[str, list[str]]:
    got = replay(stores, Cites(stores), parse_receipt(raw))
    assert got.verdict != REPLAYED or not any(d.rank == 0 for d in got.differences)
    return got.verdict, got.lines()


def test_a_turn_whose_receipt_claims_its_index_held_less_than_the_events_before_its_question_is_not_replayed(
    engine: tuple[Engine, Stores], monkeypatch: pytest.MonkeyPatch
) -> None:
    e, stores = engine
    for text in [*FACTS, HIDDEN]:
        e.remember(S, text)
    e.turn(S, QUESTION, k=2)

    real_part = chat.engine.ranking_part

    def lying_part(**kw: Any) -> dict[str, Any]:
        return real_part(**{**kw, "indexed": kw["indexed"] - 1})  # "the index had not caught up": seq q-1 unseen

    def lying_retrieve(self: Engine, session: str, message: str, k: int, also: list[int], *, mark_earlier: bool = False) -> Retrieved:
        q = also[0]
        return _prefix_search(self, session, message, k, q - 1, self.ledger.head(session)[0])

    monkeypatch.setattr(chat.engine, "ranking_part", lying_part)
    monkeypatch.setattr(Engine, "_retrieve_all", lying_retrieve)
    e.remember(S, "My favourite colour is now a bright yellow")  # the newest statement: the lie hides it
    raw = rbody.dump_file(e.turn(S, QUESTION, k=2).envelope)
    body = parse_receipt(raw).signed_body
    q = body["query"]["event"]["seq"]
    assert body["ranking"]["indexed"] == q - 1 and q - 1 not in [r["seq"] for r in body["ranking"]["ranked"]]
    verdict, lines = _verdict(e, stores, raw)
    assert verdict != REPLAYED and any("indexed" in x for x in lines), lines
    assert verify_bytes(raw, trusted=[e.key.public_key], data_dir=str(e.data_dir)).verdict == "failed"


def test_a_turn_whose_receipt_leaves_its_questions_supersession_out_of_controls_is_not_replayed(
    engine: tuple[Engine, Stores], monkeypatch: pytest.MonkeyPatch
) -> None:
    e, stores = engine
    for text in [*FACTS, "I live in Paris near the canal"]:
        e.remember(S, text)
    real_part = chat.engine.ranking_part

    def lying_part(**kw: Any) -> dict[str, Any]:
        return real_part(**{**kw, "controls": kw["indexed"] + 1})  # the state before the question's own record

    def lying_retrieve(self: Engine, session: str, message: str, k: int, also: list[int], *, mark_earlier: bool = False) -> Retrieved:
        q = also[0]
        return _prefix_search(self, session, message, k, q, q + 1)

    monkeypatch.setattr(chat.engine, "ranking_part", lying_part)
    monkeypatch.setattr(Engine, "_retrieve_all", lying_retrieve)
    raw = rbody.dump_file(e.turn(S, "I moved to Berlin last month. Where do I live?", k=4).envelope)
    body = parse_receipt(raw).signed_body
    q, answer = body["query"]["event"]["seq"], body["response"]["event"]["seq"]
    assert answer > q + 1, "the question made a supersession record"
    assert 3 in [r["seq"] for r in body["ranking"]["ranked"]], "the superseded Paris line ranks under the lie"
    verdict, lines = _verdict(e, stores, raw)
    assert verdict != REPLAYED and any(f"control record at seq {q + 1}" in x for x in lines), lines


def test_a_receipt_resigned_with_controls_past_its_answer_is_not_replayed(engine: tuple[Engine, Stores]) -> None:
    e, stores = engine
    for text in FACTS:
        e.remember(S, text)
    raw = rbody.dump_file(e.turn(S, "When is the tax form due?", k=2).envelope)
    e.turn(S, "And the cello?", k=2)  # later history the lie points its control state at
    receipt = parse_receipt(raw)
    body = copy.deepcopy(receipt.signed_body)
    body["ranking"]["controls"] = stores.ledger.head(S)[0]
    forged = rbody.dump_file(rbody.sign_receipt(body, e.key, list(receipt.disclosures.values())))
    verdict, lines = _verdict(e, stores, forged)
    assert verdict != REPLAYED, lines
    assert verify_bytes(forged, trusted=[e.key.public_key], data_dir=str(e.data_dir)).verdict == "failed"


def test_a_consent_turn_whose_receipt_claims_its_proposal_saw_less_of_the_ledger_is_not_replayed(
    engine: tuple[Engine, Stores], monkeypatch: pytest.MonkeyPatch
) -> None:
    e, stores = engine
    for text in [*FACTS, HIDDEN]:
        e.remember(S, text)
    real_part = chat.consent.ranking_part

    def lying_part(**kw: Any) -> dict[str, Any]:
        return real_part(**{**kw, "indexed": kw["indexed"] - 1, "controls": kw["controls"] - 1})

    def lying_retrieve(self: Engine, session: str, message: str, k: int, also: list[int], *, mark_earlier: bool = False) -> Retrieved:
        size = self.ledger.head(session)[0] - 1
        return _prefix_search(self, session, message, k, size, size)

    monkeypatch.setattr(chat.consent, "ranking_part", lying_part)
    monkeypatch.setattr(Engine, "_retrieve_all", lying_retrieve)
    set_consent(stores, S, True)
    proposal = e.propose(S, QUESTION, k=2)
    assert 3 not in [c.seq for c in proposal.candidates], "the lie hides the colour"
    raw = rbody.dump_file(e.answer(proposal.token, [c.seq for c in proposal.candidates[:1]]).envelope)
    assert parse_receipt(raw).signed_body["ranking"]["indexed"] == 3
    verdict, lines = _verdict(e, stores, raw)
    assert verdict != REPLAYED and any("written before it" in x for x in lines), lines


def test_an_honest_consent_turn_with_events_between_proposal_and_answer_still_replays(engine: tuple[Engine, Stores]) -> None:
    e, stores = engine
    for text in [*FACTS, HIDDEN]:
        e.remember(S, text)
    set_consent(stores, S, True)
    proposal = e.propose(S, QUESTION, k=2)
    e.remember(S, "A green door is on our house")  # written after the proposal: its search did not see it
    raw = rbody.dump_file(e.answer(proposal.token, [c.seq for c in proposal.candidates[:1]]).envelope)
    body = parse_receipt(raw).signed_body
    assert body["ranking"]["indexed"] == 4 < body["query"]["event"]["seq"]
    verdict, lines = _verdict(e, stores, raw)
    assert verdict == REPLAYED, lines


def test_the_first_turn_of_a_session_replays_over_an_empty_prefix(engine: tuple[Engine, Stores]) -> None:
    e, stores = engine
    raw = rbody.dump_file(e.turn(S, QUESTION, k=2).envelope)
    assert parse_receipt(raw).signed_body["ranking"]["indexed"] == 0
    verdict, lines = _verdict(e, stores, raw)
    assert verdict == REPLAYED, lines


def test_search_as_of_size_zero_is_the_empty_memory_not_an_error(engine: tuple[Engine, Stores]) -> None:
    from chat.replay import search_as_of

    e, stores = engine
    for text in FACTS:
        e.remember(S, text)
    got = search_as_of(stores, Cites(stores), S, "tax form", 2, 0)
    assert got.hits == [] and got.rules == ()


def test_a_prefix_index_that_cannot_be_built_is_one_line_and_leaves_no_temporary_folder(
    engine: tuple[Engine, Stores], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import sqlite3
    import tempfile

    from storage.asof import PrefixUnavailable
    from storage.files.retrieval.db import Index

    e, stores = engine
    for text in FACTS:
        e.remember(S, text)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))

    def broken(self: Index, session: str, events: object = None) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    with monkeypatch.context() as m:
        m.setattr(Index, "index_session", broken)
        with pytest.raises(PrefixUnavailable, match=r"could not be indexed \(OperationalError\)"), prefix_index(e.ledger, S, 2, e.index.config):
            pass
    with pytest.raises(KeyError), prefix_index(e.ledger, S, 2, e.index.config):
        raise KeyError("the caller's own error passes as it is")
    assert list(scratch.iterdir()) == []


def test_a_replay_does_not_depend_on_the_deployments_index_deleted_and_not_caught_up(tmp_path: Path) -> None:
    from control.revocation import revoke
    from ledger.messages import Message

    data = tmp_path / "data"
    data.mkdir()
    stores = file_stores(data)
    e = Engine(data, llm=LLM(api_key=""), stores=stores)
    try:
        for text in ["My locker code is 4711", "My sister lives in Lisbon"]:
            e.remember(S, text)
        # a line no turn's cites account for: withheld while anything before it is revoked (chat.withheld)
        stores.ledger.append_many(S, [Message("assistant", "Imported: your locker code 4711 is noted", {"kind": "import"})])
        e.index.index_session(S)
        revoke(data, S, 0, stores=stores, key=e.key)
        raw = rbody.dump_file(e.turn(S, "What is my locker code?", k=4).envelope)
        assert parse_receipt(raw).signed_body["ranking"]["rules"] == ["quotes-revoked", "revoked"]
    finally:
        e.close()
        stores.close()
    (data / "index.sqlite").unlink()
    fresh = file_stores(data)
    try:
        verdict, lines = _verdict(e, fresh, raw)
    finally:
        fresh.close()
    assert verdict == REPLAYED, lines


def test_a_receipt_whose_configuration_name_is_not_the_one_its_hash_is_of_is_not_replayed(engine: tuple[Engine, Stores]) -> None:
    e, stores = engine
    for text in FACTS:
        e.remember(S, text)
    receipt = parse_receipt(rbody.dump_file(e.turn(S, "When is the tax form due?", k=2).envelope))
    body = copy.deepcopy(receipt.signed_body)
    body["ranking"]["config"] = "vector-search/v9"  # the hash is left as it was: the deployment's own
    forged = rbody.dump_file(rbody.sign_receipt(body, e.key, list(receipt.disclosures.values())))
    verdict, lines = _verdict(e, stores, forged)
    assert verdict != REPLAYED and any("vector-search/v9" in x for x in lines), lines


def test_a_consent_turn_whose_next_event_came_right_after_the_proposals_search_still_replays(
    engine: tuple[Engine, Stores], monkeypatch: pytest.MonkeyPatch
) -> None:
    e, stores = engine
    for text in [*FACTS, HIDDEN]:
        e.remember(S, text)
    set_consent(stores, S, True)
    real = Engine._retrieve_all

    def then_another_writer(self: Engine, session: str, message: str, k: int, also: list[int]) -> Retrieved:
        got = real(self, session, message, k, also)
        stores.ledger.append_many(S, [Message("user", "Written by another request as the search ends", {})])
        return got

    monkeypatch.setattr(Engine, "_retrieve_all", then_another_writer)
    proposal = e.propose(S, QUESTION, k=2)
    monkeypatch.setattr(Engine, "_retrieve_all", real)
    raw = rbody.dump_file(e.answer(proposal.token, [c.seq for c in proposal.candidates[:1]]).envelope)
    verdict, lines = _verdict(e, stores, raw)
    assert verdict == REPLAYED, lines
