"""The score bound (retrieval.bounded; IndexConfig.exact_prune): a large session's search returns what the query with
every term returns — the same events, in the same order, with the same bm25 — while bm25() runs over fewer rows."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from ledger.messages import Message
from retrieval import IndexConfig, bounded, sql
from retrieval.text import build_query, or_query
from storage.files.ledger.store import Ledger
from storage.files.retrieval.db import Index

WORDS = [f"w{i}" for i in range(60)]


def session(tmp: Path, n: int = 600, seed: int = 3) -> Ledger:
    """Texts whose words follow a steep curve: w0 is in most rows, w59 in a handful."""
    rng = random.Random(seed)
    weights = [1.0 / (i + 1) ** 1.1 for i in range(len(WORDS))]
    msgs = [Message("user" if i % 2 == 0 else "assistant", " ".join(rng.choices(WORDS, weights, k=rng.randint(2, 9))), {}) for i in range(n)]
    led = Ledger(tmp)
    led.append_many("s", msgs)
    return led


def queries(seed: int = 5, n: int = 60) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.sample(WORDS, rng.randint(2, 7))) for _ in range(n)]


def answer(index: Index, q: str, exclude: list[int]) -> list[tuple[int, float, float]]:
    return [(h.seq, round(h.bm25, 9), round(h.score, 9)) for h in index.search("s", q, 8, exclude).results]


class TestTheBoundGivesTheExhaustiveAnswer:
    def test_it_is_the_default_for_large_sessions(self) -> None:
        assert IndexConfig().exact_prune


    @pytest.mark.parametrize("exclude", [[], [1, 2, 3, 10, 40]])
    def test_every_query_ranks_as_with_every_term(self, tmp_path: Path, exclude: list[int]) -> None:
        led = session(tmp_path)
        exact = Index(tmp_path, led, config=IndexConfig(prune_min_events=0, exact_prune=True, prune_share=0.02))
        full = Index(tmp_path, led, config=IndexConfig(prune_min_events=10**9))
        differ = [q for q in queries() if answer(exact, q, exclude) != answer(full, q, exclude)]
        assert differ == []

    def test_locomo_questions_rank_as_with_every_term(self, tmp_path: Path, shared_data: Path) -> None:
        """Two LoCoMo conversations (their own turns, 788 events) and every one of their questions (304): the bound,
        made to apply at any size and to split early, gives the exhaustive answer."""
        convs = json.loads((shared_data / "locomo10.json").read_text(encoding="utf-8"))[:2]
        led = Ledger(tmp_path)
        msgs, qs = [], []
        for conv in convs:
            c = conv["conversation"]
            n = 1
            while f"session_{n}" in c:
                msgs += [Message("user" if t["speaker"] == c["speaker_a"] else "assistant", f"{t['speaker']}: {t['text']}", {}) for t in c[f"session_{n}"]]
                n += 1
            qs += [str(q["question"]) for q in conv["qa"]]
        led.append_many("s", msgs)
        exact = Index(tmp_path, led, config=IndexConfig(prune_min_events=0, exact_prune=True, prune_share=0.005))
        full = Index(tmp_path, led, config=IndexConfig(prune_min_events=10**9))
        splits: list[str] = []
        real = exact._read_fresh

        def spy(stmt: str, params: dict[str, object]) -> list[object]:
            splits.append(str(params["match"]))
            return real(stmt, params)

        setattr(exact, "_read_fresh", spy)  # noqa: B010 - the spy only counts which statements ran
        differ = [q for q in qs if answer(exact, q, []) != answer(full, q, [])]
        assert differ == []
        assert sum(" NOT (" in m for m in splits) > len(qs) // 2  # the bound did the work, not the plain query
        # the pool itself (the 40 best rows the collapse score re-ranks), not only the top 8 drawn from it
        stmt = sql.search_sql(1, text_weight=1.0, context_weight=0.3)
        pools = []
        for q in qs:
            terms = build_query(q, max_terms=None).terms
            if len(terms) > 1:
                params = {"match": or_query(terms), "limit": 40}
                got = exact._bounded_rows(1, len(msgs) - 1, stmt, params, terms)
                want = full._read_fresh(stmt, params)
                pools.append([(r[0], round(float(r[8]), 9)) for r in got] == [(r[0], round(float(r[8]), 9)) for r in want])
        assert len(pools) > 250 and all(pools)

    def test_the_split_queries_run_and_skip_rows(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        led = session(tmp_path)
        exact = Index(tmp_path, led, config=IndexConfig(prune_min_events=0, exact_prune=True, prune_share=0.02))
        matches: list[str] = []
        real = exact._read_fresh

        def spy(stmt: str, params: dict[str, object]) -> list[object]:
            matches.append(str(params["match"]))
            return real(stmt, params)

        monkeypatch.setattr(exact, "_read_fresh", spy)
        for q in queries():
            exact.search("s", q, 8)
        assert any(" AND (" in m for m in matches) and any(" NOT (" in m for m in matches)
        assert any(" AND (" in m for m in matches[:2])  # settled at the first split for some queries

    def test_share_pruning_without_the_bound_drops_terms(self, tmp_path: Path) -> None:
        led = session(tmp_path)
        pruned = Index(tmp_path, led, config=IndexConfig(prune_min_events=0, prune_share=0.02, exact_prune=False))
        assert any(pruned.search("s", q, 8).unused_terms for q in queries())


class TestPureParts:
    def test_varints_read_sqlites_encoding(self) -> None:
        assert bounded.varints(bytes([0x05, 0x81, 0x00, 0xFF, 0x7F])) == [5, 128, 16383]
        assert bounded.varints(bytes([0xFF] * 8 + [0x01])) == [(1 << 64) - 255]
        with pytest.raises(ValueError):
            bounded.varints(bytes([0x81]))

    def test_idf_is_fts5s_with_its_floor(self) -> None:
        assert bounded.idf(1000, 10) == pytest.approx(math.log(990.5 / 10.5))
        assert bounded.idf(1000, 600) == 1e-6

    def test_the_bound_is_above_any_terms_part(self) -> None:
        hits = {"a": 5, "b": 500}
        part = sum(bounded.idf(1000, n) * w * 2.2 / (w + 1.2 * (0.25 + 0.75 * 0.01)) for n, w in ((5, 1e6), (500, 1e6)))
        assert bounded.bound(1000, hits, ["a", "b"]) > part

    def test_fewer_rows_than_asked_adds_the_next_rarest_terms(self) -> None:
        # no n-th score yet: E grows by the next rarest terms until their rows could add up to the n asked
        assert bounded.next_split(["a", "b", "c"], {"a": 1, "b": 2, "c": 3}, 100, 1, [[0] * 12], 40) == 3
        assert bounded.next_split(["a", "b", "c", "d"], {"a": 0, "b": 50, "c": 60, "d": 70}, 1000, 1, [], 40) == 2
        assert bounded.next_split(["a", "b", "c", "d"], {"a": 0, "b": 10, "c": 60, "d": 70}, 1000, 1, [], 40) == 3
        assert bounded.split_matches(["a", "b"], 2) is None
        assert bounded.split_matches(["a", "b"], 1) == ('("a") AND ("b")', '("a") NOT ("b")')
