"""The turn engine on both backends (files in DATA_DIR and PostgreSQL through storage.stores): the same turns, the
same receipts, the same forgetting. `stores` gives a fresh deployment of each kind; `reopen` a second engine over the
same stores' place (another process, or another replica on the same database).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from chat.engine import Engine, InputError, TurnError
from chat.llm import LLM
from chat.offline import is_stand_in_reply
from receipts.body import parse_receipt
from storage import BackendError, redact
from storage.files.receipts.api import verify_bytes
from storage.stores import Stores, file_stores, open_stores, pg_stores

Opener = Callable[[], Engine]


@pytest.fixture(params=["files", pytest.param("postgresql", marks=pytest.mark.pg)])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    engines: list[Engine] = []
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    key_dir = tmp_path / "replica-0"

    def open_engine() -> Engine:
        data = tmp_path / f"replica-{len(engines)}"  # each replica its own DATA_DIR (keys, caches); one key for all
        data.mkdir(exist_ok=True)
        stores = file_stores(key_dir) if url is None else pg_stores(url, data, receipt_copies=True)
        first = engines[0].key if engines else None
        eng = Engine(stores.data_dir, stores=stores, llm=LLM(api_key=""), key=first)
        engines.append(eng)
        return eng

    yield open_engine
    for eng in engines:
        eng.close()


def receipt_bytes(eng: Engine, session: str, receipt_id: str) -> bytes:
    return eng.backend.read_receipt(session, receipt_id)


class TestStandInReplies:
    def test_the_offline_stand_ins_replies_are_never_handed_back_on_either_backend(self, opener: Opener) -> None:
        """Issue 31: they stay in the ledger; a turn and a proposal leave them out (chat.stand_ins), here or on a
        replica that never saw them written."""
        a, b = opener(), opener()
        a.remember("s1", "My sister is called Ana")
        for q in ("Who is my sister?", "What is my sister's name?"):
            a.turn("s1", q)
        replies = {ev.seq for ev in a.ledger.events("s1") if is_stand_in_reply(ev.role, ev.meta)}
        assert replies == {2, 4}
        assert {h.seq for h in a.index.search("s1", "What is my sister called?", 8).results} & replies
        for eng in (a, b):
            turn = eng.turn("s1", "What is my sister called?")
            assert 0 in [h.seq for h in turn.hits] and not {h.seq for h in turn.hits} & replies
            assert not {c.seq for c in eng.propose("s1", "my sister Ana").candidates} & replies
        assert b.stand_ins.known("s1") == [2, 4, 6, 8]


class TestTurns:
    def test_a_turn_cites_what_was_remembered_and_its_receipt_verifies_offline(self, opener: Opener) -> None:
        eng = opener()
        eng.remember("alice", "my cat is called Miso and she likes tuna")
        eng.remember("alice", "I work as a nurse in Leeds")
        turn = eng.turn("alice", "what is my cat called?", k=2)
        assert [h.seq for h in turn.hits][0] == 0
        raw = receipt_bytes(eng, "alice", turn.receipt_id)
        assert turn.receipt_path.is_file() and turn.receipt_path.read_bytes() == raw  # the copy a visitor keeps
        report = verify_bytes(raw, trusted=[eng.key.public_key])
        assert report.verdict == "verified", report.failed
        body = parse_receipt(raw).body
        assert body["response"]["event"]["seq"] == 3 and body["checkpoint"]["body"]["tree_size"] == 4

    def test_every_acknowledged_event_is_under_the_latest_signed_checkpoint(self, opener: Opener) -> None:
        eng = opener()
        eng.remember("s1", "a first note about the garden")
        eng.turn("s1", "what about the garden?")
        cp = eng.backend.latest_checkpoint("s1")
        count, head = eng.ledger.head("s1")
        assert cp is not None and cp["body"]["tree_size"] == count == 3 and cp["body"]["chain_head"] == head

    def test_a_second_engine_on_the_same_place_continues_the_same_chain(self, opener: Opener) -> None:
        a, b = opener(), opener()
        a.remember("s1", "the boat is moored at the north pier")
        t1 = b.turn("s1", "where is the boat moored?", k=1)
        t2 = a.turn("s1", "and the pier, which one?", k=1)
        assert t1.assistant_event.seq + 1 == t2.user_event.seq
        assert a.ledger.verify("s1").ok and b.ledger.verify("s1").ok
        assert {t1.receipt_id, t2.receipt_id} <= set(a.backend.receipt_ids("s1"))
        assert [h.seq for h in t1.hits] == [0]

    def test_sessions_never_see_each_others_memories(self, opener: Opener) -> None:
        eng = opener()
        eng.remember("alice", "the secret word is pelican")
        eng.remember("bob", "I keep a pelican sticker on my laptop")
        turn = eng.turn("bob", "what is the secret word pelican?", k=8)
        assert all(h.session == "bob" for h in turn.hits)
        assert all("secret word" not in ev.text for ev in eng.ledger.read_events("bob", [h.seq for h in turn.hits]))

    def test_bad_input_is_refused_before_anything_is_written(self, opener: Opener) -> None:
        eng = opener()
        for session, message in [("../etc", "hello"), ("ok", ""), ("ok", "x" * 9000)]:
            with pytest.raises(InputError):
                eng.turn(session, message)
        assert not eng.ledger.exists("ok")

    def test_a_receipt_that_cannot_be_stored_withholds_the_answer_and_leaves_a_note(self, opener: Opener) -> None:
        eng = opener()

        def broken(*_a: object) -> Path:
            raise OSError("no space left")

        eng.write_receipt = broken
        with pytest.raises(TurnError, match="receipt could not be written"):
            eng.turn("s1", "will this be answered?")
        events = list(eng.ledger.events("s1"))
        assert [e.role for e in events] == ["user", "assistant", "system"] and events[-1].meta["kind"] == "receipt_failure"
        assert eng.ledger.verify("s1").ok and eng.backend.receipt_ids("s1") == []


class TestForget:
    def test_forgetting_a_session_removes_its_events_receipts_rows_and_checkpoint(self, opener: Opener) -> None:
        eng = opener()
        eng.remember("gone", "the alarm code is 4711")
        turn = eng.turn("gone", "what is the alarm code?")
        eng.remember("kept", "the alarm code of the shed is 1234")
        assert eng.forget("gone") is True
        assert not eng.ledger.exists("gone") and eng.backend.receipt_ids("gone") == []
        assert eng.backend.latest_checkpoint("gone") is None
        assert eng.rows.citing_answers("gone", [0, 1]) == []
        assert eng.index.search("gone", "alarm code", 8).results == []
        assert [h.session for h in eng.index.search("kept", "alarm code", 8).results] == ["kept"]
        with pytest.raises(OSError):
            eng.backend.read_receipt("gone", turn.receipt_id)
        again = eng.turn("gone", "a new start under the same name")
        assert again.user_event.seq == 0 and again.hits == []  # nothing of the old session is inherited

    def test_an_idle_check_keeps_a_session_written_after_the_cutoff(self, opener: Opener) -> None:
        eng = opener()
        cutoff = time.time() - 3600
        eng.remember("busy", "written just now")
        assert eng.forget("busy", idle_before=cutoff) is False and eng.ledger.exists("busy")
        assert eng.forget("busy", idle_before=time.time() + 5) is True and not eng.ledger.exists("busy")
        assert eng.forget("never-was", idle_before=time.time()) is False


@pytest.mark.pg
def test_open_stores_follows_database_url(pg_url: str, tmp_path: Path) -> None:
    with open_stores(tmp_path, environ={"DATABASE_URL": pg_url}) as pg:
        assert pg.kind == "postgresql" and pg.where == redact(pg_url)
    with open_stores(tmp_path, environ={}) as files:
        assert files.kind == "files" and files.where == str(tmp_path)


def test_a_database_url_that_is_not_postgresql_is_refused_naming_it_without_the_password(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="postgresql://") as err:
        open_stores(tmp_path, environ={"DATABASE_URL": "mysql://me:hunter2@db/x"})
    assert "hunter2" not in str(err.value)


def test_an_unreachable_database_is_a_backend_error_without_the_password(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    with pytest.raises(BackendError) as err:
        open_stores(tmp_path, f"postgresql://me:hunter2@127.0.0.1:{port}/x").close()
    assert "hunter2" not in str(err.value) and "127.0.0.1" in str(err.value)
    assert time.monotonic() - t0 < 30


def test_stores_close_is_idempotent(tmp_path: Path) -> None:
    s: Stores = file_stores(tmp_path)
    s.close()
    s.close()
