"""The search index on PostgreSQL (storage.pg.index.PgIndex) against the SQLite one, on the same ledger.

Equal means: the same hits in the same order, with the same bm25, own-text bm25, collapse and score
(to 1e-9), the same flags and the same `reason`/`match`/`unused_terms`.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ledger.messages import Message
from retrieval import IndexConfig, SearchError, SearchResponse
from retrieval.model import ForgetError
from storage.files.ledger.store import Ledger
from storage.files.retrieval.db import Index
from storage.pg.connect import Database
from storage.pg.index import PgIndex
from storage.pg.terms import term_counts

pytestmark = pytest.mark.pg

CORPUS = [
    ("user", "We talked about the weather in Lisbon today"),
    ("assistant", "Lisbon weather is usually mild in spring"),
    ("user", "The train to Porto was late again, the trains always are"),
    ("user", "I am reading a novel about sailors and their ships"),
    ("assistant", "Sailing novels are a wonderful genre; which sailors?"),
    ("user", "My sister plays the cello in an orchestra in Zürich"),
    ("user", "Lunch was a bowl of ramen with extra egg"),
    ("user", "The garden needs watering twice a week, roses especially"),
    ("user", "Our team shipped the release on Friday 16 June 2023"),
    ("assistant", "Congratulations on shipping the release!"),
    ("user", "The museum had a new exhibit on glass and ceramics"),
    ("user", "My cat Mochi loves the garden and chases birds"),
    ("user", "Mochi is a grey cat, nine years old"),
    ("assistant", "Mochi sounds lovely. Cats love gardens."),
    ("user", "I started running: 5 km every morning before work"),
    ("user", "Running in the rain is the best, honestly"),
    ("user", "café crème at the café near the station, naïve as it sounds"),
    ("user", "🙂🙂"),
    ("user", ""),
    ("user", "The release of the new glass exhibit was delayed to July"),
]
QUERIES = [
    "Mochi",
    "what does my cat like?",
    "garden roses watering",
    "release",
    "Lisbon weather",
    "trains to Porto",
    "sailors novel ships",
    "cafe creme",
    "running every morning",
    "what happened on 16 June 2023?",
    "cello orchestra sister Zurich",
    "glass",
    "nothing matches this zzzyzx",
    "the and of",
]
HOSTILE = [
    '"', "'", "''", "\\", 'cat"', "dogs AND", "NOT x", "a:b", "e-mail", "-rust", "*x", "C++", "don't",
    "x\x00y", "\x00", "🙂", "🙂 mochi 🙂", "(((", ")", "a & b | !c", "'mochi' | 'cat'", "mochi:*", "<->",
    "x" * 1000, " ".join(["mochi"] * 300), " ".join(f"w{i}" for i in range(500)), "%s %(x)s {}",
    "'; DROP TABLE search_events; --", "\ud800", "Ǆ ﬁ ß ẞ", "١٢٣ 漢字 かな",
]


def key(resp: SearchResponse) -> tuple[Any, ...]:
    return (
        resp.reason, resp.match, tuple(resp.unused_terms),
        tuple(
            (h.seq, h.rank, round(h.bm25, 9), round(h.score, 9), round(h.collapse, 9), h.context_only, h.echo,
             round(h.relative, 9), h.text, h.meta, h.digest, h.chain, h.event_id, h.ts, h.role)
            for h in resp.results
        ),
    )  # fmt: skip


def fill(ledger: Ledger, session: str, corpus: list[tuple[str, str]] = CORPUS) -> None:
    ledger.append_many(session, [Message(role, text, {"speaker": "Ana"} if role == "user" else {}) for role, text in corpus])


@pytest.fixture
def db(pg_url: str) -> Iterator[Database]:
    with Database(pg_url) as d:
        yield d


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    led = Ledger(tmp_path / "data")
    yield led
    led.close()


def both(tmp_path: Path, ledger: Ledger, db: Database, config: IndexConfig | None = None) -> tuple[Index, PgIndex]:
    lite = Index(tmp_path / "data", ledger, config=config)
    pg = PgIndex(db, ledger, config=config)
    return lite, pg


class TestSameAsSqlite:
    @pytest.mark.parametrize("config", [IndexConfig(), IndexConfig(context_before=0, context_after=0)])
    def test_every_query_gives_the_same_hits_and_figures(
        self, tmp_path: Path, ledger: Ledger, db: Database, config: IndexConfig
    ) -> None:
        fill(ledger, "s1")
        lite, pg = both(tmp_path, ledger, db, config)
        pg.catch_up()
        for q in QUERIES:
            for k in (1, 3, 8, 50):
                assert key(pg.search("s1", q, k)) == key(lite.search("s1", q, k)), (q, k)
        lite.close()

    def test_a_query_of_more_terms_than_one_batch_gives_the_same_hits(self, tmp_path: Path, ledger: Ledger, db: Database) -> None:
        """Past MAX_QUERY_TERMS the terms are cut in batches: their row counts are read batch by batch."""
        fill(ledger, "s1")
        lite, pg = both(tmp_path, ledger, db)
        filler = " ".join(f"zq{i}x" for i in range(40))
        for q in (f"{filler} Mochi garden", f"Lisbon {filler} release glass", filler):
            assert key(pg.search("s1", q, 5)) == key(lite.search("s1", q, 5)), q
        lite.close()

    def test_non_user_seqs_are_the_same_every_role_but_user(self, tmp_path: Path, ledger: Ledger, db: Database) -> None:
        """chat.withheld asks both backends which indexed lines are not the person's own (assistant, system, tool)."""
        fill(ledger, "s1", [("user", "a"), ("assistant", "b"), ("system", "c"), ("tool", "d"), ("user", "e"), ("assistant", "f")])
        lite, pg = both(tmp_path, ledger, db)
        lite.index_session("s1")
        pg.index_session("s1")
        for after in (-1, 0, 1, 3, 5):
            expected = [s for s in (1, 2, 3, 5) if s > after]
            assert pg.non_user_seqs("s1", after) == lite.non_user_seqs("s1", after) == expected, after
        assert pg.non_user_seqs("nope", -1) == lite.non_user_seqs("nope", -1) == []
        lite.close()

    def test_exclusions_give_the_same_hits(self, tmp_path: Path, ledger: Ledger, db: Database) -> None:
        fill(ledger, "s1")
        lite, pg = both(tmp_path, ledger, db)
        for q in QUERIES:
            for exclude in ([11], [11, 12, 13], list(range(0, 20, 2))):
                assert key(pg.search("s1", q, 3, exclude)) == key(lite.search("s1", q, 3, exclude)), (q, exclude)
        lite.close()

    def test_an_index_kept_up_turn_by_turn_equals_one_built_at_once(
        self, tmp_path: Path, ledger: Ledger, db: Database
    ) -> None:
        lite, pg = both(tmp_path, ledger, db)
        for role, text in CORPUS:
            evs = ledger.append_many("s1", [Message(role, text, {})])
            pg.index_session("s1", evs)
        fresh = PgIndex(db, ledger)
        turn_by_turn = [key(pg.search("s1", q, 8)) for q in QUERIES]
        fresh.rebuild()
        assert [key(fresh.search("s1", q, 8)) for q in QUERIES] == turn_by_turn
        assert turn_by_turn == [key(lite.search("s1", q, 8)) for q in QUERIES]
        lite.close()

    def test_pruned_searches_give_the_same_hits_as_sqlite(
        self, tmp_path: Path, ledger: Ledger, db: Database, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Enough rows that pruning (search_rows.scan_rows) both proves its answer and has to score every row."""
        from storage.pg import search_rows

        rng = random.Random(5)
        common = ["garden", "release", "train", "music", "John", "Maria"]
        rare = ["kayak", "violin", "ramen", "glacier", "origami", "tango", "saffron", "lantern"]
        texts = [
            " ".join(rng.choice(common) for _ in range(rng.randint(1, 6)))
            + " " + " ".join(rng.choice(rare) for _ in range(rng.choice((0, 0, 0, 1, 2))))
            for _ in range(600)
        ]  # fmt: skip
        ledger.append_many("s1", [Message("user", t, {}) for t in texts])
        lite, pg = both(tmp_path, ledger, db)
        statements: list[int] = []
        real = search_rows._ranked

        def counted(*a: Any, **kw: Any) -> Any:
            statements.append(1)
            return real(*a, **kw)

        monkeypatch.setattr(search_rows, "_ranked", counted)
        queries = [" ".join(rng.sample(common + rare, rng.randint(1, 5))) for _ in range(60)]
        for q in queries:
            for k, exclude in ((1, []), (8, []), (3, list(range(0, 600, 3)))):
                before = len(statements)
                assert key(pg.search("s1", q, k, exclude)) == key(lite.search("s1", q, k, exclude)), (q, k)
                statements[before:] = [len(statements) - before]
        assert 1 in statements and max(statements) >= 2, "pruning was never proved, or never failed: the corpus tests nothing"
        monkeypatch.setattr(search_rows, "MAX_SETS", 0)  # no sets of terms: the second statement reads every row it may need
        for q in queries:
            for k, exclude in ((1, []), (8, []), (3, list(range(0, 600, 3)))):
                assert key(pg.search("s1", q, k, exclude)) == key(lite.search("s1", q, k, exclude)), (q, k)
        lite.close()

    def test_a_large_session_keeps_every_term_under_the_exact_bound_as_sqlite_does(
        self, tmp_path: Path, ledger: Ledger, db: Database
    ) -> None:
        """From prune_min_events on, with exact_prune (the default) both backends give the exhaustive answer; with share
        pruning (exact_prune=False) both drop the same common terms, so the answers change the same way."""
        rng = random.Random(11)
        common, rare = ["garden", "release", "train", "music"], ["kayak", "violin", "ramen", "glacier"]
        texts = [" ".join(rng.choice(common) for _ in range(3)) + (" " + rng.choice(rare) if i % 7 == 0 else "") for i in range(300)]
        ledger.append_many("s1", [Message("user", t, {}) for t in texts])
        exhaustive = PgIndex(db, ledger, config=IndexConfig(prune_min_events=10**9))
        queries = [f"{c} {r}" for c in common for r in rare]
        want = [key(exhaustive.search("s1", q, 8)) for q in queries]
        lite, pg = both(tmp_path / "exact", ledger, db, IndexConfig(prune_min_events=100))
        assert [key(pg.search("s1", q, 8)) for q in queries] == want == [key(lite.search("s1", q, 8)) for q in queries]
        lite.close()
        lite, pg = both(tmp_path / "share", ledger, db, IndexConfig(prune_min_events=100, exact_prune=False, prune_share=0.05))
        shared = [key(pg.search("s1", q, 8)) for q in queries]
        assert shared == [key(lite.search("s1", q, 8)) for q in queries]
        assert shared != want, "share pruning changed no answer: the corpus cannot tell the two apart"
        lite.close()

    def test_explain_names_the_same_terms_and_figures(self, tmp_path: Path, ledger: Ledger, db: Database) -> None:
        fill(ledger, "s1")
        lite, pg = both(tmp_path, ledger, db)
        for q in ("Mochi garden", "release glass", "cafe"):
            a, b = lite.search("s1", q, 5, explain=True), pg.search("s1", q, 5, explain=True)
            assert [h.explain for h in b.results] == [h.explain for h in a.results], q
        lite.close()

    def test_terms_are_the_fts5_tokenizers(self) -> None:
        assert term_counts(["Dogs running, the DOG ran", "Café crème", "", "🙂"]) == [
            {"dog": 2, "run": 1, "the": 1, "ran": 1}, {"cafe": 1, "creme": 1}, {}, {"🙂": 1},
        ]  # FTS5's unicode61 keeps symbols such as emoji as tokens (and counts them in a row's length)


class TestHostileQueries:
    def test_hostile_strings_give_a_result_or_a_search_error_never_a_sql_error(
        self, tmp_path: Path, ledger: Ledger, db: Database
    ) -> None:
        fill(ledger, "s1")
        lite, pg = both(tmp_path, ledger, db)
        for q in HOSTILE:
            try:
                got = pg.search("s1", q, 5)
            except SearchError:
                with pytest.raises(SearchError):
                    lite.search("s1", q, 5)
                continue
            except psycopg.Error as exc:  # pragma: no cover - what this test exists to catch
                pytest.fail(f"query {q[:40]!r}: SQL error {exc}")
            assert key(got) == key(lite.search("s1", q, 5)), q[:40]
        lite.close()

    @pytest.mark.parametrize("bad", [0, -1, 51, "3", 2.0, True, None])
    def test_a_bad_k_is_a_search_error(self, ledger: Ledger, db: Database, bad: Any) -> None:
        fill(ledger, "s1")
        with pytest.raises(SearchError):
            PgIndex(db, ledger).search("s1", "mochi", bad)

    @pytest.mark.parametrize("session", ["", "../x", "a b", "x" * 300, "s\x00"])
    def test_a_bad_session_id_is_a_search_error(self, ledger: Ledger, db: Database, session: str) -> None:
        with pytest.raises(SearchError):
            PgIndex(db, ledger).search(session, "mochi", 3)

    def test_text_with_nul_and_odd_unicode_is_indexed_and_found(self, ledger: Ledger, db: Database) -> None:
        ledger.append_many("s1", [Message("user", "kayak\x00trip 😀 déjà vu", {"k": "v\x00w"})])
        hits = PgIndex(db, ledger).search("s1", "kayak deja", 3).results
        assert [(h.text, h.meta) for h in hits] == [("kayak\x00trip 😀 déjà vu", {"k": "v\x00w"})]


    def test_a_token_too_long_for_postgresqls_indexes_is_stored_by_digest_and_found(
        self, tmp_path: Path, ledger: Ledger, db: Database
    ) -> None:
        blob = "Q" + "xy7" * 3000  # one 9,001-character token: over the GIN and btree key limits
        fill(ledger, "s1", CORPUS + [("user", f"my key is {blob}"), ("user", f"{blob} again, {blob}")])
        lite, pg = both(tmp_path, ledger, db)
        for q in (blob, f"key {blob}", blob[:50]):
            assert key(pg.search("s1", q, 5)) == key(lite.search("s1", q, 5)), q[:20]
        assert {h.seq for h in pg.search("s1", blob, 5).results if not h.context_only} == {20, 21}
        ledger.erase("s1", [20, 21])
        assert pg.forget_events("s1", [20, 21]).removed == [20, 21]
        assert pg.search("s1", blob, 5).results == []
        lite.close()


    def test_a_token_fts5_splits_is_searched_as_its_phrase(self, tmp_path: Path, ledger: Ledger, db: Database) -> None:
        """U+19B0 is a letter to Python's tokenizer and a separator to unicode61: FTS5 gets a two-term phrase.
        (Here a phrase counts rows holding both terms anywhere; FTS5 needs them adjacent: docs/RETRIEVAL.md.)"""
        word = "ab\u19b0cd"
        fill(ledger, "s1", CORPUS + [("user", f"the {word} sign"), ("user", f"{word} and {word} again")])
        lite, pg = both(tmp_path, ledger, db)
        for q in (word, f"{word} sign", f"garden {word}"):
            assert key(pg.search("s1", q, 5)) == key(lite.search("s1", q, 5)), q
        lite.close()


class TestOnPgLedger:
    def test_an_index_over_the_postgresql_ledger_ranks_as_one_over_the_files(
        self, ledger: Ledger, db: Database, pg_server: Any
    ) -> None:
        from storage.pg.ledger import PgLedger
        from tests import pg_support

        def ranking(resp: SearchResponse) -> list[tuple[Any, ...]]:  # events differ in ids, salts and hashes
            return [(h.seq, h.text, round(h.bm25, 9), round(h.score, 9), h.context_only) for h in resp.results]

        fill(ledger, "s1")
        with Database(pg_support.fresh_database(pg_server)) as other:
            want = [ranking(PgIndex(other, ledger).search("s1", q, 8)) for q in QUERIES]
        pg_ledger = PgLedger(db)
        fill(pg_ledger, "s1")  # type: ignore[arg-type]
        on_pg = PgIndex(db, pg_ledger)
        assert [ranking(on_pg.search("s1", q, 8)) for q in QUERIES] == want
        assert any(want)
        pg_ledger.erase("s1", [11])
        on_pg.index_session("s1")
        assert 11 not in {h.seq for h in on_pg.search("s1", "Mochi", 50).results}


class TestScoping:
    def test_a_search_never_returns_another_sessions_events(self, ledger: Ledger, db: Database) -> None:
        fill(ledger, "alice", CORPUS + [("user", "my kayak is red")])
        fill(ledger, "bob", [("user", "my kayak is blue"), ("user", "kayak lessons"), ("user", "Mochi")])
        pg = PgIndex(db, ledger)
        pg.catch_up()
        hits = pg.search("alice", "kayak", 50).results
        assert [h.text for h in hits if not h.context_only] == ["my kayak is red"]
        assert {h.session for h in hits} == {"alice"}
        assert {h.session for h in pg.search("bob", "kayak mochi", 50).results} == {"bob"}
        assert pg.search("carol", "kayak", 5).reason == "session carol: no events indexed"

    def test_a_search_never_returns_another_sessions_rows_even_when_their_lexemes_match(
        self, ledger: Ledger, db: Database
    ) -> None:
        """The session-prefixed lexemes scope a search; the statement checks the session too. Bob's rows are given
        Alice's lexemes (as a bug in writing them would): Alice's search still shows only Alice's rows."""
        fill(ledger, "alice", CORPUS + [("user", "my kayak is red")])
        fill(ledger, "bob", [("user", "kayak kayak kayak")] * 30)
        pg = PgIndex(db, ledger)
        pg.catch_up()
        want = [key(pg.search("alice", q, 50)) for q in ("kayak", "kayak garden Mochi")]
        with db.transaction() as conn:
            conn.execute(
                "UPDATE search_events SET lex = lex || array_to_tsvector(ARRAY[a.num || '_kayak', a.num || '_garden'])"
                " FROM search_sessions AS a, search_sessions AS b"
                " WHERE a.session = 'alice' AND b.session = 'bob' AND search_events.num = b.num"
            )
        assert [key(pg.search("alice", q, 50)) for q in ("kayak", "kayak garden Mochi")] == want
        assert {h.text for h in pg.search("alice", "kayak", 50).results} <= {t for _, t in CORPUS + [("user", "my kayak is red")]}

    def test_a_sessions_ranking_does_not_depend_on_other_sessions(
        self, tmp_path: Path, ledger: Ledger, db: Database
    ) -> None:
        fill(ledger, "alice")
        pg = PgIndex(db, ledger)
        alone = [key(pg.search("alice", q, 8)) for q in QUERIES]
        fill(ledger, "bob", CORPUS * 3 + [("user", "Mochi Mochi Mochi garden release")])
        pg.catch_up()
        assert [key(pg.search("alice", q, 8)) for q in QUERIES] == alone


def rows(db: Database, session: str) -> int:
    with db.connection() as conn:
        row = conn.execute(
            "SELECT count(*) FROM search_events e JOIN search_sessions s USING (num) WHERE s.session = %s", (session,)
        ).fetchone()
    assert row is not None
    return int(row[0])


class TestForgetting:
    def test_forgotten_events_leave_no_row_and_rank_as_a_rebuilt_index(
        self, tmp_path: Path, ledger: Ledger, db: Database
    ) -> None:
        fill(ledger, "s1")
        lite, pg = both(tmp_path, ledger, db)
        pg.catch_up()
        lite.catch_up()
        ledger.erase("s1", [11, 12])
        got = pg.forget_events("s1", [11, 12])
        want = lite.forget_events("s1", [11, 12])
        assert got.removed == want.removed == [11, 12]
        assert got.rescored == want.rescored
        assert set(got.recontexted) == set(want.recontexted)
        with db.connection() as conn:
            assert conn.execute("SELECT count(*) FROM search_events WHERE seq IN (11, 12)").fetchone() == (0,)
        after = [key(pg.search("s1", q, 8)) for q in QUERIES]
        assert after == [key(lite.search("s1", q, 8)) for q in QUERIES]
        fresh = PgIndex(db, ledger)
        fresh.rebuild()
        assert [key(fresh.search("s1", q, 8)) for q in QUERIES] == after
        lite.close()

    def test_an_erasure_record_met_while_indexing_forgets_the_rows(self, ledger: Ledger, db: Database) -> None:
        fill(ledger, "s1")
        pg = PgIndex(db, ledger)
        pg.catch_up()
        ledger.erase("s1", [12])
        ledger.append_many("s1", [Message("user", "one more turn", {})])
        pg.catch_up()
        assert 12 not in {h.seq for h in pg.search("s1", "Mochi grey", 50).results}
        assert rows(db, "s1") == len(CORPUS) - 1 + 1

    def test_forgetting_a_live_event_is_refused_and_changes_nothing(self, ledger: Ledger, db: Database) -> None:
        fill(ledger, "s1")
        pg = PgIndex(db, ledger)
        pg.catch_up()
        with pytest.raises(ForgetError, match="not erased"):
            pg.forget_events("s1", [3])
        assert rows(db, "s1") == len(CORPUS)

    def test_purging_a_deleted_session_removes_every_row(self, ledger: Ledger, db: Database) -> None:
        fill(ledger, "s1")
        fill(ledger, "s2")
        pg = PgIndex(db, ledger)
        pg.catch_up()
        with pytest.raises(ForgetError, match="still in the ledger"):
            pg.purge_session("s1")
        ledger.forget("s1")
        shutil.rmtree(ledger.session_dir("s1"))
        pg.purge_session("s1")
        assert rows(db, "s1") == 0
        assert rows(db, "s2") == len(CORPUS)
        with db.connection() as conn:
            assert conn.execute("SELECT count(*) FROM search_sessions WHERE session = 's1'").fetchone() == (0,)


class TestPruningSets:
    """search_rows.covers: the sets of terms a row must hold one of to reach a score (pure; no server)."""

    BOUND = {"a": 5.0, "b": 3.0, "c": 2.0, "d": 1.0}

    @pytest.mark.parametrize(
        ("need", "expected"),
        [
            (5.0, [("a",), ("b", "c")]),
            (6.0, [("a", "b"), ("a", "c"), ("a", "d"), ("b", "c", "d")]),
            (11.0, [("a", "b", "c", "d")]),
            (11.5, []),
            (0.0, [("a",), ("b",), ("c",), ("d",)]),
        ],
    )
    def test_sets_for_a_score(self, need: float, expected: list[tuple[str, ...]]) -> None:
        from storage.pg.search_rows import covers

        assert sorted(covers(["a", "b", "c", "d"], self.BOUND, need, 64) or []) == sorted(expected)

    def test_every_subset_reaching_the_score_holds_a_set(self) -> None:
        from itertools import combinations

        from storage.pg.search_rows import covers

        rng = random.Random(3)
        for _ in range(200):
            terms = [f"t{i}" for i in range(rng.randint(1, 8))]
            bound = {t: rng.choice([0.5, 1.0, 1.5, rng.uniform(0.1, 6.0)]) for t in terms}
            terms.sort(key=lambda t: -bound[t])
            need = rng.uniform(0.0, sum(bound.values()) + 1.0)
            sets = covers(terms, bound, need, 10_000)
            assert sets is not None
            for n in range(1, len(terms) + 1):
                for sub in combinations(terms, n):
                    reaches = sum(bound[t] for t in sub) >= need
                    assert reaches == any(set(s) <= set(sub) for s in sets), (bound, need, sub, sets)

    def test_too_many_sets_is_none(self) -> None:
        from storage.pg.search_rows import covers

        terms = [f"t{i}" for i in range(12)]
        assert covers(terms, dict.fromkeys(terms, 1.0), 6.0, 64) is None
        assert covers(terms, dict.fromkeys(terms, 1.0), 1.0, 64) is not None

    def test_the_rank_statement_checks_the_session_and_skips_what_it_need_not(self) -> None:
        from storage.pg.sql import search_rank_sql

        plain = search_rank_sql(2, [0, 1], exclude=False)
        assert "num = %(num)s" in plain and "ALL(" not in plain and "%(seen)s" not in plain
        both_ = search_rank_sql(2, [1], exclude=True, seen=True)
        assert "seq <> ALL(%(exclude)s::bigint[])" in both_ and "NOT lex @@ %(seen)s::tsquery" in both_
        with pytest.raises(ValueError):
            search_rank_sql(1, [1])

