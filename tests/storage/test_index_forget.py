"""The index forgets: erased events and erasure records are never indexed (issue 10, §4)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import GENESIS, Event, make_event
from ledger.event import erased_form
from ledger.messages import Message
from retrieval import IndexConfig, sql
from retrieval.indexing import CONTEXT_SEP, erased_by, novelty_gains, plan_rows, regained_novelty, skipped
from retrieval.model import ForgetError, PurgeIncomplete
from storage.files.ledger.store import Ledger
from storage.files.retrieval import db
from storage.files.retrieval.db import Index

MARKER = "Zorblaxian"
ROOT = Path(__file__).resolve().parents[2]
CTX = IndexConfig(context_before=2, context_after=2)

TEXTS = [
    "We talked about the weather in Lisbon today",
    "The train to Porto was late again",
    f"My cat is called {MARKER} and the zorblaxians are her kittens",
    "I am reading a novel about sailors",
    "My sister plays the cello in an orchestra",
    "Lunch was a bowl of ramen with extra egg",
]


def erased(ev: Event) -> Event:
    """The erased form of an event as the index meets it: no text, meta or salt, only the commitment."""
    return erased_form(ev)


def chain(session: str, items: list[tuple[str, str, dict[str, object]]]) -> list[Event]:
    """A well-chained list of events (role, text, meta), built in memory."""
    out: list[Event] = []
    prev = GENESIS
    for seq, (role, text, meta) in enumerate(items):
        ev = make_event(
            session=session,
            seq=seq,
            prev=prev,
            role=role,
            text=text,
            meta=dict(meta),
            ts="2026-01-01T00:00:00.000000Z",
            event_id="evt_" + f"{seq:032x}",
            salt=os.urandom(32),
        )
        out.append(ev)
        prev = bytes.fromhex(ev.chain)
    return out


def record_meta(seqs: list[int]) -> dict[str, object]:
    return {
        "erasure": {
            "v": 1,
            "erased": [{"seq": s, "id": f"evt_{s:032x}", "digest": "0" * 64, "commit": "0" * 64} for s in seqs],
            "reason": None,
        }
    }


def has_marker(s: str) -> bool:
    return "zorblax" in s.casefold()


class TestWhatIsSkipped:
    def test_an_erased_event_and_an_erasure_record_are_skipped_and_a_live_event_is_not(self) -> None:
        evs = chain(
            "s", [("user", "hello there", {}), ("system", "[erasure record: 1 event(s) erased]", record_meta([0]))]
        )
        assert not skipped(evs[0])
        assert skipped(erased(evs[0]))
        assert skipped(evs[1])
        assert erased_by(evs[1]) == [0]
        assert erased_by(evs[0]) == []

    def test_a_system_event_without_an_erasure_object_is_indexed(self) -> None:
        (ev,) = chain("s", [("system", "you are a helpful assistant", {"erasure": "no"})])
        assert not skipped(ev)

    def test_an_erasure_record_lists_only_earlier_well_formed_seqs(self) -> None:
        meta = record_meta([0])
        meta["erasure"]["erased"] += [{"seq": 5}, {"seq": True}, {"seq": -1}, "x"]  # type: ignore[index]
        evs = chain("s", [("user", "a", {}), ("system", "[erasure record: 1 event(s) erased]", meta)])
        assert erased_by(evs[1]) == [0]


class TestPlanSkips:
    def plan(self, events: list[Event]) -> tuple[list[int], dict[int, str], set[str]]:
        seen: set[str] = set()
        p = plan_rows(num=1, events=events, seen=seen, prior=[], before=2, after=2)
        return [r.seq for r in p.rows], {r.seq: r.context for r in p.rows}, seen

    def test_an_erased_event_has_no_row_and_is_in_no_neighbours_context(self) -> None:
        evs = chain("s", [("user", t, {}) for t in TEXTS])
        seqs, ctx, seen = self.plan([erased(e) if e.seq == 2 else e for e in evs])
        assert seqs == [0, 1, 3, 4, 5]
        assert not any(has_marker(c) for c in ctx.values())
        assert not any(has_marker(t) for t in seen)
        # neighbours are the nearest indexed rows: seq 1 sees 0 before it and 3, 4 after it
        assert ctx[1] == CONTEXT_SEP.join([TEXTS[0], TEXTS[3], TEXTS[4]])
        assert ctx[3] == CONTEXT_SEP.join([TEXTS[0], TEXTS[1], TEXTS[4], TEXTS[5]])

    def test_a_plan_with_an_erased_event_equals_the_plan_without_it(self) -> None:
        evs = chain("s", [("user", t, {}) for t in TEXTS])
        with_gap = plan_rows(
            num=1, events=[erased(e) if e.seq == 2 else e for e in evs], seen=set(), prior=[], before=2, after=2
        )
        without = plan_rows(num=1, events=[e for e in evs if e.seq != 2], seen=set(), prior=[], before=2, after=2)
        assert with_gap.rows == without.rows
        assert with_gap.df == without.df

    def test_an_erasure_record_has_no_row_and_its_seqs_are_reported(self) -> None:
        evs = chain(
            "s",
            [("user", t, {}) for t in TEXTS[:3]]
            + [("system", "[erasure record: 1 event(s) erased]", record_meta([2]))],
        )
        p = plan_rows(
            num=1, events=[erased(e) if e.seq == 2 else e for e in evs], seen=set(), prior=[], before=2, after=2
        )
        assert [r.seq for r in p.rows] == [0, 1]
        assert p.erased == [2]
        assert "erasure" not in p.df

    def test_a_later_repeat_of_erased_words_is_judged_new(self) -> None:
        evs = chain("s", [("user", f"{MARKER} owns a kayak", {}), ("user", f"{MARKER} owns a kayak", {})])
        p = plan_rows(num=1, events=[erased(evs[0]), evs[1]], seen=set(), prior=[], before=0, after=0)
        assert [r.novelty for r in p.rows] == [1.0]

    def test_the_after_context_of_earlier_rows_skips_an_erased_event(self) -> None:
        evs = chain("s", [("user", t, {}) for t in TEXTS])
        prior = [(0, TEXTS[0]), (1, TEXTS[1])]
        p = plan_rows(num=1, events=[erased(evs[2]), *evs[3:]], seen=set(), prior=prior, before=2, after=2)
        assert dict(p.context_updates) == {
            0: CONTEXT_SEP.join([TEXTS[1], TEXTS[3]]),
            1: CONTEXT_SEP.join([TEXTS[0], TEXTS[3], TEXTS[4]]),
        }


class TestNoveltyGains:
    def test_only_the_first_remaining_holder_after_a_forgotten_first_holder_gains(self) -> None:
        rows = [(0, "hello"), (2, "kayak trip"), (3, "kayak again"), (4, "sailing")]
        # 1 held "kayak" and "sail" first; "trip" was first said at 2 anyway
        assert novelty_gains({"kayak": 1, "sail": 1}, {"kayak", "sail"}, rows) == {2: 1, 4: 1}

    def test_a_term_held_before_the_forgotten_row_changes_nothing(self) -> None:
        assert novelty_gains({"kayak": 5}, {"kayak"}, [(1, "Kayaks!"), (7, "kayak")]) == {}

    def test_plural_ies_case_and_accents_are_found(self) -> None:
        rows = [(3, "PARTIES tonight"), (4, "CAFÉ"), (5, "party cafe")]
        assert novelty_gains({"party": 1, "cafe": 1}, {"party", "cafe"}, rows) == {3: 1, 4: 1}

    def test_the_rows_are_read_only_until_every_held_term_is_met(self) -> None:
        def rows() -> Iterator[tuple[int, str]]:
            yield (2, "kayak")
            raise AssertionError("read past the last term needed")

        assert novelty_gains({"kayak": 1}, {"kayak"}, rows()) == {2: 1}

    def test_regained_novelty_is_the_division_novelty_makes(self) -> None:
        assert regained_novelty(1 / 3, 3, 1) == 2 / 3
        assert regained_novelty(0.0, 7, 7) == 1.0


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    led = Ledger(tmp_path)
    yield led
    led.close()


def rows(index: Index, session: str) -> list[tuple[object, ...]]:
    with index.read() as conn:
        return conn.execute(
            "SELECT seq, event_id, role, text, context, meta, novelty, collapse FROM events WHERE session = ? ORDER BY seq",
            (session,),
        ).fetchall()


def terms(index: Index) -> list[tuple[object, ...]]:
    with index.read() as conn:
        return conn.execute("SELECT num, term, df FROM terms ORDER BY num, term").fetchall()


class TestIndexSkips:
    def test_erased_events_handed_to_the_index_leave_no_row_term_or_context(
        self, tmp_path: Path, ledger: Ledger
    ) -> None:
        evs = ledger.append_many("s", [Message("user", t, {}) for t in TEXTS])
        index = Index(tmp_path, ledger, config=CTX)
        index.index_session("s", [erased(e) if e.seq == 2 else e for e in evs])
        got = rows(index, "s")
        assert [r[0] for r in got] == [0, 1, 3, 4, 5]
        assert not any(has_marker(str(r[3])) or has_marker(str(r[4])) for r in got)
        assert not any(has_marker(str(t[1])) for t in terms(index))
        assert index.search("s", "zorblaxian zorblaxians").results == []
        assert index.search("s", "cello").results[0].seq == 4
        # the watermark moved past the skipped event: nothing is re-read
        assert index.index_session("s") == []
        index.close()


# -- forgetting (needs Ledger.erase) --------------------------------------------------------------

MARKER_BYTES = (b"blax", b"zorb")  # FTS5 prefix-compresses terms in a segment: grep parts, not the whole word
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
SECRET = f"My cat is called {MARKER}; ZORBLAXIAN kittens, the zorblaxians, were born in Lisbon"


def index_files(data_dir: Path) -> list[Path]:
    """Every file the index writes: index.sqlite, -wal, -shm, any copy moved aside."""
    return sorted(p for p in data_dir.iterdir() if p.is_file() and p.name.startswith("index.sqlite"))


def marker_hits(data_dir: Path) -> dict[str, int]:
    """How often a part of the marker occurs, in any case, in the raw bytes of each index file."""
    out = {}
    for p in index_files(data_dir):
        raw = p.read_bytes().lower()
        n = sum(raw.count(m) for m in MARKER_BYTES)
        if n:
            out[p.name] = n
    return out


def session_texts(n: int, secret_at: int) -> list[str]:
    texts = [f"{FILLER[i % len(FILLER)]} (note {i})" for i in range(n)]
    texts[secret_at] = SECRET
    return texts


def table(index: Index, session: str) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """What a rebuild must reproduce: the session's rows and its terms."""
    with index.read() as conn:
        num = conn.execute("SELECT num FROM watermarks WHERE session = ?", (session,)).fetchone()[0]
        got = conn.execute(
            "SELECT seq, event_id, role, ts, text, context, meta, digest, chain, novelty, collapse FROM events"
            " WHERE session = ? ORDER BY seq",
            (session,),
        ).fetchall()
        df = conn.execute("SELECT term, df FROM terms WHERE num = ? ORDER BY term", (num,)).fetchall()
    return got, df


