"""Renderers: domain values in, what the UI shows out (pure; no server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chat.engine import Engine
from chat.llm import LLM
from ledger import Break, SessionReport
from retrieval.explain import explain_lines
from retrieval.model import Hit
from webui import render as r
from webui.text import md, short


def offline_engine(path: Path) -> Engine:
    """An engine whose model is the offline stand-in, whatever the environment says (tests never touch the network)."""
    return Engine(path, llm=LLM(api_key=""))


@pytest.fixture(scope="module")
def turn(tmp_path_factory: pytest.TempPathFactory):
    engine = offline_engine(tmp_path_factory.mktemp("data"))
    engine.remember("s1", "I moved to Lisbon | with my cat <b>Miso</b>")
    engine.remember("s1", "The cat likes tuna")
    return engine.turn("s1", "Where is my cat Miso?", 8)


class TestEscaping:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("plain words", "plain words"),
            ("a | b", "a \\| b"),
            ("<img src=x onerror=alert(1)>", "&lt;img src\\=x onerror\\=alert\\(1\\)&gt;"),
            ("line\n===", "line \\=\\=\\="),
            ("![x](http://evil.example/p.png)", "\\!\\[x\\]\\(http://evil\\.example/p\\.png\\)"),
            ("*bold* _it_ `code`", "\\*bold\\* \\_it\\_ \\`code\\`"),
            ("line one\nline two", "line one line two"),
            ("$$x$$", "\\$\\$x\\$\\$"),
        ],
    )
    def test_untrusted_text_cannot_make_markup(self, text: str, expected: str) -> None:
        assert md(text) == expected

    def test_a_cut_is_marked(self) -> None:
        assert md("x" * 50, 10).endswith("…")
        assert short("ab" * 32) == "abababababab…"
        assert short("abc") == "abc"

    def test_literal_keeps_line_breaks_but_not_markup(self) -> None:
        assert r.literal("# title\n- item") == "\\# title  \n\\- item"


class TestStamps:
    def test_stamps_list_every_memory_handed_to_the_model(self, turn) -> None:
        s = r.stamps_from_body(turn.body)
        assert s.receipt_id == turn.receipt_id and s.k == 8
        assert [m.seq for m in s.memories] == [h.seq for h in turn.hits]
        text = r.stamps_markdown(s)
        for m in turn.body["memories"]:
            assert f"| {m['event']['seq']} |" in text
            assert short(m["event"]["digest"]) in text
        assert turn.receipt_id in text

    def test_memory_text_in_the_stamps_is_escaped(self, turn) -> None:
        text = r.stamps_markdown(r.stamps_from_body(turn.body))
        assert "<b>" not in text and "&lt;b&gt;" in text
        assert "Lisbon \\| with" in text  # a pipe cannot break the table

    def test_the_offline_stand_in_is_labelled_as_such(self, turn) -> None:
        s = r.stamps_from_body(turn.body)
        assert s.provider == "offline"
        assert "offline stand-in" in r.stamps_markdown(s)
        assert "no language model" in r.stamps_markdown(s)
        assert "offline stand-in" in r.stamps_title(s)

    def test_a_model_is_named_with_its_provider(self) -> None:
        label = r.provider_label("groq", "openai/gpt-oss-20b", None)
        assert "Groq" in label and "gpt" in label and "stand-in" not in label

    def test_no_memories_says_so(self, turn) -> None:
        body = {**turn.body, "memories": []}
        assert "handed none" in r.stamps_markdown(r.stamps_from_body(body))

    def test_a_stamps_message_is_collapsed_under_its_title(self, turn) -> None:
        msg = r.stamps_message(r.stamps_from_body(turn.body))
        assert msg["role"] == "assistant" and msg["metadata"]["title"].startswith("🧾 Stamps")


class TestStampMatches:
    """A memory handed to the model that matched only through its neighbours' words, or that is an echo, says so
    in the stamps of a live turn (the hits carry it); stamps rebuilt from the stored receipt carry no label."""

    @pytest.fixture(scope="class")
    def lisbon(self, tmp_path_factory: pytest.TempPathFactory):
        engine = offline_engine(tmp_path_factory.mktemp("stamps"))
        for text in ("we talked about trains", "I moved to Lisbon last year", "the weather was fine", "tea", "work"):
            engine.remember("s1", text)
        return engine.turn("s1", "Lisbon?", 8)

    def test_a_context_only_memory_is_labelled_in_a_live_turns_stamps(self, lisbon) -> None:
        assert {h.match for h in lisbon.hits} == {"own text", "context only"}  # the test is not vacuous
        text = r.stamps_markdown(r.with_matches(r.stamps_from_body(lisbon.body), lisbon.hits))
        rows = {int(line.split("|")[2]): line for line in text.splitlines() if line.startswith("| ") and "`" in line}
        for h in lisbon.hits:
            assert ("matched via neighbouring turns" in rows[h.seq]) is h.context_only, rows[h.seq]

    def test_an_echo_is_labelled(self, lisbon) -> None:
        h = lisbon.hits[0]
        echo = type(h)(**{**h.to_dict(), "echo": True})
        text = r.stamps_markdown(r.with_matches(r.stamps_from_body(lisbon.body), [echo]))
        assert "\\[echo: repeats memories\\] " in text  # the label is escaped like the text beside it

    def test_stamps_from_a_stored_receipt_alone_have_no_label(self, lisbon) -> None:
        s = r.stamps_from_body(lisbon.body)
        assert all(m.match is None for m in s.memories)
        assert "matched via" not in r.stamps_markdown(s) and "echo" not in r.stamps_markdown(s)

    def test_a_memory_the_hits_do_not_name_stays_unlabelled(self, lisbon) -> None:
        s = r.with_matches(r.stamps_from_body(lisbon.body), [])
        assert all(m.match is None for m in s.memories)


class TestTables:
    def test_search_rows_carry_scores_and_hash_prefixes(self, turn) -> None:
        rows = r.search_rows(turn.hits)
        assert len(rows) == len(turn.hits)
        h, row = turn.hits[0], rows[0]
        assert len(row) == len(r.SEARCH_HEADERS)
        assert row[:4] == [h.rank, short(h.event_id, r.EVENT_ID_PREFIX), h.seq, h.role]
        assert row[1].endswith("…") and h.event_id.startswith(row[1][:-1]) and len(row[1]) <= 17
        assert row[5] == r.MATCH_WORDS[h.match] and row[6] == 1.0
        assert row[7] == short(h.digest) and row[8] == short(h.chain)

    def test_the_search_table_shows_the_shown_score_and_no_raw_figure(self, turn) -> None:
        assert r.SEARCH_HEADERS.index("score") == 6 and not {"BM25", "collapse"} & set(r.SEARCH_HEADERS)
        shown = [cell for row in r.search_rows(turn.hits) for cell in row if isinstance(cell, float)]
        assert shown == r.hit_scores(turn.hits)  # never bm25 (negative) or the raw score
        assert all(0 < x <= 1 for x in shown)

    def test_ledger_rows_show_the_latest_events_oldest_first(self, turn, tmp_path: Path) -> None:
        engine = offline_engine(tmp_path)
        for i in range(5):
            engine.remember("s", f"note {i}")
        events = list(engine.ledger.events("s"))
        rows = r.ledger_rows(events, limit=3)
        assert [row[0] for row in rows] == [2, 3, 4]
        assert rows[0][4] == short(events[2].digest) and rows[0][5] == short(events[2].chain)

    def test_ledger_times_are_shown_to_the_second_on_one_line(self) -> None:
        assert r.short_ts("2026-12-03T12:59:19.123456Z") == "2026-12-03 12:59:19"
        assert r.short_ts("2026-12-03T12:59:19Z") == "2026-12-03 12:59:19"
        assert r.short_ts("not a time") == "not a time"  # anything else is shown as it is

    def test_a_refused_search_says_so_with_the_reason_escaped(self) -> None:
        status = r.search_refused("search: <b>x</b> is [bad](http://e)")
        assert status.startswith("⛔ **No search:**") and "<b>" not in status and "](" not in status

    def test_a_refused_search_names_search_once(self) -> None:
        from webui.inputs import BadInput, check_query

        with pytest.raises(BadInput) as caught:
            check_query("x" * 1600)
        status = r.search_refused(str(caught.value))
        assert status.startswith("⛔ **No search:** 1600 characters") and "search: " not in status

    def test_search_status_gives_the_reason_for_nothing(self) -> None:
        assert "no event matches" in r.search_status(0, 8, "session s: no event matches")
        assert r.search_status(3, 8, None).startswith("3 results")

    def test_search_status_explains_the_order_and_the_score_and_never_mentions_raw_bm25(self) -> None:
        status = r.search_status(3, 8, None)
        assert "by *match* first" in status and "then by *score* within each" in status
        assert "share of the best score ranked with it" in status and "BM25" not in status and "lower is a better" not in status


def hit(seq: int, score: float, *, context: bool = False, echo: bool = False) -> Hit:
    return Hit(
        session="s", event_id=f"evt_{seq:032x}", seq=seq, role="user", text=f"t{seq}", meta={}, digest="d" * 64,
        chain="c" * 64, ts="2026-12-06T00:00:00Z", bm25=-score, collapse=1.0, score=score, rank=seq,
        context_only=context, echo=echo,
    )


class TestShownScores:
    """Issue 31: Manual search showed rank 5 = 0.34, rank 6 = 0.67 under "each hit's share of the best hit's score":
    rank 6 matched only through its neighbours, which the ranking puts after every hit in its own words."""

    def test_the_issues_case_reads_in_rank_order_within_each_kind_of_match(self) -> None:
        hits = [hit(1, 3.0), hit(2, 2.4), hit(3, 2.0), hit(4, 1.5), hit(5, 1.02), hit(6, 2.0, context=True), hit(7, 0.5, context=True), hit(8, 0.9, echo=True)]
        rows = r.search_rows(hits)
        match, score = r.SEARCH_HEADERS.index("match"), r.SEARCH_HEADERS.index("score")
        assert [row[match] for row in rows] == ["own words"] * 5 + ["neighbours"] * 2 + ["echo"]
        assert [row[score] for row in rows] == [1.0, 0.8, 0.67, 0.5, 0.34, 1.0, 0.25, 1.0]

    def test_within_a_group_the_shown_score_never_rises_with_rank(self) -> None:
        import random

        rng = random.Random(31)
        for _ in range(200):
            own = sorted((rng.uniform(0.01, 9) for _ in range(rng.randint(0, 6))), reverse=True)
            ctx = sorted((rng.uniform(0.01, 9) for _ in range(rng.randint(0, 6))), reverse=True)
            echo = sorted((rng.uniform(0.01, 9) for _ in range(rng.randint(0, 3))), reverse=True)
            hits = [hit(i, s) for i, s in enumerate(own)] + [hit(50 + i, s, context=True) for i, s in enumerate(ctx)]
            hits += [hit(90 + i, s, echo=True) for i, s in enumerate(echo)]
            shown, groups = r.hit_scores(hits), r.score_groups([h.match for h in hits])
            assert groups == sorted(groups)  # the groups follow the rank
            for a in range(len(hits) - 1):
                if groups[a] == groups[a + 1]:
                    assert shown[a] >= shown[a + 1]
            assert all(shown[groups.index(g)] == 1.0 for g in set(groups))

    def test_every_search_status_says_the_order(self) -> None:
        for status in (r.search_status(3, 8, None), r.as_of_status(5, 3, [])):
            assert "by *match* first" in status and "then by *score* within each" in status

    def test_in_a_long_session_a_hit_through_its_neighbours_ranks_among_the_others_and_shares_their_best(self) -> None:
        # the context tier applies under 100 events only: above, a neighbours hit may rank between own-words hits
        hits = [hit(1, 3.0), hit(2, 2.7, context=True), hit(3, 1.5), hit(4, 2.0, echo=True)]
        assert r.score_groups([h.match for h in hits]) == [0, 0, 0, 2]
        assert r.hit_scores(hits) == [1.0, 0.9, 0.5, 1.0]

    def test_the_tick_boxes_show_the_same_scores_as_manual_search(self) -> None:
        from chat.consent import Candidate
        from webui import render_controls as rc

        hits = [hit(1, 3.0), hit(2, 1.02), hit(3, 2.0, context=True)]
        cands = [
            Candidate(rank=h.rank, seq=h.seq, event_id=h.event_id, role=h.role, ts=h.ts, text=h.text, score=h.score,
                      digest=h.digest, relative=h.relative, match=h.match)
            for h in hits
        ]  # fmt: skip
        labels = [label for label, _ in rc.candidate_choices(cands)]
        assert [label.split(" · ")[4] for label in labels] == ["score 1.00", "score 0.34", "score 1.00"]


class TestExplanation:
    @pytest.fixture(scope="class")
    def explained(self, tmp_path_factory: pytest.TempPathFactory):
        engine = offline_engine(tmp_path_factory.mktemp("explain"))
        for text in ("we talked about trains", "I moved to Lisbon | last year", "the weather was fine", "tea", "work"):
            engine.remember("s1", text)
        return engine.index.search("s1", "Lisbon", 5, explain=True).results

    def test_each_hit_gets_the_lines_the_cli_prints_under_its_row(self, explained) -> None:
        text = r.search_explanation(explained)
        for h in explained:
            assert f"**#{h.rank} · seq {h.seq}**" in text
            for line in explain_lines(h.explain):
                assert f"- {md(line)}" in text
        assert "matched: lisbon" in text and "bm25 " in text and "collapse " in text

    def test_a_hit_matched_through_its_neighbours_is_labelled_and_its_rule_shown(self, explained) -> None:
        text = r.search_explanation(explained)
        ctx = next(h for h in explained if h.context_only)
        block = text.split(f"**#{ctx.rank} · seq {ctx.seq}**")[1].split("**#")[0]
        assert "matched via neighbouring turns" in block and "matched only through its neighbours" in block

    def test_memory_text_in_the_explanation_is_escaped(self, explained) -> None:
        text = r.search_explanation(explained)
        assert "Lisbon \\| last" in text and "| last" not in text.replace("\\|", "")

    def test_a_revoked_hit_is_labelled_as_in_the_table(self, explained) -> None:
        h = explained[0]
        assert "revoked \\(control event seq 9" in r.search_explanation(explained, {h.seq: 9})

    def test_hits_searched_without_explain_give_nothing(self, turn) -> None:
        assert all(h.explain is None for h in turn.hits) and r.search_explanation(turn.hits) == ""
        assert r.search_explanation([]) == ""


class TestLedgerStatus:
    def test_an_intact_chain_says_how_many_events_were_re_verified(self) -> None:
        rep = SessionReport("s", True, 12, "ab" * 32)
        assert "Chain intact" in r.chain_status(rep, 12, 12) and "12 events" in r.chain_status(rep, 12, 12)

    def test_a_broken_chain_names_where_and_both_values(self) -> None:
        brk = Break(7, 6, "digest_mismatch", "aa" * 32, "bb" * 32, "digest does not match")
        text = r.chain_status(SessionReport("s", False, 6, "cc" * 32, brk), 6, 6)
        assert "Chain broken" in text and "line 7" in text and "seq 6" in text and "digest\\_mismatch" in text
        assert short("aa" * 32, 24) in text and short("bb" * 32, 24) in text

    def test_no_session_yet(self) -> None:
        assert "no events yet" in r.chain_status(None, 0, 0)

    def test_the_checkpoint_is_shown_as_the_signed_object(self, turn) -> None:
        text = r.checkpoint_text(turn.body["checkpoint"])
        assert json.loads(text) == turn.body["checkpoint"]
        assert "no signed checkpoint" in r.checkpoint_text(None)


class TestHistory:
    def test_a_restored_answer_is_followed_by_its_stamps(self, turn) -> None:
        msgs = r.history_messages([(turn.user_event, None), (turn.assistant_event, turn.body)])
        assert [m["role"] for m in msgs] == ["user", "assistant", "assistant"]
        assert msgs[2]["metadata"]["title"].endswith(turn.receipt_id)

    def test_an_answer_whose_receipt_is_gone_is_shown_without_stamps(self, turn) -> None:
        msgs = r.history_messages([(turn.assistant_event, None)])
        assert len(msgs) == 1 and "metadata" not in msgs[0]

    def test_provider_line_before_any_turn(self) -> None:
        assert "offline stand-in" in r.provider_now(
            {"provider": "offline", "model": "offline-stand-in", "configured": False}
        )
        assert "Groq" in r.provider_now({"provider": "groq", "model": "m", "configured": True})
