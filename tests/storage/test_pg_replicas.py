"""Several app replicas on one PostgreSQL database (issue 14, "Faults and load"), loopback only, bounded.

Three `python app.py` processes share one database and one RECEIPT_SIGNING_KEY (GROQ_API_KEY unset: the offline
stand-in); visitors send every turn to a replica drawn at random (bench/replicas.py's light HTTP client). Then:
no error, one chain per session holding each acknowledged message once, no visitor's marker in another's answers or
receipts, and every receipt — read from the database — verifies offline and against the ledger as stored.
Two replicas answering one session at once make one linear chain whose turns never interleave. The database
SIGKILLed in the middle of turns and restarted: failed turns say so in words (never a traceback, never an empty
error), every acknowledged turn is still there with its receipt, and the same app (and the same Engine) answers again
without a restart.

The load here is CLIENTS × TURNS: the issue's 50 × 20 (about 80 s with the replicas' start on two cores);
MRE_REPLICA_LOAD=12x5 runs a quick one while working on it. bench/replicas.py runs 50 × 20 and measures turns/s.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gradio as gr
import pytest

from bench.load import TurnRefused, Visitor, sse_turn, visitors
from bench.replicas import (
    Replica,
    acknowledged,
    check_chain,
    check_receipts,
    routed_run,
    running_replicas,
)
from chat.engine import Engine, TurnError
from chat.llm import LLM
from chat.shown import TURN_FAILED
from control.revocation import revoke
from receipts.body import parse_receipt
from receipts.keys import PublicKey, parse_private_key
from storage import BackendError
from storage.files.receipts.api import verify_bytes
from storage.pg.receipts import PgReceipts
from storage.stores import Stores, open_stores, pg_stores
from tests import pg_support
from webui.handlers import STORE_UNAVAILABLE, UI
from webui.service import Service
from webui.sessions import new_session_key, session_id

CLIENTS, TURNS = (int(x) for x in os.environ.get("MRE_REPLICA_LOAD", "50x20").split("x"))
RECEIPT_WITHHELD = "the receipt could not be written; the answer was withheld"
CLEAR_ERRORS = (TURN_FAILED, RECEIPT_WITHHELD, STORE_UNAVAILABLE)  # what a visitor may read when the database dies


@dataclass
class Deployment:
    url: str
    key: str  # RECEIPT_SIGNING_KEY of every replica (hex seed)
    replicas: list[Replica]
    root: Path

    @property
    def public(self) -> PublicKey:
        return parse_private_key(self.key, source="test").public_key


def server_log_problems(replicas: list[Replica]) -> list[str]:
    """Tracebacks and ERROR lines in the replicas' logs."""
    return [f"replica {i}: {line[:200]}" for i, r in enumerate(replicas) for line in r.log_text().splitlines() if "Traceback" in line or line.startswith("ERROR")]