def results(index: Index, session: str, queries: list[str]) -> list[list[tuple[int, float]]]:
    return [[(h.seq, round(h.score, 9)) for h in index.search(session, q, k=20).results] for q in queries]


QUERIES = ["zorblaxian", "Zorblaxians", "cat kittens", "Lisbon weather", "cello orchestra", "train Porto", "garden"]


def erase(led: Ledger, session: str, seqs: list[int]) -> None:
    led.erase(session, seqs)


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Ledger, Index]:
    data = tmp_path / "data"
    led = Ledger(data)
    led.append_many("s", [Message("user", t, {}) for t in session_texts(40, 17)])
    led.append_many("other", [Message("user", t, {}) for t in FILLER])
    index = Index(data, led, config=CTX)
    index.catch_up()
    yield data, led, index
    index.close()
    led.close()


class TestForget:
    def test_before_forgetting_the_marker_is_in_the_files_and_found(self, world: tuple[Path, Ledger, Index]) -> None:
        data, _, index = world
        assert index.search("s", "zorblaxians").results[0].seq == 17
        assert marker_hits(data)  # the grep below can see it

    def test_after_forgetting_no_index_file_holds_the_marker_in_any_case_or_stem(
        self, world: tuple[Path, Ledger, Index]
    ) -> None:
        data, led, index = world
        erase(led, "s", [17])
        done = index.forget_events("s", [17])
        assert done.removed == [17]
        assert done.recontexted == [15, 16, 18, 19]  # the two turns either side held it in their context
        assert marker_hits(data) == {}
        assert (data / "index.sqlite-wal").stat().st_size == 0
        for q in ("zorblaxian", "Zorblaxian", "ZORBLAXIAN", "zorblaxians", "kittens"):
            assert index.search("s", q).results == [], q
        assert index.search("s", "cello orchestra").results[0].text.startswith("My sister plays the cello")
        assert index.search("other", "cello").results[0].seq == 3

    def test_forgetting_equals_a_rebuild_from_the_erased_ledger(
        self, tmp_path: Path, world: tuple[Path, Ledger, Index]
    ) -> None:
        data, led, index = world
        later = led.append("s", "user", "Our puppies were born on a rainy night")  # "born" was first said at 17
        index.index_session("s")
        erase(led, "s", [17])
        done = index.forget_events("s", [17])
        assert done.rescored == [later.seq]  # "born" is new again there
        fresh = Index(tmp_path / "copy", Ledger(data), config=CTX)  # a new index file over the same ledger
        fresh.catch_up()
        assert table(index, "s") == table(fresh, "s")
        assert results(index, "s", QUERIES) == results(fresh, "s", QUERIES)
        index.rebuild()
        assert table(index, "s") == table(fresh, "s")
        fresh.close()
        fresh.ledger.close()

    def test_indexing_an_erasure_record_forgets_what_it_lists(self, world: tuple[Path, Ledger, Index]) -> None:
        # the ledger was erased by another process, or the process died before the index forgot
        data, led, index = world
        erase(led, "s", [17])
        assert index.index_session("s") == []
        assert marker_hits(data) == {}
        assert index.search("s", "zorblaxian").results == []

    def test_a_new_index_over_an_erased_ledger_never_holds_the_marker(
        self, tmp_path: Path, world: tuple[Path, Ledger, Index]
    ) -> None:
        data, led, _ = world
        erase(led, "s", [17])
        fresh = Index(tmp_path / "copy", led, config=CTX)
        fresh.catch_up()
        fresh._w().execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert marker_hits(tmp_path / "copy") == {}
        fresh.close()

    def test_the_erasure_record_gets_no_row(self, world: tuple[Path, Ledger, Index]) -> None:
        data, led, index = world
        record = led.erase("s", [17]).record
        index.index_session("s")
        assert record.seq not in [r[0] for r in rows(index, "s")]
        assert index.search("s", "erasure record erased").results == []

    def test_forgetting_again_is_a_no_op(self, world: tuple[Path, Ledger, Index]) -> None:
        data, led, index = world
        erase(led, "s", [17])
        index.forget_events("s", [17])
        before = table(index, "s")
        again = index.forget_events("s", [17])
        assert (again.removed, again.recontexted, again.rescored) == ([], [], [])
        assert table(index, "s") == before

    @pytest.mark.parametrize(
        ("session", "seqs", "says"),
        [
            ("s", [99], "no event at seq 99 (the ledger holds 40)"),
            ("s", [3], "seq 3 is not erased in the ledger"),
            ("nobody", [0], "session nobody: not in the ledger"),
            ("s", [], "seqs: none given"),
            ("s", [-1], "seqs: -1 is not a seq"),
            ("s", [True], "seqs: True is not a seq"),
            ("../x", [0], "session"),
        ],
    )
    def test_an_unusable_request_is_a_one_line_error_and_changes_nothing(
        self, world: tuple[Path, Ledger, Index], session: str, seqs: list[int], says: str
    ) -> None:
        data, _, index = world
        before = table(index, "s")
        with pytest.raises(ForgetError) as err:
            index.forget_events(session, seqs)
        assert says in str(err.value) and "\n" not in str(err.value)
        assert table(index, "s") == before

    def test_a_corrupted_ledger_is_a_one_line_error_and_changes_nothing(
        self, world: tuple[Path, Ledger, Index]
    ) -> None:
        data, led, index = world
        erase(led, "s", [17])
        before = table(index, "s")
        path = led.log_path("s")
        raw = path.read_bytes()
        path.write_bytes(raw.replace(b"Porto was late", b"Porto was LATE", 1))
        with pytest.raises(ForgetError, match=r"^session s: ledger is corrupted \(line \d+") as err:
            index.forget_events("s", [17])
        assert "\n" not in str(err.value)
        assert table(index, "s") == before

    def test_forgetting_with_a_reader_open_waits_for_it_then_purges(self, world: tuple[Path, Ledger, Index]) -> None:
        data, led, index = world
        erase(led, "s", [17])
        holding, release = threading.Event(), threading.Event()
        seen_by_reader: list[str] = []

        def reader() -> None:
            conn = sqlite3.connect(data / "index.sqlite")
            conn.execute("BEGIN")
            seen_by_reader.append(
                conn.execute("SELECT text FROM events WHERE seq = 17 AND session = 's'").fetchone()[0]
            )
            holding.set()
            release.wait(10)
            seen_by_reader.append(
                str(conn.execute("SELECT count(*) FROM events WHERE seq = 17 AND session = 's'").fetchone()[0])
            )
            conn.commit()
            conn.close()

        t = threading.Thread(target=reader)
        t.start()
        assert holding.wait(10)
        threading.Timer(0.3, release.set).start()
        done = index.forget_events("s", [17])  # the checkpoint waits for the reader's snapshot to go
        t.join()
        assert done.removed == [17]
        assert seen_by_reader == [SECRET, "1"]  # its snapshot was kept whole until it let go
        assert marker_hits(data) == {}
        assert index.search("s", "zorblaxian").results == []

    def test_a_reader_that_never_lets_go_leaves_the_purge_incomplete_and_says_so(
        self, world: tuple[Path, Ledger, Index], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        data, led, index = world
        monkeypatch.setattr(db, "PURGE_WAIT_S", 0.2)
        erase(led, "s", [17])
        conn = sqlite3.connect(data / "index.sqlite")
        conn.execute("BEGIN")
        conn.execute("SELECT count(*) FROM events").fetchone()
        with pytest.raises(PurgeIncomplete) as err:
            index.forget_events("s", [17])
        assert "forget again" in str(err.value) and "\n" not in str(err.value)
        assert index.search("s", "zorblaxian").results == []  # the rows are gone already
        conn.commit()
        conn.close()
        assert index.forget_events("s", [17]).removed == []
        assert marker_hits(data) == {}

    def test_an_index_searched_from_many_threads_meanwhile_stays_usable(
        self, world: tuple[Path, Ledger, Index]
    ) -> None:
        data, led, index = world
        erase(led, "s", [17])
        stop = threading.Event()
        errors: list[BaseException] = []

        def searcher() -> None:
            while not stop.is_set():
                try:
                    hits = index.search("s", "cello zorblaxian").results
                    assert hits and all(h.seq != 17 or h.text == SECRET for h in hits)
                except BaseException as exc:  # noqa: BLE001 - collected and re-raised below
                    errors.append(exc)
                    return

        threads = [threading.Thread(target=searcher) for _ in range(3)]
        for t in threads:
            t.start()
        index.forget_events("s", [17])
        stop.set()
        for t in threads:
            t.join()
        assert errors == []
        assert marker_hits(data) == {}


class TestTwoWriters:
    def test_a_forget_by_another_writer_while_indexing_makes_the_indexer_start_again(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Two Index objects on one file stand for two processes: separate connections, separate locks.
        data = tmp_path / "d"
        led_a, led_b = Ledger(data), Ledger(data)
        led_b.append_many("s", [Message("user", t, {}) for t in session_texts(20, 19)])
        a, b = Index(data, led_a, config=CTX), Index(data, led_b, config=CTX)
        b.catch_up()
        new = led_b.append("s", "user", "Our puppies were born on a rainy night")
        real = db.plan_rows
        calls = []

        def plan_then_forget(**kw: object) -> object:
            out = real(**kw)  # type: ignore[arg-type]
            if not calls:  # B planned with the secret among its neighbours; A forgets it now
                calls.append(1)
                erase(led_a, "s", [19])
                a.forget_events("s", [19])
            return out

        monkeypatch.setattr(db, "plan_rows", plan_then_forget)
        assert b.index_session("s", [new]) == []
        monkeypatch.setattr(db, "plan_rows", real)
        assert not any(has_marker(str(r[4])) for r in rows(b, "s"))
        assert marker_hits(data) == {}
        fresh = Index(tmp_path / "copy", Ledger(data), config=CTX)
        fresh.catch_up()
        assert table(b, "s") == table(fresh, "s")
        for ix in (fresh, a, b):
            ix.close()
        for led in (fresh.ledger, led_a, led_b):
            led.close()


class TestCrash:
    def test_a_forget_killed_before_its_purge_is_finished_when_the_index_is_next_opened(
        self, world: tuple[Path, Ledger, Index]
    ) -> None:
        data, led, index = world
        erase(led, "s", [17])
        index.close()
        child = (
            "import os, sys\n"
            "from retrieval import IndexConfig\nfrom storage.files.retrieval.db import Index\n"
            "from storage.files.retrieval.db import Index as I\n"
            "I._purge = lambda self, nums: os._exit(9)  # SIGKILL-like: no close, no checkpoint\n"
            "Index(sys.argv[1], config=IndexConfig(context_before=2, context_after=2)).forget_events('s', [17])\n"
        )
        run = subprocess.run([sys.executable, "-c", child, str(data)], cwd=ROOT, capture_output=True, timeout=120)
        assert run.returncode == 9, run.stderr
        assert marker_hits(data)  # the rows are gone, the words are not: old FTS5 segments, the WAL
        again = Index(data, Ledger(data), config=CTX)  # the restart
        assert marker_hits(data) == {}
        assert again.search("s", "zorblaxian").results == []
        assert again.forget_events("s", [17]).removed == []
        again.close()
        again.ledger.close()


class TestPurge:
    def test_a_file_written_without_secure_delete_is_vacuumed_on_the_first_forget(
        self, world: tuple[Path, Ledger, Index]
    ) -> None:
        data, led, index = world
        # what an older version left: freed pages still holding the words, and no "zeroed" mark
        raw = sqlite3.connect(data / "index.sqlite")
        raw.execute("PRAGMA secure_delete = OFF")
        raw.execute("CREATE TABLE old_copy (t TEXT)")
        raw.executemany("INSERT INTO old_copy VALUES (?)", [(SECRET * 20,)] * 50)
        raw.commit()
        raw.execute("DROP TABLE old_copy")
        raw.execute("DELETE FROM retrieval_meta WHERE key = 'zeroed'")
        raw.commit()
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        raw.close()
        erase(led, "s", [17])
        index.forget_events("s", [17])
        assert marker_hits(data) == {}

    def test_a_copy_moved_aside_as_corrupt_is_deleted(self, world: tuple[Path, Ledger, Index]) -> None:
        data, led, index = world
        aside = data / "index.sqlite.corrupt-20260101T000000Z-000000001"
        aside.write_bytes(SECRET.encode())
        erase(led, "s", [17])
        index.forget_events("s", [17])
        assert not aside.exists()
        assert marker_hits(data) == {}

    def test_a_deleted_session_is_purged(self, world: tuple[Path, Ledger, Index]) -> None:
        data, led, index = world
        with pytest.raises(ForgetError, match="session s: still in the ledger"):
            index.purge_session("s")
        led.forget("s")
        shutil.rmtree(data / "sessions" / "s")
        index.purge_session("s")
        assert marker_hits(data) == {}
        assert index.search("s", "zorblaxian").results == []
        assert index.search("other", "cello").results[0].seq == 3
        index.purge_session("s")  # again: nothing left to drop, no error

    def test_a_session_dropped_by_catch_up_is_purged(self, world: tuple[Path, Ledger, Index]) -> None:
        data, led, index = world
        led.forget("s")
        shutil.rmtree(data / "sessions" / "s")
        assert index.catch_up() == ["session s: no longer in the ledger; dropped from the index"]
        assert marker_hits(data) == {}

    def test_the_optimize_statement_names_the_sessions_table(self) -> None:
        assert sql.optimize_fts(7) == "INSERT INTO events_fts_7 (events_fts_7) VALUES ('optimize')"


VOCAB = ["kayak", "kayaks", "party", "parties", "café", "CAFE", "Cafés", "run", "running", "runs", "Zorblaxian"]
VOCAB += ["zorblaxians", "Lisbon", "cello", "the", "a", "42", "naïve", "NAIVE", "studies", "study", "x"]


class TestForgetEqualsRebuild:
    def test_novelty_is_rejudged_for_plural_case_and_accented_forms(self, tmp_path: Path) -> None:
        data = tmp_path / "d"
        led = Ledger(data)
        texts = [
            "hello there",
            "The parties at the café were loud",
            "filler words",
            "PARTIES tonight",
            "CAFÉ",
            "cafes",
        ]
        led.append_many("s", [Message("user", t, {}) for t in texts])
        index = Index(data, led, config=CTX)
        index.catch_up()
        erase(led, "s", [1])
        # "party" is new again at 3 (an ASCII row, found by its key "part"), "cafe" at 4 (folded from É)
        assert index.forget_events("s", [1]).rescored == [3, 4]
        fresh = Index(tmp_path / "copy", led, config=CTX)
        fresh.catch_up()
        assert table(index, "s") == table(fresh, "s")
        fresh.close()
        index.close()
        led.close()

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(
        texts=st.lists(st.lists(st.sampled_from(VOCAB), max_size=5).map(" ".join), min_size=2, max_size=12),
        data=st.data(),
    )
    def test_random_erasures_leave_the_index_a_rebuild_would_build(
        self, tmp_path: Path, texts: list[str], data: st.DataObject
    ) -> None:
        root = Path(tempfile.mkdtemp(dir=tmp_path))
        led = Ledger(root / "d")
        led.append_many("s", [Message("user", t, {}) for t in texts])
        index = Index(root / "d", led, config=CTX)
        index.catch_up()
        rounds = data.draw(st.integers(1, 2))
        live = list(range(len(texts)))
        for _ in range(rounds):
            if not live:
                break
            seqs = sorted(data.draw(st.sets(st.sampled_from(live), min_size=1, max_size=3)))
            erase(led, "s", seqs)
            index.forget_events("s", seqs)
            live = [s for s in live if s not in seqs]
        fresh = Index(root / "copy", led, config=CTX)
        fresh.catch_up()
        assert table(index, "s") == table(fresh, "s")
        fresh.close()
        index.close()
        led.close()
