"""Replay (issue 34; docs/FORMAT.md §24): every receipt of a scripted session — chat turns, an ask-me-first turn, a
revoke, a supersession, an import, a forget — replays to its committed ranking after more history is added, on files
and on PostgreSQL; a receipt whose ranking was edited and signed again fails replay with the rank that differs; a
receipt whose search saw an event erased since is not replayable and says which, the rest still compared; a receipt
without the commitment is not replayable and says why; `search_as_of` at a question's seq gives its receipt's list."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from chat.citing import Cites
from chat.engine import Engine, Turn
from chat.llm import LLM
from chat.replay import DIFFERS, NOT_REPLAYABLE, REPLAYED, Replay, replay, search_as_of
from control.forget import forget
from control.revocation import restore, revoke
from control.settings import set_consent
from ledger.messages import Message
from receipts import body as rbody
from receipts.body import parse_receipt
from storage.stores import Stores, file_stores, pg_stores

S = "alice"
FACTS = [
    "My sister Ana lives in Lisbon with her two cats",
    "I live in Paris near the canal",
    "The tax form is due on Friday",
    "My brother plays the cello in an orchestra",
    "I booked a train to see my sister in May",
    "Our favourite bakery sells almond croissants",
    "My password hint is the name of my first cat",
    "I work as a nurse at the city hospital",
]


@dataclass
class Scripted:
    engine: Engine
    stores: Stores
    receipts: dict[str, bytes]  # name -> the receipt file as the turn wrote it

    def replay(self, raw: bytes) -> Replay:
        return replay(self.stores, Cites(self.stores), parse_receipt(raw))


def _raw(t: Turn) -> bytes:
    return rbody.dump_file(t.envelope)


@pytest.fixture(scope="module", params=["files", pytest.param("pg", marks=pytest.mark.pg)])
def scripted(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scripted]:
    data = tmp_path_factory.mktemp("replay") / "data"
    data.mkdir()
    if request.param == "files":
        stores = file_stores(data)
    else:
        from tests import pg_support

        server = request.getfixturevalue("pg_server")
        stores = pg_stores(pg_support.fresh_database(server), data, pool_size=2)
    e = Engine(data, llm=LLM(api_key=""), stores=stores)
    got: dict[str, bytes] = {}
    try:
        for text in FACTS:
            e.remember(S, text)
        got["plain"] = _raw(e.turn(S, "Where does my sister live?", k=4))
        revoke(data, S, 6, stores=stores, key=e.key)  # the password hint
        got["revoked"] = _raw(e.turn(S, "What is the name of my first cat?", k=4))
        e.remember(S, "I moved to Berlin last month")  # supersedes "I live in Paris" (chat.supersede)
        got["superseded"] = _raw(e.turn(S, "Where do I live?", k=4))
        got["past"] = _raw(e.turn(S, "Where did I live before?", k=4))
        stores.ledger.append_many(S, [Message("assistant", "Imported note: the cello concert is on Sunday", {"kind": "import"})])
        e.index.index_session(S)
        got["imported"] = _raw(e.turn(S, "When is the cello concert?", k=4))
        set_consent(stores, S, True)
        proposal = e.propose(S, "What does my brother play?", k=4)
        got["consent"] = _raw(e.answer(proposal.token, [c.seq for c in proposal.candidates[:2]]))
        set_consent(stores, S, False)
        later = e.remember(S, "We also like the bakery on Rue Cler for its bread")  # only the next receipt sees it
        got["bakery"] = _raw(e.turn(S, "Which bakery do we like?", k=4))
        # more history after every receipt: turns, a restore, a revoke, a new fact, a forget
        e.turn(S, "Tell me about the croissants again", k=4)
        restore(data, S, 6, stores=stores, key=e.key)
        revoke(data, S, 3, stores=stores, key=e.key)  # the brother
        porto = e.remember(S, "My sister Ana moved to Porto")
        e.turn(S, "Where is my sister now?", k=4)
        # erased, with the answers that cited them: the Porto line no kept receipt saw, the Rue Cler line one did
        forget(data, S, [porto.seq, later.seq], stores=stores, key=e.key)
        got["after-forget"] = _raw(e.turn(S, "Where is my sister now?", k=4))  # its search saw the erased lines as erased
        e.turn(S, "And my brother?", k=4)
        yield Scripted(e, stores, got)
    finally:
        stores.close()


KEPT = ["plain", "revoked", "superseded", "past", "imported", "consent", "after-forget"]


@pytest.mark.parametrize("name", KEPT)
def test_every_receipt_of_the_scripted_session_replays_after_more_history(scripted: Scripted, name: str) -> None:
    got = scripted.replay(scripted.receipts[name])
    assert got.verdict == REPLAYED, got.lines()
    assert got.exit_code == 0 and not got.differences
    body = parse_receipt(scripted.receipts[name]).signed_body
    assert [r.seq for r in got.replayed] == [r["seq"] for r in body["ranking"]["ranked"]]


def test_the_scripted_turns_fired_the_rules_they_were_written_for(scripted: Scripted) -> None:
    rules = {name: parse_receipt(raw).signed_body["ranking"]["rules"] for name, raw in scripted.receipts.items()}
    assert "revoked" in rules["revoked"]
    assert "past-question" in rules["past"]
    assert "consent" in parse_receipt(scripted.receipts["consent"]).signed_body
    revoked = scripted.replay(scripted.receipts["revoked"])
    assert any(lo.seq == 6 and lo.why.startswith("revoked") for lo in revoked.left_out), revoked.lines()


def test_a_receipt_whose_search_saw_an_event_erased_since_is_not_replayable_and_says_which(scripted: Scripted) -> None:
    got = scripted.replay(scripted.receipts["bakery"])
    assert got.verdict == NOT_REPLAYABLE and got.exit_code == 3
    later = parse_receipt(scripted.receipts["bakery"]).signed_body["query"]["event"]["seq"] - 1
    assert any(r.startswith(f"seq {later} was erased") for r in got.reasons), got.reasons
    assert got.committed, "the rest is still compared"


def _resigned(scripted: Scripted, raw: bytes, mutate: Any) -> bytes:
    receipt = parse_receipt(raw)
    body = copy.deepcopy(receipt.signed_body)
    mutate(body["ranking"]["ranked"])
    return rbody.dump_file(rbody.sign_receipt(body, scripted.engine.key, list(receipt.disclosures.values())))


def _swap(r: list[dict[str, Any]]) -> None:
    r[0], r[1] = r[1], r[0]


def _score(r: list[dict[str, Any]]) -> None:
    r[1]["score"] = repr(float(r[1]["score"]) * 1.001)


def _drop(r: list[dict[str, Any]]) -> None:
    r.pop()


@pytest.mark.parametrize(("edit", "rank", "what"), [(_swap, 1, "another memory"), (_score, 2, "another score"), (_drop, 4, "not in the receipt")])
def test_a_resigned_receipt_whose_ranking_was_edited_fails_replay_naming_the_rank(scripted: Scripted, edit: Any, rank: int, what: str) -> None:
    got = scripted.replay(_resigned(scripted, scripted.receipts["plain"], edit))
    assert got.verdict == DIFFERS and got.exit_code == 1
    assert got.differences[0].rank == rank and got.differences[0].what == what, got.lines()


def test_a_receipt_without_the_commitment_is_not_replayable_and_says_why(scripted: Scripted) -> None:
    receipt = parse_receipt(scripted.receipts["plain"])
    body = copy.deepcopy(receipt.signed_body)
    del body["ranking"]
    old = rbody.dump_file(rbody.sign_receipt(body, scripted.engine.key, list(receipt.disclosures.values())))
    got = scripted.replay(old)
    assert got.verdict == NOT_REPLAYABLE and "without a ranking commitment" in got.reasons[0]


def test_search_as_of_a_questions_seq_gives_its_receipts_memories(scripted: Scripted) -> None:
    for name in ("plain", "revoked", "imported"):
        body = parse_receipt(scripted.receipts[name]).signed_body
        q = body["query"]["event"]["seq"]
        assert body["ranking"]["controls"] == q + 1, "the question made no supersession record"
        (question,) = scripted.stores.ledger.read_events(S, [q])
        got = search_as_of(scripted.stores, Cites(scripted.stores), S, question.text, body["k"], q)
        assert [h.seq for h in got.hits] == [m["event"]["seq"] for m in body["memories"]], name


def test_a_copy_with_a_memory_withheld_still_replays(scripted: Scripted) -> None:
    from receipts import redact

    raw = scripted.receipts["plain"]
    first = parse_receipt(raw).signed_body["memories"][0]["event"]["seq"]
    copy_ = redact(raw, [first])
    assert first not in parse_receipt(copy_).disclosures  # its text is gone from the copy; its seq and score are signed
    got = scripted.replay(copy_)
    assert got.verdict == REPLAYED and got.committed[0].seq == first, got.lines()
