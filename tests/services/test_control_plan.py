"""The cascade plan (pure): what an erasure touches, and what it refuses before anything changes."""

from __future__ import annotations

import pytest

from control.plan import Citation, PlanError, Slot, parse_seqs, plan

# a session: 0 memory (user), 1 answer citing 0, 2 user, 3 answer citing 0 and 2, 4 user, 5 answer citing 1 (only),
# 6 system erasure record, 7 an already erased user message, 8 user, 9 answer citing 8
ROLES = ["user", "assistant", "user", "assistant", "user", "assistant", "system", "user", "user", "assistant"]
SLOTS = [Slot(i, r, i == 7, i == 6) for i, r in enumerate(ROLES)]
R1 = Citation("rcpt_" + "1" * 32, 1, 1, {0: "query", 1: "response"})
R3 = Citation("rcpt_" + "3" * 32, 2, 3, {0: "memory#1", 2: "query", 3: "response"})
R5 = Citation("rcpt_" + "5" * 32, 2, 5, {1: "memory#1", 4: "query", 5: "response"})
R9 = Citation("rcpt_" + "9" * 32, 2, 9, {8: "query", 9: "response"})
CITATIONS = [R1, R3, R5, R9]


def _plan(named: list[int], *, cascade: bool = True):  # type: ignore[no-untyped-def]
    return plan("s", named, len(SLOTS), SLOTS.__getitem__, CITATIONS, cascade=cascade)


def test_answers_whose_receipt_cited_an_erased_event_are_erased_with_it() -> None:
    p = _plan([0])
    assert p.named == (0,)
    assert p.cascaded == (1, 3, 5)  # 5 cited answer 1, which quoted the memory: the cascade is transitive
    assert p.erase == (0, 1, 3, 5)


def test_a_user_message_is_erased_only_when_named() -> None:
    p = _plan([0])
    assert 2 not in p.erase and 4 not in p.erase


def test_no_cascade_erases_only_what_was_named() -> None:
    p = _plan([0], cascade=False)
    assert p.erase == (0,) and p.cascaded == ()
    assert p.withdraw == (R1.receipt_id,)
    assert p.redact == {R3.receipt_id: (0,)}


def test_format_1_receipts_are_withdrawn_and_format_2_redacted_for_exactly_the_erased_seqs() -> None:
    p = _plan([0])
    assert p.withdraw == (R1.receipt_id,)
    assert p.redact == {R3.receipt_id: (0, 3), R5.receipt_id: (1, 5)}
    assert R9.receipt_id not in p.redact


def test_roles_are_reported_for_every_erased_event() -> None:
    assert _plan([0]).roles == {0: "user", 1: "assistant", 3: "assistant", 5: "assistant"}


@pytest.mark.parametrize(
    ("named", "words"),
    [([10], "no event at seq 10"), ([7], "seq 7 is already erased"), ([6], "seq 6 is an erasure record"), ([], "no seq named")],
    ids=["out-of-range", "already-erased", "erasure-record", "none"],
)
def test_a_bad_request_is_refused_with_one_line_naming_it(named: list[int], words: str) -> None:
    with pytest.raises(PlanError) as info:
        _plan(named)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_an_already_erased_answer_is_not_cascaded_again() -> None:
    slots = list(SLOTS)
    slots[1] = Slot(1, "assistant", True, False)
    p = plan("s", [0], len(slots), slots.__getitem__, CITATIONS)
    assert 1 not in p.erase and p.cascaded == (3,)


@pytest.mark.parametrize("bad", ["x", "-1", -1, True, 1.5, "1e3", "٣"])
def test_seqs_that_are_not_non_negative_integers_are_refused(bad: object) -> None:
    with pytest.raises(PlanError):
        parse_seqs([bad])


def test_seqs_typed_as_text_are_read_and_duplicates_collapse() -> None:
    assert parse_seqs(["3", 1, " 3 "]) == [1, 3]


def test_an_event_id_names_the_same_event_as_its_seq(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from control.forget import preview
    from storage.files.ledger.store import Ledger

    led = Ledger(tmp_path)
    a = led.append("s", "user", "I adopted a grey cat named Miso", {})
    led.append("s", "user", "I moved to Lisbon", {})
    assert preview(tmp_path, "s", [a.id], ledger=led).erase == preview(tmp_path, "s", [a.seq], ledger=led).erase == (0,)
    with pytest.raises(PlanError, match="no event with id"):
        preview(tmp_path, "s", ["evt_" + "0" * 32], ledger=led)
    with pytest.raises(PlanError, match="not an event id"):
        preview(tmp_path, "s", ["evt_xyz"], ledger=led)
