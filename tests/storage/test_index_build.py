"""Building a session's index in chunks, planned one chunk ahead (storage.common.retrieval.indexer), gives the rows,
terms and FTS5 matches that indexing one event at a time gives; the text fast paths give what the general path gives."""

from __future__ import annotations

import gc
import unicodedata
from pathlib import Path

import pytest

from ledger.importer import Imported
from ledger.messages import Message
from retrieval import IndexConfig
from retrieval.text import content_terms, fold, stem
from storage.common.retrieval import indexer
from storage.files.ledger.store import Ledger
from storage.files.retrieval.db import Index

CTX = IndexConfig(context_before=2, context_after=2)
WORDS = "cat dogs running quickly Lisbon café Über naïve cello trains stopped studies glass ramen Porto".split()


def texts(n: int) -> list[str]:
    return [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(1 + i % 5)) + f" note{i % 13}" for i in range(n)]


def snapshot(index: Index) -> tuple[list[tuple[object, ...]], ...]:
    with index.read() as conn:
        return (
            conn.execute("SELECT * FROM events ORDER BY id").fetchall(),
            conn.execute("SELECT * FROM terms ORDER BY num, term").fetchall(),
            conn.execute("SELECT session, last_seq, last_chain FROM watermarks ORDER BY session").fetchall(),
        )


def hits(index: Index, queries: list[str]) -> list[list[tuple[int, float]]]:
    return [[(h.seq, round(h.score, 9)) for h in index.search("s", q, k=20).results] for q in queries]


