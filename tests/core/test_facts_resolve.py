"""Resolve by the question (issue 32, facts.resolve): of the statements answering what a question asks, the newest
of each slot is current and an older one of another value is earlier; each clause is its own fact."""

from __future__ import annotations

import pytest

from facts.resolve import Resolution, resolve

COMPOUND = "I live in Paris and I work as a nurse."


class TestResolve:
    def test_a_newer_value_of_the_asked_slot_makes_the_older_statement_earlier(self) -> None:
        got = resolve("Where do I live?", [(1, "I live in Leeds."), (5, "I moved to Bristol last month.")])
        assert got == Resolution(frozenset({5}), {1: 5})

    def test_a_compound_statement_is_earlier_only_for_the_clause_that_changed(self) -> None:
        said = [(1, COMPOUND), (4, "I moved to Berlin last month.")]
        assert resolve("Where do I live?", said).earlier == {1: 4}
        assert resolve("What is my job?", said) == Resolution(frozenset({1}), {})

    def test_a_restatement_of_the_same_value_replaces_nothing(self) -> None:
        got = resolve("Where do I live?", [(1, "I live in Leeds."), (3, "Still living in Leeds, no plans to leave.")])
        assert got.earlier == {}

    def test_a_restated_value_is_still_earlier_once_another_value_follows(self) -> None:
        said = [(1, "I live in Leeds."), (2, "I'm based in Leeds."), (6, "We've moved to York.")]
        assert resolve("Where do I live?", said).earlier == {1: 6, 2: 6}

    def test_a_later_denial_makes_the_value_earlier(self) -> None:
        got = resolve("Where do I live?", [(1, "I live in Leeds."), (2, "I don't live in Leeds anymore.")])
        assert got.earlier == {1: 2} and got.current == frozenset()

    @pytest.mark.parametrize(
        "later",
        ["My brother lives in Rome.", "I'd love to live in Rome one day.", "I'm in Rome for the summer.",
         "Do you think I should move to Rome?", "My best friend just moved to Rome."],
    )
    def test_what_holds_beside_it_makes_nothing_earlier(self, later: str) -> None:
        assert resolve("Where do I live?", [(1, "I live in Leeds."), (2, later)]).earlier == {}

    @pytest.mark.parametrize(
        "correction",
        ["Oops, I meant York, not Leeds: that's where I live.", "Sorry, I said Leeds earlier, I actually live in York."],
    )
    def test_a_value_taken_back_is_earlier_even_when_the_new_one_is_not_read(self, correction: str) -> None:
        assert resolve("Where do I live?", [(1, "I live in Leeds."), (4, correction)]) == Resolution(frozenset({4}), {1: 4})

    @pytest.mark.parametrize("later", ["My brother lives in York, not Leeds.", "The train goes to York, not Leeds."])
    def test_someone_elses_not_takes_nothing_back(self, later: str) -> None:
        assert resolve("Where do I live?", [(1, "I live in Leeds."), (4, later)]).earlier == {}

    def test_another_subject_is_its_own_slot(self) -> None:
        said = [(1, "My sister works as a nurse."), (2, "I'm a teacher."), (3, "My sister works as a chef now.")]
        assert resolve("What is my job?", said).earlier == {}
        assert resolve("What is my sister's job?", said).earlier == {1: 3}

    @pytest.mark.parametrize("question", ["What did Caroline say about Paris?", "Tell me a joke.", ""])
    def test_a_question_asking_no_tracked_attribute_resolves_nothing(self, question: str) -> None:
        assert resolve(question, [(1, "I live in Leeds."), (2, "I moved to York.")]) == Resolution()

    def test_order_given_does_not_matter(self) -> None:
        said = [(5, "I moved to Bristol last month."), (1, "I live in Leeds.")]
        assert resolve("Where do I live?", said).earlier == {1: 5}
