"""The index: scoping, fixed K, incremental indexing, watermarks, recovery, threads, ranking."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.messages import Message
from retrieval import IndexConfig, SearchError
from storage.files.ledger.store import Ledger
from storage.files.retrieval.db import Index

# Most tests pin down mechanics, so they index each event's own text only; the
# default (neighbouring turns as context) has its own tests in TestContext.
EXACT = IndexConfig(context_before=0, context_after=0)

FILLER = [
    "We talked about the weather in Lisbon today",
    "The train to Porto was late again",
    "I am reading a novel about sailors",
    "My sister plays the cello in an orchestra",
    "Lunch was a bowl of ramen with extra egg",
    "The garden needs watering twice a week",
    "Our team shipped the release on Friday",
    "The museum had a new exhibit on glass",
]


def add(ledger: Ledger, session: str, texts: list[str], role: str = "user") -> None:
    ledger.append_many(session, [Message(role, t, {}) for t in texts])


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger(tmp_path)


@pytest.fixture
def index(tmp_path: Path, ledger: Ledger) -> Index:
    ix = Index(tmp_path, ledger, config=EXACT)
    yield ix
    ix.close()


class TestScoping:
    def test_a_search_never_returns_another_sessions_events(self, ledger: Ledger, index: Index) -> None:
        add(ledger, "alice", FILLER + ["my kayak is red", "kayak trip on Sunday"])
        add(ledger, "bob", FILLER + ["my kayak is blue", "kayak lessons", "kayak kayak kayak"])
        index.catch_up()
        for session, n in (("alice", 2), ("bob", 3)):
            resp = index.search(session, "kayak", k=50)
            assert len(resp.results) == n
            assert {h.session for h in resp.results} == {session}
            assert all("kayak" in h.text for h in resp.results)

    def test_a_sessions_ranking_does_not_depend_on_other_sessions(self, tmp_path: Path, ledger: Ledger) -> None:
        add(ledger, "alice", FILLER + ["my kayak is red", "a red bus", "kayak trip"])
        alone = Index(tmp_path / "alone", Ledger(tmp_path / "alone"), config=EXACT)
        add(alone.ledger, "alice", FILLER + ["my kayak is red", "a red bus", "kayak trip"])
        add(ledger, "bob", ["red red red", "kayak"] * 50)  # would shift a shared IDF
        shared = Index(tmp_path, ledger, config=EXACT)
        shared.catch_up()

        def ranking(ix: Index) -> list[tuple[int, float]]:
            return [(h.seq, round(h.bm25, 9)) for h in ix.search("alice", "red kayak").results]

        assert ranking(shared) == ranking(alone)
        alone.close()
        shared.close()

    def test_an_unknown_session_is_an_empty_result_with_a_reason(self, index: Index) -> None:
        resp = index.search("nobody", "kayak")
        assert resp.results == [] and "no events indexed" in (resp.reason or "")

    def test_a_bad_session_id_is_a_search_error(self, index: Index) -> None:
        with pytest.raises(SearchError):
            index.search("../etc", "kayak")


class TestFixedK:
    @pytest.mark.parametrize("k", [0, -1, 51, 1.5, "8", None, True])
    def test_k_outside_1_to_50_is_refused(self, index: Index, k: object) -> None:
        with pytest.raises(SearchError):
            index.search("s", "kayak", k=k)  # type: ignore[arg-type]

    @pytest.mark.parametrize(("k", "expected"), [(1, 1), (5, 5), (12, 12), (50, 12)])
    def test_exactly_min_k_and_matches_results(self, ledger: Ledger, index: Index, k: int, expected: int) -> None:
        add(ledger, "s", FILLER * 3 + [f"apple number {i}" for i in range(12)])
        resp = index.search("s", "apple", k=k)
        assert len(resp.results) == expected
        assert [h.rank for h in resp.results] == list(range(1, expected + 1))

    def test_results_carry_what_a_receipt_needs(self, ledger: Ledger, index: Index) -> None:
        events = ledger.append_many("s", [Message("user", t, {"n": i}) for i, t in enumerate(FILLER + ["apple pie"])])
        hit = index.search("s", "apple").results[0]
        ev = events[-1]
        assert (hit.event_id, hit.seq, hit.role, hit.text, hit.meta, hit.digest, hit.chain, hit.ts) == (
            ev.id,
            ev.seq,
            ev.role,
            ev.text,
            ev.meta,
            ev.digest,
            ev.chain,
            ev.ts,
        )
        assert hit.bm25 < 0 and 0 < hit.collapse <= 1 and hit.score > 0

    def test_excluded_seqs_are_not_returned(self, ledger: Ledger, index: Index) -> None:
        add(ledger, "s", FILLER + ["apple one", "apple two", "apple three"])
        resp = index.search("s", "apple", k=8, exclude_seqs=[8, 9])
        assert [h.seq for h in resp.results] == [10]

    def test_no_match_is_an_empty_result_with_a_reason(self, ledger: Ledger, index: Index) -> None:
        add(ledger, "s", FILLER)
        resp = index.search("s", "zeppelin")
        assert resp.results == [] and resp.reason


class TestIndexing:
    def test_appends_are_indexed_incrementally(self, ledger: Ledger, index: Index) -> None:
        add(ledger, "s", FILLER)
        index.catch_up()
        ev = ledger.append("s", "user", "a zeppelin flew over")
        assert index.index_session("s", [ev]) == []
        add(ledger, "s", ["another zeppelin"])
        assert index.index_session("s") == []  # read from the ledger this time
        assert sorted(h.seq for h in index.search("s", "zeppelin").results) == [8, 9]
        with index.read() as conn:
            assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 10

    def test_a_rewritten_ledger_is_reindexed_with_a_warning(self, tmp_path: Path, ledger: Ledger, index: Index) -> None:
        add(ledger, "s", FILLER + ["zeppelin"])
        index.catch_up()
        index.close()
        shutil.rmtree(tmp_path / "sessions" / "s")
        fresh = Ledger(tmp_path)
        add(fresh, "s", FILLER + ["blimp", "more"])  # same prefix text, new salts: other chain hashes
        ix = Index(tmp_path, fresh, config=EXACT)
        warnings = ix.catch_up()
        assert len(warnings) == 1 and "does not match the index at seq 8" in warnings[0]
        assert "re-indexed from scratch" in warnings[0]
        assert ix.search("s", "zeppelin").results == []
        assert [h.seq for h in ix.search("s", "blimp").results] == [8]
        ix.close()

    def test_a_shorter_ledger_is_reindexed_with_a_warning(self, tmp_path: Path, ledger: Ledger, index: Index) -> None:
        add(ledger, "s", FILLER)
        index.catch_up()
        index.close()
        shutil.rmtree(tmp_path / "sessions" / "s")
        fresh = Ledger(tmp_path)
        add(fresh, "s", FILLER[:3])
        ix = Index(tmp_path, fresh, config=EXACT)
        warnings = ix.catch_up()
        assert len(warnings) == 1 and "holds 3 events but 8 were indexed" in warnings[0]
        with ix.read() as conn:
            assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 3
        ix.close()

    def test_a_vanished_session_is_dropped_with_a_warning(self, tmp_path: Path, ledger: Ledger, index: Index) -> None:
        add(ledger, "gone", FILLER)
        add(ledger, "kept", FILLER)
        index.catch_up()
        shutil.rmtree(tmp_path / "sessions" / "gone")
        warnings = index.catch_up()
        assert warnings == ["session gone: no longer in the ledger; dropped from the index"]
        with index.read() as conn:
            fts = conn.execute("SELECT count(*) FROM sqlite_master WHERE name GLOB 'events_fts_*' AND sql LIKE 'CREATE VIRTUAL%'")
            assert fts.fetchone()[0] == 1
        assert index.search("kept", "ramen").results and not index.search("gone", "ramen").results

    def test_catch_up_twice_is_a_no_op(self, ledger: Ledger, index: Index) -> None:
        add(ledger, "s", FILLER)
        index.catch_up()
        assert index.catch_up() == []


class TestRecovery:
    def test_a_garbage_index_file_is_moved_aside_and_rebuilt(self, tmp_path: Path, ledger: Ledger) -> None:
        add(ledger, "s", FILLER + ["zeppelin"])
        Index(tmp_path, ledger, config=EXACT).close()
        (tmp_path / "index.sqlite").write_bytes(b"this is not a database" * 500)
        for extra in ("index.sqlite-wal", "index.sqlite-shm"):
            (tmp_path / extra).unlink(missing_ok=True)
        ix = Index(tmp_path, ledger, config=EXACT)
        assert any("moved aside" in w for w in ix.warnings)
        assert len(list(tmp_path.glob("index.sqlite.corrupt-*"))) == 1
        ix.catch_up()
        assert [h.seq for h in ix.search("s", "zeppelin").results] == [8]
        ix.close()

    def test_corruption_found_while_searching_is_rebuilt(self, tmp_path: Path, ledger: Ledger) -> None:
        add(ledger, "s", FILLER * 50 + ["zeppelin"])
        ix = Index(tmp_path, ledger, config=EXACT)
        ix.catch_up()
        ix.close()
        path = tmp_path / "index.sqlite"
        data = bytearray(path.read_bytes())
        data[4096 * 2 :] = b"\xff" * (len(data) - 4096 * 2)  # keep the header, ruin the pages
        path.write_bytes(bytes(data))
        ix = Index(tmp_path, ledger, config=EXACT)
        assert [h.seq for h in ix.search("s", "zeppelin").results] == [400]
        assert any("moved aside" in w for w in ix.warnings)
        ix.close()

    def test_a_deleted_index_is_rebuilt(self, tmp_path: Path, ledger: Ledger, index: Index) -> None:
        add(ledger, "s", FILLER + ["zeppelin"])
        index.catch_up()
        for p in tmp_path.glob("index.sqlite*"):
            p.unlink()
        assert [h.seq for h in index.search("s", "zeppelin").results] == [8]  # same Index object
        assert (tmp_path / "index.sqlite").exists()
        ix = Index(tmp_path, ledger, config=EXACT)  # and a new one
        assert [h.seq for h in ix.search("s", "zeppelin").results] == [8]
        ix.close()


class TestOtherTables:
    def test_ensure_schema_survives_a_rebuild(self, ledger: Ledger, index: Index) -> None:
        index.ensure_schema("receipts", "CREATE TABLE IF NOT EXISTS receipts (id TEXT PRIMARY KEY, body TEXT)")
        with index.write() as db:
            db["receipts"].insert({"id": "r1", "body": "{}"})
        index.rebuild()
        with index.read() as conn:
            assert conn.execute("SELECT count(*) FROM receipts").fetchone()[0] == 1

    def test_a_failing_write_block_rolls_back(self, index: Index) -> None:
        index.ensure_schema("t", "CREATE TABLE IF NOT EXISTS t (x INTEGER)")
        with pytest.raises(RuntimeError), index.write() as db:
            db["t"].insert({"x": 1})
            raise RuntimeError("boom")
        with index.read() as conn:
            assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 0


class TestThreads:
    def test_concurrent_searches_while_another_thread_indexes(self, ledger: Ledger, index: Index) -> None:
        add(ledger, "s", FILLER * 5 + ["zeppelin zero"])
        add(ledger, "other", ["zeppelin elsewhere"] * 5)
        index.catch_up()
        errors: list[BaseException] = []
        stop = threading.Event()

        def writer() -> None:
            try:
                for i in range(30):
                    evs = ledger.append_many("s", [Message("user", f"zeppelin {i}", {})])
                    index.index_session("s", evs)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
            finally:
                stop.set()

        def reader() -> None:
            try:
                while not stop.is_set():
                    hits = index.search("s", "zeppelin", k=50).results
                    assert hits and all(h.session == "s" for h in hits)
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        threads = [threading.Thread(target=reader) for _ in range(4)] + [threading.Thread(target=writer)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
        assert len(index.search("s", "zeppelin", k=50).results) == 31

    def test_two_index_objects_on_one_file_index_a_session_once(self, tmp_path: Path, ledger: Ledger) -> None:
        # Two Index objects share no lock, like two processes: the watermark check in each write settles it.
        add(ledger, "s", FILLER * 20)
        first, second = Index(tmp_path, ledger, config=EXACT), Index(tmp_path, Ledger(tmp_path), config=EXACT)
        errors: list[BaseException] = []

        def work(ix: Index) -> None:
            try:
                for _ in range(5):
                    ix.index_session("s")
                    evs = ledger.append_many("s", [Message("user", "zeppelin", {})])
                    ix.index_session("s", evs)
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(ix,)) for ix in (first, second)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        first.index_session("s")
        assert errors == []
        with first.read() as conn:
            assert conn.execute("SELECT count(*), max(seq) FROM events").fetchone() == (170, 169)
        first.close()
        second.close()


class TestRanking:
    def test_a_verbatim_repeat_scores_lower_than_the_first_statement(self, ledger: Ledger, index: Index) -> None:
        add(ledger, "s", FILLER + ["I bought a red kayak in Oregon"] + FILLER + ["I bought a red kayak in Oregon"])
        hits = index.search("s", "red kayak").results
        assert [h.seq for h in hits] == [8, 17]
        assert hits[0].bm25 == pytest.approx(hits[1].bm25)
        assert hits[1].collapse < hits[0].collapse and hits[1].score < hits[0].score

    def test_with_equal_bm25_the_higher_collapse_ranks_first(self, ledger: Ledger, index: Index) -> None:
        add(ledger, "s", FILLER + ["green bicycle"])
        ledger.append("s", "tool", "alpha green bicycle")  # seq 9: tool weight, 1/3 new
        ledger.append("s", "user", "omega green bicycle")  # seq 10: user weight, 1/3 new
        hits = [h for h in index.search("s", "green bicycle", k=3).results if h.seq in (9, 10)]
        assert hits[0].bm25 == pytest.approx(hits[1].bm25)
        assert [h.seq for h in hits] == [10, 9]


def rows(index: Index) -> list[tuple[object, ...]]:
    with index.read() as conn:
        return conn.execute("SELECT seq, text, context, novelty, collapse FROM events ORDER BY id").fetchall()


class TestContext:
    def test_a_turn_is_found_through_its_neighbours_words(self, tmp_path: Path, ledger: Ledger) -> None:
        add(ledger, "s", FILLER + ["Did you ever go sailing?", "Yes, twice last summer", "The boat was tiny"] + FILLER)
        ix = Index(tmp_path, ledger)
        hits = ix.search("s", "sailing", k=50).results
        assert hits[0].seq == 8  # the direct match first
        assert {h.seq for h in hits} == {6, 7, 8, 9, 10}  # then two turns either side
        ix.close()

    def test_incremental_indexing_gives_the_same_rows_as_a_rebuild(self, tmp_path: Path, ledger: Ledger) -> None:
        ix = Index(tmp_path, ledger)
        for text in FILLER + ["kayak one", "kayak two"] + FILLER[:3]:
            ix.index_session("s", ledger.append_many("s", [Message("user", text, {})]))
        add(ledger, "s", FILLER[3:6])
        ix.index_session("s")
        incremental = rows(ix)
        ix.rebuild()
        assert rows(ix) == incremental
        assert incremental[9][2] == " \u2026 ".join([FILLER[7], "kayak one", FILLER[0], FILLER[1]])  # 2 before, 2 after
        ix.close()

    def test_changed_index_settings_rebuild_with_a_warning(self, tmp_path: Path, ledger: Ledger) -> None:
        add(ledger, "s", FILLER + ["zeppelin"])
        Index(tmp_path, ledger).close()
        ix = Index(tmp_path, ledger, config=EXACT)
        assert any("index settings changed" in w for w in ix.warnings)
        ix.catch_up()
        assert [h.seq for h in ix.search("s", "zeppelin").results] == [8]
        ix.close()


@pytest.fixture(scope="module")
def small_index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    tmp = tmp_path_factory.mktemp("fuzz")
    ledger = Ledger(tmp)
    add(ledger, "s", FILLER + ['quotes " and * and NEAR(a b) and e-mail', "C++ and don't and 🐶"])
    ix = Index(tmp, ledger)  # the default config
    ix.catch_up()
    yield ix
    ix.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=200))
def test_arbitrary_text_through_search_never_raises(small_index: Index, text: str) -> None:
    resp = small_index.search("s", text, k=5)
    assert len(resp.results) <= 5
    assert resp.results or resp.reason


def test_concurrent_first_turns_of_new_sessions_never_fail(tmp_path: Path) -> None:
    """50 threads each start a new session (append, search, index) at once: no error escapes."""
    import threading

    from storage.files.ledger.store import Ledger as _Ledger
    from storage.files.retrieval.db import Index as _Index

    led = _Ledger(tmp_path)
    index = _Index(tmp_path, led)
    errors: list[str] = []

    def work(n: int) -> None:
        try:
            for i in range(2):
                ev = led.append(f"new{n}", "user", f"hello number {i} from visitor {n}")
                index.search(f"new{n}", f"hello number {i}", 8, exclude_seqs=[ev.seq])
                index.index_session(f"new{n}", [ev])
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert index.search("new7", "visitor", 8).results
