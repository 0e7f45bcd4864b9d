"""The supersession detector (issue 12): facts.rules, pure and deterministic.

One test per change word (it fires and names the right older seq), one per case it must refuse, negation,
paraphrase of the attribute, and properties: never itself or a later event, same input same output.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from facts import lexicon as lex
from facts import patterns as pat
from facts.claims import read
from facts.rules import (
    MAX_READ_CHARS,
    RULE_LEFT,
    RULE_NEGATION,
    RULE_SAME,
    RULES,
    Proposal,
    detect,
    explain,
    shortlist_query,
    topic_query,
)

# A session so far: the right older seq must be picked out of statements about other things.
SESSION = [
    (0, "I have a dog called Max."),
    (1, "I live in Leeds."),
    (2, "My sister lives in York."),
    (3, "I work at Acme."),
    (4, "My editor is Vim."),
    (5, "My dev server port is 3000."),
    (6, "I'm vegetarian."),
    (7, "My friend Sam lives in Bristol."),
    (8, "What's a good podcast?"),
]
NEW = 20


def fired(new_text: str, earlier: list[tuple[int, str]] | None = None) -> list[int]:
    return [p.older_seq for p in detect(new_text, SESSION if earlier is None else earlier, new_seq=NEW)]


def one(new_text: str, older_text: str) -> Proposal | None:
    got = detect(new_text, [(0, older_text)], new_seq=1)
    return got[0] if got else None


class TestChangeWords:
    def test_moved_supersedes_the_old_city(self) -> None:
        assert fired("We've just moved to Bristol!") == [1]

    def test_switched_supersedes_the_old_editor(self) -> None:
        assert fired("I switched my editor to Helix.") == [4]

    def test_changed_supersedes_the_old_port(self) -> None:
        assert fired("I changed the dev server port to 8080.") == [5]

    def test_moved_the_thing_supersedes_its_old_port(self) -> None:
        assert fired("I moved the dev server to 8080.") == [5]

    def test_now_supersedes_the_old_employer(self) -> None:
        assert fired("I work for Globex now.") == [3]

    def test_no_longer_supersedes_the_old_employer(self) -> None:
        assert fired("I no longer work at Acme.") == [3]

    def test_anymore_supersedes_the_old_city(self) -> None:
        assert fired("I don't live in Leeds anymore.") == [1]

    def test_these_days_supersedes_the_old_city(self) -> None:
        assert fired("These days I live in Glasgow.") == [1]

    def test_used_to_supersedes_the_old_city(self) -> None:
        assert fired("I used to live in Leeds, but now I'm in Bristol.") == [1]

    def test_again_supersedes_a_vegetarian_diet(self) -> None:
        assert fired("I eat meat again.") == [6]

    def test_relocated_supersedes_the_old_city(self) -> None:
        assert fired("I relocated to Lisbon for work.") == [1]

    def test_a_change_about_a_relation_supersedes_only_theirs(self) -> None:
        assert fired("My sister moved to Leeds.") == [2]

    def test_a_later_statement_supersedes_every_earlier_one_of_the_fact(self) -> None:
        earlier = [(0, "I live in Leeds."), (1, "We moved to York."), (2, "I love York.")]
        assert fired("I relocated to Bristol.", earlier) == [0, 1]


class TestMustNotFire:
    @pytest.mark.parametrize(
        ("older", "new"),
        [
            ("I have a dog called Max.", "I also have a cat called Luna."),
            ("I have a dog called Max.", "We got a second dog, Rex."),
            ("My friend Sam lives in Leeds.", "My friend Tom lives in York."),
            ("I like tea.", "I also like coffee."),
            ("I like tea.", "I like both tea and coffee."),
            ("I'm learning Spanish.", "I started learning Japanese as well."),
        ],
        ids=["two-pets", "second-pet", "two-friends", "likes-also", "likes-both", "learns-two"],
    )
    def test_facts_that_can_both_be_true_do_not_supersede(self, older: str, new: str) -> None:
        assert one(new, older) is None

    def test_another_subject_does_not_supersede_the_speaker(self) -> None:
        assert one("My sister lives in Leeds.", "I live in Bristol.") is None
        assert one("I live in Bristol.", "My sister lives in Leeds.") is None
        assert one("Sam moved to Bristol.", "I live in Leeds.") is None

    @pytest.mark.parametrize(
        ("older", "new"),
        [
            ("I live in Leeds.", "My old colleague Ines moved to Valencia."),
            ("I drive an Audi A4.", "Our neighbours drive a Ford Focus."),
            ("I live in Leeds.", "My landlord's son moved to York."),
            ("I drive a Tesla Model 3.", "My mum sold her Kia Niro and got a Ford Focus."),
            ("Home for me is Berlin.", "Standup has moved to 9am."),
            ("I use a Galaxy S21 as my phone.", "Moved my phone over to Tesco Mobile."),
        ],
        ids=["possessed-noun", "plural-relation", "relations-relation", "earlier-clause-subject", "noun-subject",
             "not-a-phone"],
    )
    def test_someone_or_something_elses_change_does_not_supersede_the_speaker(self, older: str, new: str) -> None:
        assert one(new, older) is None, explain(new, older)

    def test_a_friend_does_not_supersede_the_speaker(self) -> None:
        assert fired("My friend Tom lives in York.") == []

    @pytest.mark.parametrize("question", ["Do I still live in Leeds?", "Did I move to Bristol?", "where do I live now",
                                          "Should I switch to Helix?", "Is my port 8080 now?"])
    def test_a_question_supersedes_nothing(self, question: str) -> None:
        assert fired(question) == []

    def test_an_earlier_question_is_never_superseded(self) -> None:
        assert one("I moved to Bristol.", "Do I live in Leeds?") is None

    @pytest.mark.parametrize(("older", "new"), [("I live in Leeds.", "I still live in Leeds."),
                                                ("I drive a Honda Civic.", "My car is a Civic now."),
                                                ("My dev server port is 3000.", "The dev server runs on port 3000.")])
    def test_the_same_value_restated_does_not_supersede(self, older: str, new: str) -> None:
        assert one(new, older) is None

    def test_an_unrelated_attribute_does_not_supersede(self) -> None:
        assert one("I work at Globex now.", "I live in Leeds.") is None

    def test_another_things_port_does_not_supersede(self) -> None:
        assert one("Redis is on port 6379 now.", "The dev server runs on port 3000.") is None

    @pytest.mark.parametrize("new", ["If I moved to Bristol, I'd need a car.", "I'd love to live in Bristol someday.",
                                     "I'm thinking of moving to Bristol.", "We might move to Bristol next year."])
    def test_a_hypothetical_does_not_supersede(self, new: str) -> None:
        assert one(new, "I live in Leeds.") is None

    def test_a_guess_from_a_word_list_needs_a_change_word(self) -> None:
        assert one("I use Chrome.", "I use Firefox.") is None
        assert one("I use Chrome now.", "I use Firefox.") is not None

    def test_an_older_statement_holding_another_live_fact_is_kept(self) -> None:
        assert one("I moved to Bristol.", "I live in Leeds and work at Acme.") is None
        assert "also states employer" in explain("I moved to Bristol.", "I live in Leeds and work at Acme.")

    def test_an_older_statement_restated_in_full_may_go(self) -> None:
        assert one("I live in Leeds and work at Globex now.", "I live in Leeds and work at Acme.") is not None

    def test_change_words_about_nothing_that_changes_do_not_fire(self) -> None:
        for new in ("We moved the meeting to Friday.", "I changed my mind about the film.", "Now I remember.",
                    "I'm not sure about that anymore.", "I used to hate olives."):
            assert fired(new) == [], new


class TestBoundedValues:
    """Review D: plausible chat that names a new value without replacing the old one."""

    @pytest.mark.parametrize("new", ["I moved to London for the summer.", "I'm staying in Paris for a few months.", "I moved to Bristol temporarily."])
    def test_a_value_for_a_while_does_not_supersede(self, new: str) -> None:
        assert one(new, "I live in Leeds.") is None

    @pytest.mark.parametrize("new", ["I now use VS Code at work.", "I use VS Code on my laptop now.", "I switched to Emacs for work.", "I now use Emacs on weekends."])
    def test_a_value_in_a_narrower_scope_does_not_supersede(self, new: str) -> None:
        assert one(new, "I use vim.") is None

    def test_a_scoped_older_value_is_not_superseded_by_a_general_one(self) -> None:
        assert one("I switched to VS Code.", "I use vim at work.") is None

    @pytest.mark.parametrize("older", ["I live in Leeds.", "I live in York."])
    def test_several_values_in_sequence_do_not_supersede(self, older: str) -> None:
        assert one("I moved to Bristol in 2010 and then back to Leeds in 2015.", older) is None
        assert "in sequence" in explain("I moved to Bristol in 2010 and then back to Leeds in 2015.", older)

    def test_the_old_value_said_again_as_current_is_never_superseded(self) -> None:
        assert fired("I moved back to Leeds.") == []

    def test_a_move_for_work_is_still_a_move(self) -> None:
        p = one("I moved to London for work.", "I live in Leeds.")
        assert p is not None and p.new_value == "London"

    def test_back_to_alone_is_one_change(self) -> None:
        assert one("I'm back to eating meat.", "I'm vegetarian.") is not None


class TestNegation:
    def test_not_anymore_supersedes_the_same_value(self) -> None:
        p = one("I'm not vegetarian anymore.", "I'm vegetarian.")
        assert p is not None and p.rule == RULE_NEGATION and p.new_value.startswith("not ")

    def test_negating_a_value_ends_the_values_that_imply_it(self) -> None:
        p = one("I'm not vegetarian anymore.", "I'm vegan.")
        assert p is not None and p.rule == RULE_NEGATION

    def test_negating_another_value_does_not_fire(self) -> None:
        assert one("I don't live in York.", "I live in Leeds.") is None

    def test_a_value_said_again_after_its_negation_supersedes_the_negation(self) -> None:
        p = one("I'm vegan again.", "I'm not vegan anymore.")
        assert p is not None and p.rule == RULE_NEGATION

    def test_quitting_supersedes_a_habit(self) -> None:
        p = one("I quit smoking!", "I smoke about ten a day.")
        assert p is not None and p.attribute == "smoking"

    def test_breaking_up_supersedes_the_partner(self) -> None:
        p = one("Sam and I broke up.", "My partner is called Sam.")
        assert p is not None and p.rule == RULE_LEFT and p.new_value == "not Sam"


class TestParaphrase:
    @pytest.mark.parametrize(
        ("older", "new", "attribute"),
        [
            ("I live in Leeds.", "We've just moved to Bristol!", "residence"),
            ("Home for me is Leeds.", "We relocated to Bristol.", "residence"),
            ("I'm based in Leeds.", "We bought a place in Bristol and moved in.", "residence"),
            ("My flat is in Leeds.", "Packed up and moved from Leeds to Bristol.", "residence"),
            ("I work at Acme.", "Changed employers: Globex hired me.", "employer"),
            ("My employer is Acme.", "I started a new job at Globex.", "employer"),
            ("I work for Acme.", "I left Acme and joined Globex.", "employer"),
            ("My dev server port is 3000.", "Dev server now listens on port 8080.", "port"),
            ("I run the dev server on localhost:3000.", "The dev server is on 8080 now.", "port"),
            ("I'm vegetarian.", "I'm back to eating meat.", "diet"),
            ("I don't eat meat.", "I went vegan in January.", "diet"),
            ("I drive a Honda Civic.", "I sold the Civic and bought a Tesla Model 3.", "car"),
            ("My car is a Honda Civic.", "New car: a Kia Niro!", "car"),
            ("My phone is a Pixel 7.", "I upgraded to an iPhone 15.", "phone"),
            ("I write code in Vim.", "I use Helix now instead of Vim.", "editor"),
            ("My partner is called Sam.", "My new partner is Alex.", "partner"),
            ("I bank with Monzo.", "I moved my current account to Starling.", "bank"),
            ("My manager is Helen.", "Marcus is my boss now.", "manager"),
            ("I take the train to work.", "I cycle to work these days.", "commute"),
            ("My favourite colour is blue.", "Green is my favourite colour now.", "favourite colour"),
            ("Our daily standup is at 9:15.", "Standup moved to 10am.", "time"),
            ("I'm 34.", "I turned 35 last week.", "age"),
            ("My laptop runs Ubuntu.", "I reinstalled the laptop with Fedora.", "os"),
        ],
    )
    def test_a_paraphrase_of_the_attribute_supersedes(self, older: str, new: str, attribute: str) -> None:
        p = one(new, older)
        assert p is not None, explain(new, older)
        assert p.attribute == attribute


class TestProposal:
    def test_a_proposal_names_both_events_the_rule_and_both_values(self) -> None:
        (p,) = detect("We've just moved to Bristol!", [(3, "I live in Leeds.")], new_seq=9)
        assert (p.new_seq, p.older_seq, p.rule, p.subject, p.attribute) == (9, 3, RULE_SAME, "self", "residence")
        assert (p.old_value, p.new_value) == ("Leeds", "Bristol")

    def test_the_reason_quotes_the_values_not_the_statements(self) -> None:
        older, new = "My flat is in Leeds, near the lovely river.", "We've just moved to Bristol, finally!"
        (p,) = detect(new, [(0, older)], new_seq=1)
        assert "'Leeds'" in p.reason and "'Bristol'" in p.reason
        assert older not in p.reason and new not in p.reason and "river" not in p.reason

    def test_every_rule_is_a_named_rule(self) -> None:
        assert set(RULES) == {RULE_SAME, RULE_NEGATION, RULE_LEFT}
        assert all(r.startswith("rule:") for r in RULES)

    def test_proposals_come_oldest_first_and_once_per_seq(self) -> None:
        earlier = [(4, "I live in York."), (1, "I live in Leeds."), (4, "I live in York.")]
        assert fired("I moved to Bristol.", earlier) == [1, 4]

    @pytest.mark.parametrize("bad", [-1, True, 1.0, "3", None])
    def test_a_new_seq_that_is_not_a_seq_is_refused(self, bad: object) -> None:
        with pytest.raises(ValueError, match="new_seq"):
            detect("I moved to Bristol.", [(0, "I live in Leeds.")], new_seq=bad)  # type: ignore[arg-type]

    def test_an_earlier_seq_that_is_not_a_seq_is_refused(self) -> None:
        with pytest.raises(ValueError, match="earlier seq"):
            detect("I moved to Bristol.", [(-2, "I live in Leeds.")], new_seq=3)

    def test_explain_says_which_rule_fired_or_why_none_did(self) -> None:
        assert explain("I moved to Bristol.", "I live in Leeds.").startswith("rule:same-attribute: residence (you)")
        assert explain("Do I live in Leeds?", "I live in Leeds.").startswith("no supersession: the new statement")


# Statements the property tests draw from: facts, changes, negations, questions, chatter.
POOL = sorted({t for _, t in SESSION} | {
    "We've just moved to Bristol!", "I moved the dev server to 8080.", "I eat meat again.", "I'm not vegetarian anymore.",
    "I left Acme and joined Globex.", "I switched my editor to Helix.", "My sister moved to Leeds.", "I still live in Leeds.",
    "Do I live in Leeds?", "I also have a cat called Luna.", "Sam and I broke up.", "My partner is called Sam.",
    "I don't live in Leeds anymore, we're in York now.", "I used to live in York.", "The weather is awful.",
})


class TestOrder:
    @given(
        new=st.sampled_from(POOL),
        new_seq=st.integers(min_value=0, max_value=30),
        earlier=st.lists(st.tuples(st.integers(min_value=0, max_value=40), st.sampled_from(POOL)), max_size=12),
    )
    @settings(max_examples=300, deadline=None)
    def test_a_statement_never_supersedes_itself_or_a_later_event(
        self, new: str, new_seq: int, earlier: list[tuple[int, str]]
    ) -> None:
        got = detect(new, earlier, new_seq=new_seq)
        assert all(p.older_seq < new_seq and p.new_seq == new_seq for p in got)
        assert {p.older_seq for p in got} <= {s for s, _ in earlier}

    @pytest.mark.parametrize("text", POOL)
    def test_a_statement_does_not_supersede_the_same_words(self, text: str) -> None:
        assert detect(text, [(0, text)], new_seq=1) == []
        assert detect(text, [(1, text)], new_seq=1) == []

    @given(new=st.sampled_from(POOL), earlier=st.lists(st.sampled_from(POOL), max_size=8))
    @settings(max_examples=100, deadline=None)
    def test_the_same_input_gives_the_same_proposals(self, new: str, earlier: list[str]) -> None:
        pairs = list(enumerate(earlier))
        read.cache_clear()
        first = detect(new, pairs, new_seq=len(pairs))
        read.cache_clear()
        assert detect(new, pairs, new_seq=len(pairs)) == first

    @given(st.text(max_size=200))
    @settings(max_examples=200, deadline=None)
    def test_any_text_is_read_without_error(self, text: str) -> None:
        detect(text, [(0, text), (1, "I live in Leeds.")], new_seq=2)


class TestLongText:
    """A statement over MAX_READ_CHARS is a note, not a single fact: never read (which also bounds the time)."""

    PAD = " " * MAX_READ_CHARS  # no words: the fact alone would fire

    def test_a_long_new_statement_supersedes_nothing(self) -> None:
        assert fired("We've just moved to Bristol." + self.PAD) == []
        assert fired("We've just moved to Bristol.") == [1]

    def test_a_long_earlier_statement_is_skipped(self) -> None:
        assert fired("We've just moved to Bristol.", [(1, "I live in Leeds." + self.PAD)]) == []

    def test_a_long_text_of_many_sentences_returns_no_proposals(self) -> None:
        text = "I moved to Bristol and my dev server port is 8080 now. " * 150  # ~8,000 characters
        earlier = [(i, text) for i in range(10)] + [(10, "I live in Leeds."), (11, "My dev server port is 3000.")]
        assert detect(text, earlier, new_seq=12) == []
        assert shortlist_query(text) is None
        assert explain(text, "I live in Leeds.").startswith(f"no supersession: the new statement is over {MAX_READ_CHARS} characters")

    def test_a_statement_of_exactly_the_limit_is_read(self) -> None:
        text = "We've just moved to Bristol."
        assert fired(text + " " * (MAX_READ_CHARS - len(text))) == [1]


class TestShortlist:
    def test_the_shortlist_of_a_paraphrase_holds_the_older_statements_words(self) -> None:
        q = shortlist_query("We've just moved to Bristol!")
        assert q is not None and "live" in q.split() and "bristol" in q.split()

    def test_a_value_left_behind_is_in_the_shortlist(self) -> None:
        q = shortlist_query("I left Acme and joined Globex.")
        assert q is not None and "acme" in q.split()

    @pytest.mark.parametrize("text", ["Where do I live?", "The weather has been awful.", "I also like coffee."])
    def test_no_shortlist_for_a_text_stating_no_fact(self, text: str) -> None:
        assert shortlist_query(text) is None

    def test_every_attribute_has_shortlist_words(self) -> None:
        attributes = {a for a, _ in pat.HEADS} | {a for a, _, _, _ in pat.CLOSED} | {"port", "time", "hosting", "os"}
        attributes |= {a for _, attrs in pat.NOUN_ATTRS for a in attrs if a != "favourite"}
        attributes |= {a for _, _, cands in pat.SLOTS for a, _ in cands}
        attributes |= {"favourite colour", "github username"}
        assert [a for a in sorted(attributes) if not lex.shortlist_words(a)] == []

    def test_a_question_gets_its_attributes_words(self) -> None:
        q = topic_query("How old am I?")
        assert q is not None and q.startswith("How old am I?") and "turned" in q.split()
        assert topic_query("What a lovely day") is None
