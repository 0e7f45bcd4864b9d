"""The offline stand-in's own replies are never handed back as memories (issue 31).

A stand-in reply is a label and quotes of memories the session already holds. It stays in the ledger (the record of
what was said; the chain and every receipt still verify), but no turn, proposal, Manual search or MCP search hands it
back: it is left out by seq before the search's limit (chat.stand_ins), so a pile of them never crowds a statement out
of the candidates either. What is known of a session is trusted only while its ledger holds the same events.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chat.engine import Engine
from chat.llm import LLM
from chat.offline import is_stand_in_reply
from receipts.verify import PASS
from storage.api import file_ledger
from storage.files.receipts.api import verify_bytes
from webui.mcp_tools import make_tools
from webui.service import Service

SISTER = "My sister is called Ana"


def offline(data: Path) -> Engine:
    return Engine(data, llm=LLM(api_key=""))


def stand_in_seqs(eng: Engine, session: str) -> set[int]:
    return {ev.seq for ev in eng.ledger.events(session) if is_stand_in_reply(ev.role, ev.meta)}


@pytest.fixture
def eng(tmp_path: Path) -> Engine:
    e = offline(tmp_path / "d")
    yield e
    e.close()


def nine_events(eng: Engine) -> None:
    """The issue's session: a statement, then four stand-in turns about it (9 events)."""
    eng.remember("alice", SISTER)
    for q in ("Who is my sister?", "What is my sister's name?", "Tell me about my sister", "Is Ana my sister?"):
        eng.turn("alice", q)


class TestPredicate:
    @pytest.mark.parametrize(
        ("role", "meta", "expected"),
        [
            ("assistant", {"kind": "chat", "receipt_id": "rcpt_x", "provider": "offline", "model": "offline-stand-in"}, True),
            ("assistant", {"kind": "chat", "receipt_id": "rcpt_x", "provider": "groq", "model": "m"}, False),
            ("assistant", {"provider": "offline"}, False),  # not written by a turn (imported, or a person's line)
            ("user", {"kind": "chat", "receipt_id": "rcpt_x", "provider": "offline"}, False),
            ("assistant", None, False),
            ("assistant", {}, False),
        ],
    )
    def test_only_an_answer_a_turn_wrote_with_the_stand_in_is_one(self, role: str, meta: dict | None, expected: bool) -> None:
        assert is_stand_in_reply(role, meta) is expected


class TestNeverHandedBack:
    def test_what_is_my_sister_called_is_handed_the_statement_and_no_stand_in_reply(self, eng: Engine) -> None:
        nine_events(eng)
        replies = stand_in_seqs(eng, "alice")
        assert len(replies) == 4 and eng.ledger.head("alice")[0] == 9
        unfiltered = {h.seq for h in eng.index.search("alice", "What is my sister called?", 8).results}
        assert unfiltered & replies, "the index still holds them: without the rule they would be handed over"
        turn = eng.turn("alice", "What is my sister called?")
        seqs = [h.seq for h in turn.hits]
        assert 0 in seqs and not set(seqs) & replies
        assert not [m for m in turn.body["memories"] if m["event"]["seq"] in replies]
        report = verify_bytes(turn.receipt_path.read_bytes(), trusted=[eng.key.public_key], data_dir=eng.data_dir)
        assert report.verdict == "verified" and all(c.status == PASS for c in report.checks)

    def test_they_stay_in_the_ledger_and_the_chain_verifies(self, eng: Engine) -> None:
        nine_events(eng)
        eng.turn("alice", "What is my sister called?")
        assert len(stand_in_seqs(eng, "alice")) == 5
        assert eng.ledger.verify("alice").ok

    def test_a_proposal_never_offers_one(self, eng: Engine) -> None:
        nine_events(eng)
        p = eng.propose("alice", "What is my sister called?")
        assert 0 in [c.seq for c in p.candidates]
        assert not {c.seq for c in p.candidates} & stand_in_seqs(eng, "alice")

    def test_manual_search_and_mcp_search_never_return_one(self, eng: Engine) -> None:
        service = Service(eng)
        tools = {fn.__name__: fn for fn in make_tools(service)}
        key = json.loads(tools["new_session_key"]())["session_key"]
        tools["remember"](key, SISTER)
        for q in ("Who is my sister?", "What is my sister's name?"):
            tools["ask"](key, q)
        session = service.session(key)
        replies = stand_in_seqs(eng, session)
        assert len(replies) == 2
        page = service.search(key, "sister Ana", 8)
        found = json.loads(tools["search_memories"](key, "sister Ana"))
        assert 0 in [h.seq for h in page.results] and not {h.seq for h in page.results} & replies
        assert 0 in [r["seq"] for r in found["results"]] and not {r["seq"] for r in found["results"]} & replies

    def test_a_pile_of_them_never_crowds_a_statement_out_of_the_candidates(self, eng: Engine) -> None:
        """More stand-in replies matching the question than the search's candidate pool (40 for K=1) holds, each a
        better BM25 match than the statement: left out only after the limit, the statement would never be found."""
        eng.remember("alice", "Ana, my sister, lives in Porto near the old harbour with two cats and a parrot called Kiwi")
        quote = "- (seq 0, user) sister Ana sister Ana"
        for i in range(45):
            eng.ledger.append(
                "alice", "assistant", f"[Offline stand-in — no language model wrote this reply: test]\n{quote}",
                {"kind": "chat", "receipt_id": f"rcpt_{i:032x}", "provider": "offline", "model": "offline-stand-in"},
            )
        eng.index.index_session("alice")
        assert 0 not in [h.seq for h in eng.index.search("alice", "sister Ana", 1).results]
        turn = eng.turn("alice", "sister Ana", k=1)
        assert [h.seq for h in turn.hits] == [0]