@pytest.fixture(scope="module")
def deployment(pg_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    url, key = pg_support.fresh_database(pg_server), secrets.token_hex(32)
    root = tmp_path_factory.mktemp("replicas")
    with running_replicas(3, root, database_url=url, signing_key=key) as reps:
        yield Deployment(url, key, reps, root)


@pytest.fixture
def stores(deployment: Deployment, tmp_path: Path) -> Iterator[Stores]:
    """The database, opened as a fourth replica would open it (its own DATA_DIR)."""
    with open_stores(tmp_path / "checker", deployment.url, environ={}) as s:
        yield s


@pytest.mark.pg
@pytest.mark.slow
def test_three_replicas_at_random_serve_every_turn_with_no_fork_no_leak_and_receipts_that_verify(
    deployment: Deployment, stores: Stores, tmp_path: Path
) -> None:
    people = visitors(CLIENTS)
    res, router = routed_run("3 replicas", [r.url for r in deployment.replicas], people, TURNS, seed=14)
    assert res.errors == []
    assert len(res.latencies) == CLIENTS * TURNS
    assert sorted(router.served) == sorted(r.url for r in deployment.replicas), "every replica served turns"
    acked = acknowledged(res, people, TURNS)
    forks = [p for session, messages in acked.items() for p in check_chain(stores.ledger, session, messages)]
    assert forks == []
    check_receipts(res, stores, people, deployment.public, tmp_path / "verify", acked)
    assert res.receipts_failed == []
    assert res.receipts_checked == CLIENTS * TURNS
    assert res.leaks == []
    assert server_log_problems(deployment.replicas) == []


@pytest.mark.pg
@pytest.mark.slow
def test_no_replica_keeps_a_receipt_copy_on_its_disk_that_a_forget_elsewhere_could_not_reach(
    deployment: Deployment, stores: Stores
) -> None:
    """The rows are the only copy the app keeps (a visitor's download is read from them): a copy in one replica's
    DATA_DIR would hold a memory's words after a forget that ran on another."""
    people = visitors(3)
    res, _router = routed_run("copies", [r.url for r in deployment.replicas], people, 2, seed=15)
    assert res.errors == []
    for v in people:
        assert len(stores.receipts.receipt_ids(v.session)) == 2
    kept = [p for r in deployment.replicas for p in (r.data_dir / "receipt-copies").rglob("*.json")]
    assert kept == []


def one_session_from_two_replicas(urls: list[str], key: str, per_thread: int) -> tuple[list[str], list[str]]:
    """Two threads per replica send turns of one session at once; (messages acknowledged, errors)."""
    import httpx

    start = threading.Barrier(2 * len(urls))
    done: list[str] = []
    errors: list[str] = []
    lock = threading.Lock()

    def send(url: str, tag: str) -> None:
        with httpx.Client(timeout=120) as http:
            start.wait()
            for i in range(per_thread):
                message = f"turn {i} of writer {tag}: the ferry to the island leaves at nine"
                try:
                    sse_turn(http, url, {"data": [message, [], 4, key, False], "session_hash": secrets.token_hex(8)})
                except Exception as exc:  # noqa: BLE001 - collected and asserted empty
                    with lock:
                        errors.append(f"{tag} {i}: {exc}"[:300])
                    continue
                with lock:
                    done.append(message)

    threads = [threading.Thread(target=send, args=(url, f"{n}{side}")) for n, url in enumerate(urls) for side in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    return done, errors


@pytest.mark.pg
@pytest.mark.slow
def test_two_replicas_answering_one_session_at_once_make_one_chain_with_each_turn_whole_and_once(
    deployment: Deployment, stores: Stores, tmp_path: Path
) -> None:
    key, per_thread = new_session_key(), 4
    session = session_id(key)
    done, errors = one_session_from_two_replicas([r.url for r in deployment.replicas[:2]], key, per_thread)
    assert errors == []
    assert len(done) == 4 * per_thread
    assert check_chain(stores.ledger, session, done) == []
    events = list(stores.ledger.events(session))
    ids = stores.receipts.receipt_ids(session)
    assert len(ids) == len(done)
    scratch = tmp_path / "verify"
    asked = set()
    from bench.replicas import export_ledger

    export_ledger(stores.ledger, session, scratch)
    for rid in ids:
        raw = stores.receipts.read_receipt(session, rid)
        report = verify_bytes(raw, trusted=[deployment.public], data_dir=scratch)
        assert report.verdict == "verified", (rid, [c.name for c in report.failed])
        body = parse_receipt(raw).body
        q, a = body["query"]["event"]["seq"], body["response"]["event"]["seq"]
        asked.add(events[q].text)
        # the turn lock held across replicas: nobody else's message or answer between a question and its answer
        between = [e.role for e in events[q + 1 : a]]
        assert "user" not in between and "assistant" not in between, f"{rid}: another turn interleaved ({between})"
        assert events[a].role == "assistant" and events[a].meta.get("receipt_id") == rid
    assert asked == set(done)


@pytest.mark.pg
def test_first_searches_of_more_sessions_than_the_pool_has_connections_do_not_wait_on_each_other(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session's first turn searches before its message is indexed, so the search indexes the session first. That
    once ran inside the search's pooled connection and took more: 16 first turns at once on a pool of 8 (the app under
    50 visitors) each held one and waited for another until the pool's timeout, and turns failed."""
    from storage.pg import connect

    monkeypatch.setattr(connect, "POOL_TIMEOUT_S", 10.0)  # a deadlock shows as errors after 10 s, not 30
    sessions = [f"first-{i}" for i in range(6)]
    with pg_stores(pg_url, tmp_path, pool_size=2) as stores:
        for s in sessions:
            stores.ledger.append(s, "user", f"the {s} notebook is on the kitchen shelf")
        start, errors, hits = threading.Barrier(len(sessions)), [], {}

        def search(session: str) -> None:
            start.wait()
            try:
                hits[session] = [h.seq for h in stores.index.search(session, "where is the notebook", 5).results]
            except Exception as exc:  # noqa: BLE001 - collected and asserted empty
                errors.append(f"{session}: {type(exc).__name__}: {exc}"[:200])

        threads = [threading.Thread(target=search, args=(s,)) for s in sessions]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    assert errors == []
    assert hits == {s: [0] for s in sessions}


# -- the database killed in the middle of turns -------------------------------------------------------------------
@pytest.fixture
def own_server() -> Iterator[pg_support.Server]:
    """A server of this test's own (it is SIGKILLed), not the run's shared one."""
    yield from pg_support.server_or_skip()


@dataclass
class Outcome:
    visitor: int
    turn: int
    message: str
    started: float
    ok: bool
    error: str | None = None


@dataclass
class Traffic:
    """Visitors sending turns to one app in a loop until told to stop; every turn's outcome."""

    url: str
    people: list[Visitor]
    outcomes: list[Outcome] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> list[threading.Thread]:
        threads = [threading.Thread(target=self._visit, args=(v,), daemon=True) for v in self.people]
        for t in threads:
            t.start()
        return threads

    def _visit(self, v: Visitor) -> None:
        import httpx

        page = secrets.token_hex(8)
        with httpx.Client(timeout=180) as http:
            t = 0
            while not self.stop.is_set():
                message, t0 = v.message(t), time.monotonic()
                try:
                    sse_turn(http, self.url, {"data": [message, [], 8, v.key, False], "session_hash": page})
                    out = Outcome(v.index, t, message, t0, True)
                except TurnRefused as exc:
                    out = Outcome(v.index, t, message, t0, False, str(exc))
                except Exception as exc:  # noqa: BLE001 - anything else is a failure the test reports
                    out = Outcome(v.index, t, message, t0, False, f"not an error event: {type(exc).__name__}: {exc}")
                with self._lock:
                    self.outcomes.append(out)
                t += 1
                time.sleep(0.05)

    def wait_for(self, since: float, per_visitor: int, timeout: float) -> bool:
        """Until every visitor has `per_visitor` acknowledged turns started after `since`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                counts = [sum(1 for o in self.outcomes if o.visitor == v.index and o.ok and o.started >= since) for v in self.people]
            if min(counts) >= per_visitor:
                return True
            time.sleep(0.2)
        return False


def error_text(event_data: str) -> str | None:
    """The text a visitor is shown for a Gradio error event (None: an error with no words)."""
    try:
        data = json.loads(event_data)
    except ValueError:
        return None
    text = data.get("error") if isinstance(data, dict) else None
    return text if isinstance(text, str) and text else None


@pytest.mark.pg
@pytest.mark.slow
def test_the_database_killed_mid_turns_loses_no_acknowledged_turn_and_the_app_answers_again_without_a_restart(
    own_server: pg_support.Server, tmp_path: Path
) -> None:
    url, key = pg_support.fresh_database(own_server), secrets.token_hex(32)
    with running_replicas(1, tmp_path, database_url=url, signing_key=key) as (app,):
        traffic = Traffic(app.url, visitors(4))
        threads = traffic.run()
        try:
            assert traffic.wait_for(0.0, 2, timeout=60), "turns before the fault"
            pg_support.kill(own_server)  # SIGKILL: a crash, in the middle of turns
            time.sleep(2.0)
            pg_support.restart(own_server)
            back = time.monotonic()
            assert traffic.wait_for(back, 2, timeout=90), "the same app answers every visitor again"
        finally:
            traffic.stop.set()
            for t in threads:
                t.join(timeout=200)
        assert app.proc.poll() is None, "the app kept running"
        log = app.log_text()
    failed = [o for o in traffic.outcomes if not o.ok]
    print(f"{len(traffic.outcomes)} turns, {len(failed)} failed: {sorted({str(error_text(o.error or '')) for o in failed})}")
    unclear = [o.error for o in failed if o.error is None or error_text(o.error) not in CLEAR_ERRORS]
    assert unclear == [], "a failed turn is told in words"
    assert "Traceback" not in log
    key_pub = parse_private_key(key, source="test").public_key
    with open_stores(tmp_path / "checker", url, environ={}) as stores:
        for v in traffic.people:
            mine = [o for o in traffic.outcomes if o.visitor == v.index]
            acked = [o.message for o in mine if o.ok]
            assert check_chain(stores.ledger, v.session, acked) == []  # every acknowledged message once, one chain
            users = [e.text for e in stores.ledger.events(v.session) if e.role == "user"]
            assert all(users.count(o.message) <= 1 for o in mine if not o.ok), "a failed turn's message at most once"
            answered = receipts_by_question(stores, v.session, key_pub, tmp_path / "verify")
            assert set(acked) <= set(answered), "every acknowledged turn has its receipt, verified with the ledger"


def receipts_by_question(stores: Stores, session: str, trusted: PublicKey, scratch: Path) -> dict[str, str]:
    """question text → receipt id, for every receipt of the session that verifies against the ledger as stored."""
    from bench.replicas import export_ledger
    from storage.files.receipts.audit import forget_cache

    export_ledger(stores.ledger, session, scratch)
    found = {}
    try:
        for rid in stores.receipts.receipt_ids(session):
            raw = stores.receipts.read_receipt(session, rid)
            report = verify_bytes(raw, trusted=[trusted], data_dir=scratch)
            assert report.verdict == "verified", (rid, [c.name for c in report.failed])
            found[parse_receipt(raw).body["query"]["event"]["text"]] = rid
    finally:
        forget_cache(scratch, session)
    return found


class GatedLLM(LLM):
    """The offline stand-in, held at the model call until released: a turn kept in flight on purpose."""

    def __init__(self) -> None:
        super().__init__(api_key="")
        self.entered = threading.Event()
        self.release = threading.Event()
        self.release.set()

    def complete(self, *args: Any, **kwargs: Any) -> Any:
        self.entered.set()
        self.release.wait(timeout=60)
        return super().complete(*args, **kwargs)


@pytest.mark.pg
@pytest.mark.slow
def test_a_turn_in_flight_when_the_database_dies_fails_in_words_and_the_same_engine_answers_after_the_restart(
    own_server: pg_support.Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from storage.pg import connect

    monkeypatch.setattr(connect, "POOL_TIMEOUT_S", 3.0)  # a turn waits 3 s for the server, not 30
    url = pg_support.fresh_database(own_server)
    llm = GatedLLM()
    engine = Engine(tmp_path / "data", stores=pg_stores(url, tmp_path / "data"), llm=llm)
    assert isinstance(engine.backend, PgReceipts)
    engine.backend.lock_wait = 3.0  # its pool of turn locks opens at the first turn
    try:
        before = engine.turn("s1", "the spare key is under the blue flowerpot")
        llm.entered.clear()
        llm.release.clear()
        failure: list[BaseException] = []
        inflight = threading.Thread(target=lambda: _catch(failure, lambda: engine.turn("s1", "where is the spare key?")))
        inflight.start()
        assert llm.entered.wait(30)
        pg_support.kill(own_server)
        llm.release.set()
        inflight.join(timeout=60)
        assert len(failure) == 1 and isinstance(failure[0], TurnError), failure
        assert "no answer was given" in str(failure[0]) and "PostgreSQL at" in str(failure[0])
        with pytest.raises((BackendError, TurnError), match="PostgreSQL at"):
            engine.turn("s2", "a turn while the server is down")
        pg_support.restart(own_server)
        after, attempts, t0 = None, 0, time.monotonic()
        while after is None and time.monotonic() - t0 < 60:  # the pool reconnects with its own backoff
            attempts += 1
            try:
                after = engine.turn("s1", "and the back door key?")
            except (BackendError, TurnError):
                time.sleep(0.5)
        assert after is not None, f"the same engine did not answer within 60 s of the restart ({attempts} tries)"
        print(f"recovered {time.monotonic() - t0:.1f} s after the restart, {attempts} tries")
        events = list(engine.ledger.events("s1"))
        assert engine.ledger.verify("s1").ok
        assert [e.text for e in events if e.role == "user"][:2] == ["the spare key is under the blue flowerpot", "where is the spare key?"]
        for turn in (before, after):  # acknowledged: both events and the receipt, verified with the ledger
            assert events[turn.user_event.seq].chain == turn.user_event.chain
            assert events[turn.assistant_event.seq].chain == turn.assistant_event.chain
        answered = receipts_by_question(engine.stores, "s1", engine.key.public_key, tmp_path / "verify")
        assert answered.get("the spare key is under the blue flowerpot") == before.receipt_id
        assert answered.get("and the back door key?") == after.receipt_id
        assert "where is the spare key?" not in answered  # the failed turn has no receipt and no answer
    finally:
        llm.release.set()
        engine.close()


def _catch(box: list[BaseException], fn: Any) -> None:
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - handed to the test
        box.append(exc)


# -- the page's edge, no server needed --------------------------------------------------------------------------
class TestTheStoreUnreachableAtTheEdge:
    def test_the_chat_reading_ask_me_first_from_a_dead_database_shows_a_message_not_a_traceback(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from webui import controls

        def unreachable(*_a: Any, **_k: Any) -> bool:
            raise BackendError("PostgreSQL at postgresql://mre@127.0.0.1:1/db: no connection free or reachable within 30 s")

        monkeypatch.setattr(controls, "get_consent", unreachable)
        ui = UI(Service(Engine(tmp_path / "data", llm=LLM(api_key=""))))
        with pytest.raises(gr.Error) as caught:
            list(ui.chat("hello", [], 8, new_session_key()))
        assert caught.value.message == STORE_UNAVAILABLE and "postgresql://" not in caught.value.message

    def test_a_turn_that_cannot_reach_the_database_shows_a_message_not_a_traceback(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        service = Service(Engine(tmp_path / "data", llm=LLM(api_key="")))

        def unreachable(*_a: Any, **_k: Any) -> Any:
            raise BackendError("PostgreSQL at postgresql://mre@127.0.0.1:1/db: session s: turn lock: server closed the connection")

        monkeypatch.setattr(service.engine, "turn", unreachable)
        with pytest.raises(gr.Error) as caught:
            list(UI(service).chat("hello", [], 8, new_session_key()))
        assert caught.value.message == STORE_UNAVAILABLE

    def test_a_turn_whose_receipt_download_cannot_reach_the_database_still_shows_its_answer(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The answer and its receipt were stored; the database went away before the download copy was read (the
        pending-erasure check before any copy asks it, on PostgreSQL): the answer is shown, no download, no traceback."""
        service = Service(Engine(tmp_path / "data", llm=LLM(api_key="")))

        def unreachable(*_a: Any, **_k: Any) -> Any:
            raise BackendError("PostgreSQL at postgresql://mre@127.0.0.1:1/db: server closed the connection")

        # every read of a stored receipt runs in Service.settled (settle, then the turn lock): it is what asks the database
        monkeypatch.setattr(service, "settled", unreachable)
        final = list(UI(service).chat("hello", [], 8, new_session_key()))[-1]
        history, _box, _stamps, download = final
        assert history[-2]["role"] == "assistant" and download.value is None and not download.interactive


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review_pg_cites_replicas.py):
# Review (issue 14): an answer without receipt_cites rows, written by another replica, and chat.citing.Cites.
#
# Cites._make_whole reads the turns left without a receipt (receipt_pending_cites on PostgreSQL: the `.cites`
# records) once per session and process. With replicas, a turn that another replica's process left without its
# receipt_cites rows (it failed or died after appending the answer) is never read by a replica that has already
# checked the session: when a memory that answer quoted is revoked, that replica still hands the answer — which may
# repeat the revoked words — to the model.
# --------------------------------------------------------------------------------------------------------------------


S = "alice"


@pytest.mark.pg
def test_a_replica_leaves_out_an_answer_another_replica_left_without_its_cites_rows(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECEIPT_SIGNING_KEY", "22" * 32)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with pg_stores(pg_url, tmp_path / "a", pool_size=2) as sa, pg_stores(pg_url, tmp_path / "b", pool_size=2) as sb:
        a = Engine(tmp_path / "a", llm=LLM(api_key=""), stores=sa)
        b = Engine(tmp_path / "b", llm=LLM(api_key=""), stores=sb)
        secret = a.remember(S, "My safe combination is 7319 and the safe is behind the painting")
        other = a.remember(S, "I had soup for lunch")
        a.remember(S, "I walked the dog in the park")
        revoke(tmp_path / "a", S, other.seq, stores=sa, key=a.key)  # something is revoked: A checks the session whole
        a._retrieve(S, "what did I eat", 8, [])

        def dies(*_a: object, **_k: object) -> None:
            raise RuntimeError("replica B stops after appending its answer")

        monkeypatch.setattr(b.cites, "record", dies)
        with pytest.raises(TurnError):
            b.turn(S, "What is my safe combination?")
        answer = sa.ledger.head(S)[0] - 2  # B's answer, then B's failure note
        (ev,) = sa.ledger.read_events(S, [answer])
        assert ev.role == "assistant" and "7319" in (ev.text or "")

        revoke(tmp_path / "a", S, secret.seq, stores=sa, key=a.key)
        in_a = answer in [h.seq for h in a._retrieve(S, "safe combination 7319", 8, [])[0]]
        fresh = Engine(tmp_path / "a", llm=LLM(api_key=""), stores=sa)  # as a process started now (its check also
        in_fresh = answer in [h.seq for h in fresh._retrieve(S, "safe combination 7319", 8, [])[0]]  # writes the rows)
        # (False, True) before a fix: a fresh process leaves the answer out, replica A still hands it to the model
        assert (in_fresh, in_a) == (False, False)
