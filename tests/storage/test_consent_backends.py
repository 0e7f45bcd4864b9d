"""Ask me first on both backends (files and PostgreSQL), across replicas: chat.consent's proposals and
control.settings' switch.

`deploy` gives, for each backend, `replica()`: a new Engine over the same memory — on files a second Engine on the
same data directory (a second process's view), on PostgreSQL a second Engine with its own data directory and its
own pool on the same database (a second app replica; they share only the database and the signing key). A token
proposed on one replica is spent once, on either; the setting one replica stores is the one the other reads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from chat.consent import TOKEN_TTL, ConsentError, proposal_store
from chat.engine import Engine, InputError
from chat.llm import LLM
from control.settings import (
    ConsentRequired,
    SettingsError,
    forget_settings,
    get_consent,
    refuse_direct_turn,
    set_consent,
)
from storage.common.keyfiles import load_or_create
from storage.pg import sql
from storage.stores import Stores, file_stores, pg_stores

QUESTION = "Tell me about my cat Miso and Lisbon"
MEMORIES = ["I adopted a grey cat named Miso", "I moved to Lisbon in March", "Miso the cat sleeps all day in Lisbon"]


@dataclass
class Deployment:
    kind: str
    root: Path
    url: str | None
    opened: list[Any] = field(default_factory=list)
    n: int = 0

    def stores(self) -> Stores:
        """A new Stores over the same memory (on PostgreSQL with a data directory of its own)."""
        self.n += 1
        if self.url is None:
            st = file_stores(self.root / "data")
        else:
            st = pg_stores(self.url, self.root / f"replica{self.n}")
        self.opened.append(st)
        return st

    def replica(self) -> Engine:
        st = self.stores()
        return Engine(st.data_dir, llm=LLM(api_key=""), key=load_or_create(self.root / "key"), stores=st)

    def kept_questions(self) -> list[str]:
        """Every stored proposal that still holds the question text (files, or rows)."""
        if self.url is None:
            folder = self.root / "data" / "proposals"
            return [f.name for f in folder.iterdir() if f.is_file() and QUESTION.encode() in f.read_bytes()] if folder.is_dir() else []
        with psycopg.connect(self.url) as conn:
            return [r[0] for r in conn.execute("SELECT nonce FROM consent_proposals WHERE strpos(pending, %s) > 0", (QUESTION,))]


@pytest.fixture(params=["file", pytest.param("pg", marks=pytest.mark.pg)])
def deploy(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Deployment]:
    url = request.getfixturevalue("pg_url") if request.param == "pg" else None
    d = Deployment(request.param, tmp_path, url)
    yield d
    for st in d.opened:
        st.close()


@pytest.fixture
def two(deploy: Deployment) -> tuple[Engine, Engine]:
    a = deploy.replica()
    for text in MEMORIES:
        a.remember("alice", text)
    a.remember("bob", "Bob keeps bees")
    return a, deploy.replica()


def events(e: Engine, session: str = "alice") -> int:
    return int(e.ledger.head(session)[0])


class TestTokensAcrossReplicas:
    def test_a_token_proposed_on_one_replica_is_answered_on_another_once(self, two: tuple[Engine, Engine]) -> None:
        a, b = two
        p = a.propose("alice", QUESTION, k=2)
        turn = b.answer(p.token, [p.candidates[0].event_id], session="alice")
        assert turn.answer and events(a) == len(MEMORIES) + 2
        for e in (b, a):
            with pytest.raises(ConsentError, match="already used"):
                e.answer(p.token, [p.candidates[0].event_id], session="alice")
        assert events(a) == events(b) == len(MEMORIES) + 2

    def test_two_replicas_racing_for_one_token_make_exactly_one_turn(self, two: tuple[Engine, Engine]) -> None:
        a, b = two
        p = a.propose("alice", QUESTION, k=2)
        results: list[str] = []
        go = threading.Barrier(2)

        def answer(e: Engine) -> None:
            go.wait()
            try:
                e.answer(p.token, [p.candidates[0].event_id], session="alice")
                results.append("answered")
            except ConsentError as exc:
                results.append(str(exc))

        threads = [threading.Thread(target=answer, args=(e,)) for e in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert sorted(r if r == "answered" else "refused: used" * ("already used" in r) for r in results) == ["answered", "refused: used"]
        assert events(a) == len(MEMORIES) + 2

    def test_a_token_cancelled_on_one_replica_is_refused_on_both_and_its_question_is_gone(
        self, deploy: Deployment, two: tuple[Engine, Engine]
    ) -> None:
        a, b = two
        p = a.propose("alice", QUESTION)
        assert deploy.kept_questions()  # waiting: the question is kept until the answer
        b.cancel(p.token, session="alice")
        for e in (a, b):
            with pytest.raises(ConsentError, match="cancelled"):
                e.answer(p.token, [], session="alice")
            with pytest.raises(ConsentError, match="already used|cancelled"):
                e.cancel(p.token, session="alice")
        assert events(a) == len(MEMORIES) and deploy.kept_questions() == []

    def test_an_answered_token_leaves_no_question_stored(self, deploy: Deployment, two: tuple[Engine, Engine]) -> None:
        a, b = two
        p = a.propose("alice", QUESTION, k=1)
        b.answer(p.token, [], session="alice")
        assert deploy.kept_questions() == []

    def test_a_token_expired_on_one_replica_is_refused_as_expired_on_both(self, deploy: Deployment, two: tuple[Engine, Engine]) -> None:
        a, b = two
        p = a.propose("alice", QUESTION)
        b.clock = lambda: time.time() + TOKEN_TTL + 1
        for e in (b, a):  # `a`'s clock is still in time: the proposal was spent as expired, for every replica
            with pytest.raises(ConsentError, match="expired"):
                e.answer(p.token, [], session="alice")
        assert events(a) == len(MEMORIES) and deploy.kept_questions() == []

    def test_a_proposal_left_waiting_is_swept_a_minute_after_it_expired(self, deploy: Deployment, two: tuple[Engine, Engine]) -> None:
        a, b = two
        p = a.propose("alice", QUESTION)
        nonce = p.token.split(".")[1]
        b.clock = lambda: time.time() + TOKEN_TTL + 61
        b.propose("bob", "bees?")  # a later proposal sweeps, on any replica
        store = proposal_store(a.stores)
        assert store.load(nonce) is None and store.spent(nonce) is None and deploy.kept_questions() == []
        a.clock = b.clock
        with pytest.raises(ConsentError, match="expired"):
            a.answer(p.token, [], session="alice")

    def test_a_token_of_another_session_is_refused_on_another_replica(self, two: tuple[Engine, Engine]) -> None:
        a, b = two
        p = a.propose("alice", QUESTION)
        with pytest.raises(ConsentError, match="another session"):
            b.answer(p.token, [], session="bob")
        b.answer(p.token, [], session="alice")  # not spent by the refusal

    def test_an_altered_token_is_refused_on_another_replica(self, two: tuple[Engine, Engine]) -> None:
        a, b = two
        p = a.propose("alice", QUESTION)
        mac = p.token.rsplit(".", 1)[1]
        forged = p.token[: -len(mac)] + ("0" if mac[0] != "0" else "1") + mac[1:]
        with pytest.raises(ConsentError, match="altered or forged"):
            b.answer(forged, [], session="alice")
        assert events(a) == len(MEMORIES)

    def test_every_replica_signs_tokens_with_one_secret_even_when_they_make_it_together(self, deploy: Deployment) -> None:
        stores = [deploy.stores() for _ in range(4)]
        secrets: list[bytes] = []
        go = threading.Barrier(len(stores))

        def take(st: Stores) -> None:
            go.wait()
            secrets.append(proposal_store(st).secret())

        threads = [threading.Thread(target=take, args=(st,)) for st in stores]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert len(secrets) == 4 and len(set(secrets)) == 1 and len(secrets[0]) == 32
        assert proposal_store(deploy.stores()).secret() == secrets[0]

    def test_forgetting_a_session_removes_its_proposals_waiting_and_spent_and_no_other(self, deploy: Deployment, two: tuple[Engine, Engine]) -> None:
        a, b = two
        waiting = a.propose("alice", QUESTION)
        spent = a.propose("alice", QUESTION)
        a.cancel(spent.token, session="alice")
        kept = a.propose("bob", "bees?")
        proposal_store(b.stores).forget_session("alice")
        store = proposal_store(a.stores)
        for p in (waiting, spent):
            nonce = p.token.split(".")[1]
            assert store.load(nonce) is None and store.spent(nonce) is None
            with pytest.raises(ConsentError, match="unknown"):
                b.answer(p.token, [], session="alice")
        assert deploy.kept_questions() == []
        b.answer(kept.token, [], session="bob")


class TestSettingsAcrossStores:
    def test_the_switch_set_through_one_stores_is_seen_through_another(self, deploy: Deployment, two: tuple[Engine, Engine]) -> None:
        a, b = two
        assert get_consent(b.stores, "alice") is False
        assert set_consent(a.stores, "alice", True) is True
        assert get_consent(b.stores, "alice") is True and get_consent(b.stores, "bob") is False
        with pytest.raises(ConsentRequired, match="ask me first is on"):
            refuse_direct_turn(b.stores, "alice")
        refuse_direct_turn(b.stores, "bob")
        set_consent(b.stores, "alice", False)
        assert get_consent(a.stores, "alice") is False
        refuse_direct_turn(a.stores, "alice")

    def test_a_one_step_turn_is_refused_on_a_replica_after_another_turned_ask_me_first_on(self, two: tuple[Engine, Engine]) -> None:
        a, b = two
        set_consent(a.stores, "alice", True)
        with pytest.raises(InputError, match="ask me first is on"):
            b.turn("alice", QUESTION)
        assert events(a) == len(MEMORIES)
        b.turn("bob", "bees?")  # another session's turn is not refused

    def test_deleting_a_session_on_one_replica_drops_its_proposals_and_its_switch_for_all(
        self, deploy: Deployment, two: tuple[Engine, Engine]
    ) -> None:
        a, b = two
        set_consent(a.stores, "alice", True)
        p = a.propose("alice", QUESTION)
        kept = a.propose("bob", "bees?")
        assert b.forget("alice")
        assert deploy.kept_questions() == [] and get_consent(a.stores, "alice") is False
        with pytest.raises(ConsentError, match="unknown"):
            a.answer(p.token, [], session="alice")
        a.answer(kept.token, [], session="bob")

    def test_on_files_a_stores_and_its_data_directory_are_the_same_switch(self, tmp_path: Path) -> None:
        st = file_stores(tmp_path / "data")
        st.ledger.append("alice", "user", "hello", {})
        set_consent(st, "alice", True)
        assert get_consent(tmp_path / "data", "alice") is True
        assert (tmp_path / "data" / "sessions" / "alice" / "settings.json").read_bytes() == b'{"consent": true, "v": 1}\n'
        st.close()

    def test_an_unknown_session_is_refused_unless_created_then_known(self, deploy: Deployment) -> None:
        one, other = deploy.stores(), deploy.stores()
        with pytest.raises(SettingsError, match="session nobody is unknown"):
            set_consent(one, "nobody", True)
        assert get_consent(other, "nobody") is False
        assert set_consent(one, "nobody", True, create=True) is True
        assert get_consent(other, "nobody") is True
        assert set_consent(other, "nobody", False) is False  # known now, with no event yet

    def test_forgetting_the_settings_turns_the_switch_off_everywhere(self, deploy: Deployment) -> None:
        one, other = deploy.stores(), deploy.stores()
        set_consent(one, "alice", True, create=True)
        forget_settings(other, "alice")
        forget_settings(other, "alice")  # idempotent
        assert get_consent(one, "alice") is False

    @pytest.mark.parametrize("bad", ["../etc", "a/b", "", "a b", "s\x00", "x" * 65])
    def test_a_hostile_session_id_is_refused_before_any_store(self, deploy: Deployment, bad: str) -> None:
        st = deploy.stores()
        calls: list[Callable[[], object]] = [
            lambda: get_consent(st, bad),
            lambda: set_consent(st, bad, True, create=True),
            lambda: forget_settings(st, bad),
            lambda: refuse_direct_turn(st, bad),
        ]
        for call in calls:
            with pytest.raises(SettingsError, match="session id"):
                call()


@pytest.mark.pg
def test_a_database_made_before_the_consent_tables_gains_them(pg_url: str, tmp_path: Path) -> None:
    st = pg_stores(pg_url, tmp_path / "one")
    st.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TABLE consent_secret, consent_proposals, session_settings")
        conn.execute(sql.SET_SCHEMA_VERSION, ("1",))  # what such a database records: a start completes it
    st = pg_stores(pg_url, tmp_path / "two")
    try:
        assert len(proposal_store(st).secret()) == 32
        assert set_consent(st, "alice", True, create=True) is True
    finally:
        st.close()


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review_pg_consent_race.py):
# Review (issue 14): "ask me first" is read before the turn lock (Engine.turn: refuse_direct_turn, then
# backend.turn_lock). A one-step turn queued behind another turn of the session — on PostgreSQL, behind a turn on any
# replica, held through its model call — passes the check, then waits; if the visitor turns ask me first on
# meanwhile (on any replica), the queued turn still hands the top-K memories to the model without asking.
# --------------------------------------------------------------------------------------------------------------------


S = "alice"


@pytest.mark.pg
def test_a_turn_queued_behind_another_is_refused_once_ask_me_first_is_on(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECEIPT_SIGNING_KEY", "33" * 32)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with pg_stores(pg_url, tmp_path / "a", pool_size=3) as sa, pg_stores(pg_url, tmp_path / "b", pool_size=3) as sb:
        a = Engine(tmp_path / "a", llm=LLM(api_key=""), stores=sa)
        a.remember(S, "My bank PIN is 8080")
        before = sa.ledger.head(S)[0]
        outcome: list[object] = []
        with sb.receipts.turn_lock(S):  # replica B's turn of this session is in its model call
            t = threading.Thread(target=lambda: outcome.append(_try(a)))
            t.start()
            time.sleep(1.0)  # A's turn has read the setting (off) and waits for the lock
            set_consent(sb, S, True)  # the visitor turns ask me first on, through replica B
        t.join(30)
        assert isinstance(outcome[0], InputError), f"the queued turn ran without asking: {type(outcome[0]).__name__}"
        assert sa.ledger.head(S)[0] == before


def _try(eng: Engine) -> object:
    try:
        return eng.turn(S, "What is my bank PIN?")
    except Exception as exc:  # noqa: BLE001
        return exc