class TestWhatIsKnown:
    def test_a_session_made_anew_under_the_same_name_is_read_again(self, tmp_path: Path) -> None:
        """What one engine learnt of a session (the stand-in replies at seqs 2..10) is dropped once the ledger no
        longer holds the event it read last: another process deleted the session and wrote statements at those seqs.
        (A file ledger's own writer refuses a rewritten session outright; what is known is read here through a fresh
        ledger object, as a PostgreSQL reader sees the rows.)"""
        data = tmp_path / "d"
        first, second = offline(data), offline(data)
        try:
            nine_events(first)
            first.turn("alice", "What is my sister called?")
            known = first.stand_ins
            assert known.known("alice") == [2, 4, 6, 8, 10]
            assert second.forget("alice")
            for i in range(12):
                second.remember("alice", f"My sister Ana told me fact number {i}")
            known.ledger = file_ledger(data)
            assert known.known("alice") == []
            second.turn("alice", "sister Ana fact number")  # a stand-in reply at seq 13
            assert known.known("alice") == [13] == sorted(stand_in_seqs(second, "alice"))
        finally:
            first.close()
            second.close()

    def test_a_session_deleted_since_is_known_to_hold_none(self, tmp_path: Path) -> None:
        data = tmp_path / "d"
        first, second = offline(data), offline(data)
        try:
            nine_events(first)
            first.turn("alice", "What is my sister called?")
            assert first.stand_ins.known("alice")
            assert second.forget("alice")  # another engine (the idle sweep, another process)
            assert first.stand_ins.known("alice") == []
            got = first.stand_ins.left_out("alice", lambda skip: first.index.search("alice", "sister", 8, exclude_seqs=skip), lambda r: r.results)
            assert got.results == []
        finally:
            first.close()
            second.close()

    def test_the_first_read_parses_no_line_but_those_holding_the_provider(self, eng: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
        nine_events(eng)
        eng.turn("alice", "What is my sister called?")
        want = sorted(stand_in_seqs(eng, "alice"))
        assert want

        def events(session: str, start_seq: int = 0):  # type: ignore[no-untyped-def]
            raise AssertionError("every event parsed")

        monkeypatch.setattr(eng.ledger, "events", events)
        from chat.stand_ins import StandIns

        assert StandIns(eng.ledger).read("alice") == want  # a new process's first read

    def test_each_turn_reads_only_what_was_appended_since(self, eng: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
        nine_events(eng)
        eng.turn("alice", "What is my sister called?")
        starts: list[int] = []
        real = eng.ledger.events_with_meta

        def events_with_meta(session: str, key: str, value: str, start: int, stop: int):  # type: ignore[no-untyped-def]
            starts.append(start)
            return real(session, key, value, start, stop)

        monkeypatch.setattr(eng.ledger, "events_with_meta", events_with_meta)
        count = eng.ledger.head("alice")[0]
        eng.turn("alice", "What is my sister called?")
        assert starts and min(starts) >= count - 1


class TestReplay:
    """A receipt commits to its ranking (FORMAT.md §24) and a replay re-runs the turn's retrieval (chat.retrieve): the
    stand-in rule is inside it, so a turn it shaped replays; a turn ranked before the rule (its list holds a stand-in
    reply) replays as it ran."""

    def test_a_turn_the_rule_shaped_replays(self, eng: Engine) -> None:
        from chat.citing import Cites
        from chat.replay import REPLAYED, replay
        from receipts.body import parse_receipt

        nine_events(eng)
        replies = stand_in_seqs(eng, "alice")
        assert {h.seq for h in eng.index.search("alice", "What is my sister called?", 8).results} & replies
        turn = eng.turn("alice", "What is my sister called?")
        assert not {r["seq"] for r in turn.body["ranking"]["ranked"]} & replies
        got = replay(eng.stores, Cites(eng.stores), parse_receipt(turn.receipt_path.read_bytes()))
        assert got.verdict == REPLAYED, got.lines()

    def test_a_turn_ranked_before_the_rule_replays_as_it_ran(self, eng: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
        import functools

        import chat.engine
        from chat.citing import Cites
        from chat.replay import REPLAYED, replay
        from chat.retrieve import retrieve
        from receipts.body import parse_receipt

        nine_events(eng)
        replies = stand_in_seqs(eng, "alice")
        eng.stand_ins = None  # type: ignore[assignment]  # the engine before the rule
        monkeypatch.setattr(chat.engine, "retrieve", functools.partial(retrieve, echoes_take_slots=True))  # and before echoes took no slot
        turn = eng.turn("alice", "What is my sister called?")
        assert {r["seq"] for r in turn.body["ranking"]["ranked"]} & replies
        got = replay(eng.stores, Cites(eng.stores), parse_receipt(turn.receipt_path.read_bytes()))
        assert got.verdict == REPLAYED, got.lines()
