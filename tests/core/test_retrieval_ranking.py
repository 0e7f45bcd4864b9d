"""Ranking as a new user sees it: echoes, context-only hits, readable scores, long queries (issue 16)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.messages import Message
from retrieval import IndexConfig
from retrieval.scoring import CONTEXT, is_echo, relative
from retrieval.text import MAX_QUERY_TERMS, choose_terms, term_batches
from storage.files.ledger.store import Ledger
from storage.files.retrieval.db import Index

STAND_IN = {"kind": "chat", "provider": "offline", "model": "offline", "receipt_id": "rcpt_x"}
GROQ = {"kind": "chat", "provider": "groq", "model": "m", "receipt_id": "rcpt_y"}
CHAT = {"kind": "chat"}


def index_of(tmp: Path, messages: list[Message], **cfg: object) -> Index:
    ledger = Ledger(tmp)
    ledger.append_many("s1", messages)
    return Index(tmp, ledger, config=IndexConfig(**cfg))  # type: ignore[arg-type]


class TestEchoes:
    def test_a_stand_in_reply_never_outranks_the_statement_it_quotes(self, tmp_path: Path) -> None:
        quote = "- (seq 0, user) Actually the cat is called Mochi now. Mochi, Mochi: the cat Mochi."
        msgs = [
            Message("user", "Actually the cat is called Mochi now, after a long story about names", CHAT),
            Message("assistant", f"[Offline stand-in]\n\nFrom what we talked about before:\n{quote}", STAND_IN),
            *[Message("user", f"filler about the weather number {i}", CHAT) for i in range(6)],
        ]
        index = index_of(tmp_path, msgs)
        hits = index.search("s1", "Mochi cat", k=5).results
        assert hits[0].seq == 0 and not hits[0].echo
        echo = [h.rank for h in hits if h.echo]
        assert [h.seq for h in hits if h.echo] == [1]
        assert all(h.rank < echo[0] for h in hits if not h.echo)  # every non-echo match ranks above it

    def test_the_quoting_reply_would_rank_first_without_the_echo_rule(self, tmp_path: Path) -> None:
        # the test above is not vacuous: with the rule off, the reply's BM25 wins
        quote = "Mochi Mochi Mochi cat cat Mochi"
        msgs = [
            Message("user", "Actually the cat is called Mochi now, after a long story about names and more words", CHAT),
            Message("assistant", quote, STAND_IN),
            *[Message("user", f"filler about the weather number {i}", CHAT) for i in range(6)],
        ]
        alone = {"context_before": 0, "context_after": 0}  # the reply's words not in the statement's context
        off = index_of(tmp_path / "off", msgs, tiers=(CONTEXT,), **alone).search("s1", "Mochi cat", k=5).results
        on = index_of(tmp_path / "on", msgs, **alone).search("s1", "Mochi cat", k=5).results
        assert off[0].seq == 1
        assert on[0].seq == 0 and on[1].seq == 1 and on[1].echo

    def test_echoes_take_no_slot_while_a_matching_statement_is_left_out(self, tmp_path: Path) -> None:
        msgs = []
        for i in range(6):
            msgs.append(Message("user", f"my cat Mochi likes box number {i}", CHAT))
            msgs.append(Message("assistant", "I have no stored memories that match this message. cat Mochi", STAND_IN))
        hits = index_of(tmp_path, msgs).search("s1", "cat Mochi", k=6).results
        assert [h.role for h in hits] == ["user"] * 6

    def test_a_model_reply_that_only_repeats_known_words_is_an_echo(self) -> None:
        assert is_echo("assistant", 0.0, GROQ)
        assert not is_echo("assistant", 0.8, GROQ)  # it says something new

    def test_an_imported_assistant_turn_is_a_statement_not_an_echo(self) -> None:
        # LoCoMo's second speaker, an imported chat: no provider, no receipt
        assert not is_echo("assistant", 0.0, {"speaker": "Melanie"})
        assert not is_echo("assistant", 0.0, None)

    def test_a_repeated_chat_question_is_an_echo_and_a_new_one_is_not(self) -> None:
        assert is_echo("user", 0.0, CHAT, "What is my cat called?")
        assert not is_echo("user", 1.0, CHAT, "What is a quokka?")
        assert not is_echo("user", 0.0, CHAT, "My cat is called Luna")  # a repeated fact is evidence
        assert not is_echo("user", 0.0, {}, "What is my cat called?")  # imported, not typed in the chat


class TestContextOnly:
    @pytest.fixture()
    def index(self, tmp_path: Path) -> Index:
        texts = ["we talked about trains", "I moved to Lisbon last year", "the weather was fine", "tea", "work"]
        return index_of(tmp_path, [Message("user", t, {}) for t in texts])

    def test_a_hit_matched_through_its_neighbours_says_so(self, index: Index) -> None:
        hits = index.search("s1", "Lisbon", k=8).results
        by_seq = {h.seq: h for h in hits}
        assert not by_seq[1].context_only and by_seq[1].match == "own text"
        assert all(h.context_only and h.match == "context only" for h in hits if h.seq != 1)
        assert len(hits) > 1

    def test_a_self_matching_event_ranks_above_every_context_only_hit(self, index: Index) -> None:
        hits = index.search("s1", "Lisbon trains", k=8).results
        own = [h.rank for h in hits if not h.context_only]
        ctx = [h.rank for h in hits if h.context_only]
        assert own and ctx and max(own) < min(ctx)


class TestReadableScore:
    def test_relative_scores_are_shares_of_the_best(self) -> None:
        assert relative([2.0, 1.0, 0.5]) == [1.0, 0.5, 0.25]
        assert relative([]) == []
        assert relative([0.0, 0.0]) == [1.0, 1.0]

    def test_a_small_session_shows_scores_a_person_can_compare(self, tmp_path: Path) -> None:
        texts = ["my dog Rex", "Rex likes the park and Rex likes the beach", "tea", "work", "a walk"]
        hits = index_of(tmp_path, [Message("user", t, {}) for t in texts]).search("s1", "Rex", k=5).results
        assert hits[0].relative == 1.0
        assert all(0.0 <= h.relative <= 1.0 for h in hits)
        assert abs(hits[0].score) < 1e-3  # the raw figure is tiny here (idf floored), the relative one is not
        own = [h.relative for h in hits if not h.context_only]
        assert own == sorted(own, reverse=True)


FILLER = [f"filler{chr(97 + i)}word{chr(97 + j)}" for i in range(6) for j in range(6)]


class TestLongQueries:
    def test_choose_terms_keeps_the_rarest_and_puts_unknown_terms_last(self) -> None:
        kept, rest = choose_terms(["common", "unknown", "rare", "mid"], {"common": 9, "rare": 1, "mid": 4}, 3)
        assert kept == ["rare", "mid", "common"] and rest == ["unknown"]

    def test_every_term_is_in_exactly_one_batch(self) -> None:
        terms = [f"t{i}" for i in range(80)]
        batches = term_batches(terms, {"t5": 3}, n_events=10, prune_share=0.05, prune_min_events=50_000)
        flat = [t for b in batches for t in b]
        assert sorted(flat) == sorted(terms) and batches[0][0] == "t5"
        assert all(len(b) <= MAX_QUERY_TERMS for b in batches)

    def test_a_rare_word_after_32_filler_words_is_found(self, tmp_path: Path) -> None:
        # the case: 32 words no event holds, then "Mochi" (by position, Mochi was cut)
        texts = ["the cat is called Mochi", *[f"about {w}" for w in FILLER[:20]], "Mochi sleeps", "Mochi eats"]
        index = index_of(tmp_path, [Message("user", t, {}) for t in texts], context_before=0, context_after=0)
        query = " ".join(f"nomatch{i}x" for i in range(34)) + " Mochi"
        resp = index.search("s1", query, k=3)
        assert resp.reason is None and len(resp.results) == 3
        assert '"mochi"' in (resp.match or "") and all("Mochi" in h.text for h in resp.results)

    def test_a_match_among_terms_past_the_limit_is_never_no_match(self, tmp_path: Path) -> None:
        # 40 words no event holds, then one that only a porter variant matches ("sailing" -> "sailed")
        index = index_of(tmp_path, [Message("user", "we sailed away", {}), Message("user", "tea", {})])
        query = " ".join(f"zzq{i}word" for i in range(40)) + " sailing"
        resp = index.search("s1", query, k=3)
        assert resp.reason is None and resp.results and resp.results[0].seq == 0

    def test_unused_terms_are_reported(self, tmp_path: Path) -> None:
        index = index_of(tmp_path, [Message("user", "Mochi", {}), Message("user", "tea", {})])
        resp = index.search("s1", " ".join(f"zzq{i}word" for i in range(40)) + " Mochi", k=2)
        assert len(resp.unused_terms) == 41 - MAX_QUERY_TERMS and "mochi" not in resp.unused_terms


class TestManualSearchRows:
    def test_the_search_table_says_how_a_hit_matched_and_shows_a_readable_score(self, tmp_path: Path) -> None:
        from webui import render

        texts = ["we talked about trains", "I moved to Lisbon last year", "the weather was fine", "tea", "work"]
        hits = index_of(tmp_path, [Message("user", t, {}) for t in texts]).search("s1", "Lisbon", k=5).results
        rows = {row[2]: row for row in render.search_rows(hits)}
        score, match = render.SEARCH_HEADERS.index("score"), render.SEARCH_HEADERS.index("match")
        assert rows[1][4].startswith("I moved") and rows[1][score] == 1.0 and rows[1][match] == "own words"
        assert rows[0][match] == "neighbours"
        assert 0 < rows[0][score] <= 1  # a share of the best hit found through its neighbours