class TestChunkedBuild:
    def test_a_build_in_many_chunks_equals_one_event_at_a_time(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        led = Ledger(tmp_path / "d")
        one_by_one = Index(tmp_path / "one", led, config=CTX)
        for t in texts(60):
            ev = led.append("s", "user", t)
            one_by_one.index_session("s", [ev])
        monkeypatch.setattr(indexer, "CHUNK", 7)  # 9 chunks: every one but the first planned while another is written
        seen: list[int] = []
        chunked = Index(tmp_path / "chunked", led, config=CTX)
        assert chunked.catch_up(lambda _s, n: seen.append(n)) == []
        assert seen == [7] * 8 + [4]
        assert snapshot(chunked) == snapshot(one_by_one)
        with chunked.write() as w:  # FTS5's own check that its index holds exactly the rows' text and context
            w.execute("INSERT INTO events_fts_1 (events_fts_1) VALUES ('integrity-check')")
        queries = ["cat", "dogs running", "café", "naive cello", "note4", "stopped trains studies"]
        assert hits(chunked, queries) == hits(one_by_one, queries)
        for ix in (chunked, one_by_one):
            ix.close()
        led.close()

    def test_index_session_reports_each_chunk_it_writes(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        led = Ledger(tmp_path / "d")
        led.append_many("s", [Message("user", t, {}) for t in texts(23)])
        monkeypatch.setattr(indexer, "CHUNK", 10)
        index = Index(tmp_path / "d", led, config=CTX)
        told: list[tuple[str, int]] = []
        assert index.index_session("s", progress=lambda s, n: told.append((s, n))) == []
        assert told == [("s", 10), ("s", 10), ("s", 3)]
        with index.read() as conn:  # the build's merge options are set back to FTS5's defaults
            assert dict(conn.execute("SELECT k, v FROM events_fts_1_config WHERE k LIKE '%merge'")) == {
                "automerge": 4,
                "crisismerge": 16,
            }
        index.close()
        led.close()

    def test_a_build_runs_with_a_big_page_cache_and_no_collector_then_sets_both_back(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        led = Ledger(tmp_path / "d")
        led.append_many("s", [Message("user", t, {}) for t in texts(23)])
        monkeypatch.setattr(indexer, "CHUNK", 10)
        index = Index(tmp_path / "d", led, config=CTX)
        during: list[tuple[int, bool]] = []

        def watch(_session: str, _n: int) -> None:  # called after each chunk is written, on the writing thread
            during.append((index._w().execute("PRAGMA cache_size").fetchone()[0], gc.isenabled()))

        with index.write() as w:
            cache = w.execute("PRAGMA cache_size").fetchone()[0]
        assert gc.isenabled()
        assert index.index_session("s", progress=watch) == []
        assert during == [(-indexer.BUILD_CACHE_KIB, False)] * 3
        with index.write() as w:
            assert w.execute("PRAGMA cache_size").fetchone()[0] == cache
        assert gc.isenabled()
        index.close()
        led.close()

    def test_a_build_that_fails_half_way_sets_both_back_and_the_next_one_finishes_it_as_one_pass_does(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        led = Ledger(tmp_path / "d")
        led.append_many("s", [Message("user", t, {}) for t in texts(47)])
        monkeypatch.setattr(indexer, "CHUNK", 10)
        index = Index(tmp_path / "d", led, config=CTX)
        with index.write() as w:
            cache = w.execute("PRAGMA cache_size").fetchone()[0]

        def fail_on_the_second_chunk(_session: str, _n: int, seen: list[int] = []) -> None:  # noqa: B006 - a counter
            seen.append(1)
            if len(seen) == 2:
                raise MemoryError("the build ran out of memory")

        with pytest.raises(MemoryError):
            index.index_session("s", progress=fail_on_the_second_chunk)
        assert gc.isenabled()
        with index.write() as w:
            assert w.execute("PRAGMA cache_size").fetchone()[0] == cache
        assert index.index_session("s") == []  # from the watermark the failed build left
        whole = Index(tmp_path / "whole", led, config=CTX)
        whole.catch_up()
        assert snapshot(index) == snapshot(whole)
        for ix in (index, whole):
            ix.close()
        led.close()

    def test_an_imports_lazy_events_are_indexed_from_one_pass_of_the_ledger(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        led = Ledger(tmp_path / "d")
        led.append_many("s", [Message("user", t, {}) for t in texts(40)])
        first, last = led.read_events("s", [0, 39])
        imported = Imported(led, "s", first, last)  # what `ledger import` hands the index: each item read by offset
        monkeypatch.setattr(indexer, "CHUNK", 10)
        monkeypatch.setattr(indexer, "TAIL_BY_OFFSET", 5)
        reads: list[int] = []
        read_events = led.read_events
        monkeypatch.setattr(led, "read_events", lambda s, seqs: reads.append(1) or read_events(s, seqs))
        lazy = Index(tmp_path / "lazy", led, config=CTX)
        assert lazy.index_session("s", imported) == []
        assert reads == []  # not one read per event: one streaming pass
        whole = Index(tmp_path / "whole", led, config=CTX)
        whole.catch_up()
        assert snapshot(lazy) == snapshot(whole)
        for ix in (lazy, whole):
            ix.close()
        led.close()

    def test_an_erasure_record_met_while_building_in_chunks_forgets_as_one_pass_does(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        led = Ledger(tmp_path / "d")
        led.append_many("s", [Message("user", t, {}) for t in texts(30)])
        led.erase("s", [3, 11])
        led.append_many("s", [Message("user", t, {}) for t in texts(25)])
        whole = Index(tmp_path / "whole", led, config=CTX)
        whole.catch_up()
        monkeypatch.setattr(indexer, "CHUNK", 4)
        chunked = Index(tmp_path / "chunked", led, config=CTX)
        chunked.catch_up()
        assert snapshot(chunked) == snapshot(whole)
        for ix in (chunked, whole):
            ix.close()
        led.close()


class TestTextFastPaths:
    @pytest.mark.parametrize("text", ["Hello World", "", "x_y-z 12", "MIXED case ÉTÉ", "Straße ﬁne", "e\u0301", "İı"])
    def test_fold_is_nfkd_without_marks_then_casefold(self, text: str) -> None:
        decomposed = unicodedata.normalize("NFKD", text)
        assert fold(text) == "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()

    def test_content_terms_are_distinct_stems_in_first_seen_order(self) -> None:
        assert content_terms("The dogs were running; a dog runs. Café, CAFE, 1 2 x") == ["dog", "run", "cafe", "1", "2"]
        assert stem("studies") == "study" and stem("stopped") == "stop"
