"""Query building and scoring: pure functions, (input, expected) pairs and fuzzing."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.scoring import collapse_score, final_score, novelty, rank
from retrieval.sql import TOKENIZER, fts_table, row_id, search_sql, session_range
from retrieval.text import MAX_QUERY_TERMS, build_query, content_terms, quote, stem, tokens


@pytest.fixture(scope="module")
def fts() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(text, tokenize='{TOKENIZER}')")
    conn.executemany("INSERT INTO t (text) VALUES (?)", [("cats and dogs",), ("e-mail me at C++ conf",), ("don't",)])
    return conn


class TestBuildQuery:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("dogs", '"dogs"'),
            ('cat"', '"cat"'),
            ("dogs AND", '"dogs"'),
            ("NOT x", None),  # 'not' is a stop word, 'x' a single letter
            ("NOT rust", '"rust"'),
            ("cats NEAR dogs", '"cats" OR "near" OR "dogs"'),
            ("cats OR dogs", '"cats" OR "dogs"'),
            ("a:b c:dog", '"dog"'),
            ("e-mail", '"mail"'),
            ("-rust", '"rust"'),
            ("*x* ^start", '"start"'),
            ("C++ (compiler)", '"compiler"'),
            ("don't stop", '"stop"'),
            ("nul\x00byte", '"nul" OR "byte"'),
            ("ctrl\x07\x1bchars", '"ctrl" OR "chars"'),
            ("🐶 puppy 🐶", '"puppy"'),
            ("Café naïve", '"cafe" OR "naive"'),
            ("Dogs dogs DOGS", '"dogs"'),
            ("year 2023", '"year" OR "2023"'),
        ],
    )
    def test_pairs(self, text: str, expected: str | None) -> None:
        assert build_query(text).fts == expected

    @pytest.mark.parametrize(
        ("text", "reason"),
        [
            ("", "the query is empty"),
            ("   \n\t", "the query is empty"),
            ("?!... ()*", "the query holds no letters or digits"),
            ("🐶🐱", "the query holds no letters or digits"),
            ("what is the", "the query holds only stop words and single letters"),
        ],
    )
    def test_nothing_searchable_gives_a_reason(self, text: str, reason: str) -> None:
        q = build_query(text)
        assert q.fts is None and q.terms == () and q.reason == reason

    def test_a_long_query_is_capped(self) -> None:
        q = build_query(" ".join(f"word{i}" for i in range(500)))
        assert len(q.terms) == MAX_QUERY_TERMS

    def test_quote_doubles_inner_quotes(self) -> None:
        assert quote('a"b') == '"a""b"'

    def test_non_string_is_a_type_error(self) -> None:
        with pytest.raises(TypeError):
            build_query(None)  # type: ignore[arg-type]

    @settings(max_examples=400, deadline=None)
    @given(st.text())
    def test_arbitrary_text_never_raises_in_fts5(self, fts: sqlite3.Connection, text: str) -> None:
        q = build_query(text)
        if q.fts is not None:
            fts.execute("SELECT rowid, bm25(t) FROM t WHERE t MATCH ? ORDER BY bm25(t)", (q.fts,)).fetchall()
        else:
            assert q.reason

    @settings(max_examples=200, deadline=None)
    @given(
        st.lists(
            st.sampled_from(
                [
                    '"',
                    "*",
                    "^",
                    ":",
                    "-",
                    "+",
                    "(",
                    ")",
                    "AND",
                    "OR",
                    "NOT",
                    "NEAR",
                    " ",
                    "x",
                    "dog",
                    "\x00",
                    "\ud800",
                    "🐶",
                    "{",
                    "}",
                    ",",
                    "'",
                ]
            ),
            max_size=20,
        )
    )
    def test_operator_soup_never_raises_in_fts5(self, fts: sqlite3.Connection, parts: list[str]) -> None:
        q = build_query("".join(parts))
        if q.fts is not None:
            fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (q.fts,)).fetchall()


class TestTerms:
    def test_tokens_split_on_punctuation_and_fold_case(self) -> None:
        assert tokens("Hello, WORLD_wide e-mail!") == ["hello", "world", "wide", "e", "mail"]

    @pytest.mark.parametrize(
        ("word", "expected"),
        [
            ("dogs", "dog"),
            ("parties", "party"),
            ("running", "run"),
            ("stopped", "stop"),
            ("glass", "glass"),
            ("bus", "bus"),
            ("cat", "cat"),
        ],
    )
    def test_stem(self, word: str, expected: str) -> None:
        assert stem(word) == expected

    def test_content_terms_drop_stop_words_and_repeats(self) -> None:
        assert content_terms("The dog and the dogs went to the park") == ["dog", "went", "park"]


class TestCollapse:
    def test_novelty_is_the_share_of_unseen_terms(self) -> None:
        assert novelty(["a", "b", "c", "d"], {"a"}) == 0.75
        assert novelty([], set()) == 0.0

    def test_a_repeat_collapses_lower_than_a_first_statement(self) -> None:
        assert collapse_score("user", 0.0) < collapse_score("user", 1.0)

    def test_user_outweighs_tool_at_equal_novelty(self) -> None:
        assert collapse_score("tool", 1.0) < collapse_score("assistant", 1.0) < collapse_score("user", 1.0)

    def test_collapse_rejects_novelty_outside_unit_interval(self) -> None:
        with pytest.raises(ValueError):
            collapse_score("user", 1.5)

    def test_zero_weight_is_plain_bm25(self) -> None:
        assert final_score(-3.0, 0.1, 0.0) == final_score(-3.0, 0.9, 0.0) == 3.0

    def test_equal_bm25_higher_collapse_ranks_first(self) -> None:
        from dataclasses import dataclass

        @dataclass
        class C:
            seq: int
            bm25: float
            collapse: float

        ranked = rank([C(1, -2.0, 0.4), C(2, -2.0, 0.9), C(3, -1.0, 1.0)], k=2)
        assert [c.seq for c, _ in ranked] == [2, 1]


class TestSql:
    def test_rowids_of_one_session_are_one_contiguous_range(self) -> None:
        lo, hi = session_range(3)
        assert lo <= row_id(3, 0) < row_id(3, 10**6) <= hi < session_range(4)[0]

    def test_search_sql_reads_only_the_sessions_own_fts_table(self) -> None:
        stmt = search_sql(7, text_weight=1.0, context_weight=0.5)
        assert "FROM events_fts_7 WHERE events_fts_7 MATCH :match" in stmt
        assert "bm25(events_fts_7, 1.0, 0.5)" in stmt
        assert "json_each" not in stmt and "json_each(:exclude)" in search_sql(7, exclude=True)

    @pytest.mark.parametrize("num", [0, -1, True, "1; DROP TABLE events", 1 << 40])
    def test_fts_table_refuses_anything_but_a_session_number(self, num: object) -> None:
        with pytest.raises(ValueError):
            fts_table(num)  # type: ignore[arg-type]

    def test_search_sql_rejects_a_non_finite_weight(self) -> None:
        with pytest.raises(ValueError):
            search_sql(1, context_weight=float("nan"))
