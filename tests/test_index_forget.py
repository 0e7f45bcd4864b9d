"""The index forgets: erased events and erasure records are never indexed (issue 10, §4)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ledger import GENESIS, Event, Ledger, Message, make_event
from retrieval import Index, IndexConfig
from retrieval.indexing import CONTEXT_SEP, erased_by, plan_rows, skipped

MARKER = "Zorblaxian"
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
    """The erased form of an event as the index meets it: no text, meta or salt."""
    return ev._replace(text="", meta={}, salt="")


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
