"""The slot's statements found by its values (issue 32, facts.slots): a later statement that names a value of the
asked slot, in the speaker's voice, with a sign that something changed, is the slot's newest statement whatever
its other words; the older ones are earlier (facts.resolve). Nothing else is tied to the slot by a value."""

from __future__ import annotations

import pytest

from facts.resolve import Resolution, resolve, values_asked
from facts.slots import mentions, moves_on, named_values, value_query

HOME = "I live in Leeds."
AWAY = "Leeds is behind us now, we drove south to Exeter with the van yesterday."  # no word of the question's
FURTHER = "Exeter is no longer it for us, Truro suits the dog better."


class TestMovesOn:
    @pytest.mark.parametrize(
        "later",
        [AWAY, "We don't rent in Leeds any more.", "We sold everything in Leeds, starting over by the sea.",
         "We left Leeds in May."],
    )
    def test_a_later_statement_naming_the_value_with_a_change_sign_moves_on(self, later: str) -> None:
        assert moves_on(later, "Leeds", "self", "residence")
        assert resolve("Where do I live?", [(1, HOME), (4, later)]) == Resolution(frozenset({4}), {1: 4})

    @pytest.mark.parametrize(
        "later",
        ["Mum visited me in Leeds.",  # no change sign
         "My brother left Leeds for good.",  # someone else's
         "If we left Leeds, where would we go?",  # a question, and hypothetical
         "I might leave Leeds next year.",  # hypothetical
         "We also have a flat in Leeds now.",  # beside it
         "The train from Leeds was late again."],  # no one's, and no change
    )
    def test_nothing_else_naming_the_value_is_tied_to_the_slot(self, later: str) -> None:
        assert resolve("Where do I live?", [(1, HOME), (4, later)]).earlier == {}

    def test_a_chain_of_changes_is_followed_value_by_value(self) -> None:
        got = resolve("Where do I live?", [(1, HOME), (4, AWAY), (9, FURTHER)])
        assert got == Resolution(frozenset({9}), {1: 4, 4: 9})

    def test_a_later_statement_of_the_named_value_restates_it(self) -> None:
        got = resolve("Where do I live?", [(1, HOME), (4, AWAY), (9, "I live in Exeter.")])
        assert got.current == {9} and got.earlier == {1: 4}  # the move is not an earlier value of Exeter

    def test_a_value_of_another_slot_ties_nothing(self) -> None:
        said = [(1, HOME), (2, "I work at Globex."), (4, "Globex is behind me now, I'm freelancing.")]
        assert resolve("Where do I live?", said).earlier == {}
        assert resolve("Where do I work?", said) == Resolution(frozenset({4}), {2: 4})

    def test_an_older_statement_than_the_value_is_not_a_later_one(self) -> None:
        assert resolve("Where do I live?", [(1, AWAY.replace("now, ", "")), (4, HOME)]).current == {4}


class TestWhatToSearch:
    def test_the_values_asked_are_the_slots_values_and_those_the_moves_name(self) -> None:
        assert values_asked("Where do I live?", [(1, HOME), (4, AWAY)]) == {"leeds", "exeter"}
        assert values_asked("Tell me a joke.", [(1, HOME), (4, AWAY)]) == frozenset()

    def test_the_query_is_the_values_words_and_none_without_values(self) -> None:
        assert value_query({"leeds", "royal canin"}) == "canin leeds royal"
        assert value_query(set()) is None

    def test_named_values_are_names_and_numbers_not_the_one_left(self) -> None:
        assert named_values("Sorry, the new place in Bristol opens at 10:15, not Leeds.", "Leeds") == {"bristol", "10:15"}

    @pytest.mark.parametrize(("text", "said", "named"), [("I loved LEEDS.", "Leeds", True), ("Leedsfolk", "Leeds", False),
                                                         ("Royal  Canin it is", "Royal Canin", True), ("x", "a", False)])
    def test_a_mention_is_a_whole_word_or_phrase(self, text: str, said: str, named: bool) -> None:
        assert mentions(text, said) is named


class TestLeftValues:
    def test_an_older_statement_naming_a_value_later_denied_is_earlier_read_or_not(self) -> None:
        said = [(1, "Arsenal are my lot, always have been."), (3, "My brother supports Arsenal."),
                (5, "I don't follow Arsenal anymore, I support Brentford.")]
        assert resolve("Which football team do I support?", said) == Resolution(frozenset({5}), {1: 5})

    def test_an_older_statement_naming_a_value_left_behind_is_earlier(self) -> None:
        said = [(1, "Our Civic is twelve years old and I love it."), (4, "I sold the Civic and bought a Subaru Outback.")]
        got = resolve("What car do I drive?", said)
        assert got.earlier == {1: 4} and got.current == {4}

    def test_a_later_statement_naming_the_left_value_is_not_made_earlier(self) -> None:
        said = [(1, "I live in Leeds."), (4, "I don't live in Leeds anymore."), (6, "I miss Leeds.")]
        assert 6 not in resolve("Where do I live?", said).earlier
