"""Supersede and correct (issue 12): the supersession record, the state derived from it, the I/O, the CLI.

docs/FORMAT.md §19. A supersession never touches an event; which statements are superseded is a pure function
of the ledger (a property test replays random supersede/revoke/restore sequences naively and compares).
"""

from __future__ import annotations

import copy
import hashlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import control
from cli.prog_control import main as control_main
from control.forget import forget
from control.plan import PlanError
from control.revocation import current
from control.state import derive
from control.supersession import (
    MAX_STATEMENT_CHARS,
    SupersedeError,
    correct,
    current_supersessions,
    history,
    supersede,
    superseded_seqs,
)
from control.supersession_state import shown_reason, stored_reason
from ledger.controls import CONTROL_TEXTS, control_meta, control_of
from ledger.event import GENESIS, Event, make_event
from ledger.supersessions import (
    SUPERSEDE_TEXT,
    SupersessionRecord,
    is_control_record,
    supersession_meta,
    supersession_of,
)
from retrieval.indexing import skipped
from storage.files.ledger.store import Ledger
from storage.files.receipts import checkpoint_files as checkpoints_files
from storage.files.receipts import files
from storage.files.retrieval.db import Index

from ..forget_support import engine

ROOT = Path(__file__).resolve().parents[2]
ID_A = "evt_" + "a" * 32
ID_B = "evt_" + "b" * 32


def _snapshot(data: Path) -> dict[str, str]:
    return {str(p.relative_to(data)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(data.rglob("*")) if p.is_file()}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    eng = engine(d)
    # appended past the engine: Engine.remember would run the detector, which supersedes seq 0 itself
    with files.session_turn_lock(d, "alice"):  # as remember does
        for text in ("I live in Leeds", "My dev server port is 3000", "We've just moved to Bristol"):  # 0, 1, 2
            eng.ledger.append("alice", "user", text, {})
        checkpoints_files.issue(d, eng.ledger, "alice", eng.key)
    eng.index.index_session("alice")
    eng.index.close()
    eng.ledger.close()
    return d


# -- the record (pure) -------------------------------------------------------------------------------------
def _valid() -> tuple[str, str, dict[str, Any], int]:
    meta = supersession_meta(new_seq=5, new_id=ID_B, old_seq=2, old_id=ID_A, decided_by="model:llama-3.3-70b", checked_by="rule:shortlist", reason="residence changed")
    return "system", SUPERSEDE_TEXT, meta, 6


def test_a_record_round_trips() -> None:
    role, text, meta, own = _valid()
    assert supersession_of(role, text, meta, own) == SupersessionRecord(5, ID_B, 2, ID_A, "model:llama-3.3-70b", "rule:shortlist", "residence changed")
    assert supersession_of(role, text, json.loads(json.dumps(meta)), own) is not None
    assert supersession_of(role, text, meta) is not None  # without own_seq: no check against the record's place
    for decided_by in ("visitor", "rule:same-attribute", "rule:negation", "rule:left-behind"):
        m = supersession_meta(new_seq=1, new_id=ID_B, old_seq=0, old_id=ID_A, decided_by=decided_by)
        assert supersession_of("system", SUPERSEDE_TEXT, m, 2) == SupersessionRecord(1, ID_B, 0, ID_A, decided_by, None, None)


def _set(path: tuple[str, ...], value: object) -> Callable[[dict[str, Any]], None]:
    def go(meta: dict[str, Any]) -> None:
        node = meta
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
    return go


def _drop(path: tuple[str, ...]) -> Callable[[dict[str, Any]], None]:
    def go(meta: dict[str, Any]) -> None:
        node = meta
        for k in path[:-1]:
            node = node[k]
        del node[path[-1]]
    return go


S = ("supersession",)
META_MUTATIONS: dict[str, Callable[[dict[str, Any]], None]] = {
    "extra-top-key": _set(("control",), {}),
    "no-supersession": _drop(S),
    "supersession-list": _set(S, []),
    **{f"missing-{f}": _drop((*S, f)) for f in ("v", "new", "old", "decided_by", "checked_by", "reason")},
    "extra-field": _set((*S, "why"), "x"),
    "v-2": _set((*S, "v"), 2),
    "v-true": _set((*S, "v"), True),
    "v-string": _set((*S, "v"), "1"),
    "v-float": _set((*S, "v"), 1.0),
    "new-list": _set((*S, "new"), [5, ID_B]),
    "old-null": _set((*S, "old"), None),
    "new-extra-key": _set((*S, "new", "ts"), "x"),
    "old-missing-id": _drop((*S, "old", "id")),
    "old-seq-negative": _set((*S, "old", "seq"), -1),
    "old-seq-bool": _set((*S, "old", "seq"), True),
    "old-seq-string": _set((*S, "old", "seq"), "2"),
    "old-seq-float": _set((*S, "old", "seq"), 2.0),
    "old-equals-new": _set((*S, "old", "seq"), 5),
    "old-after-new": _set((*S, "old", "seq"), 7),
    "new-at-own-seq": _set((*S, "new", "seq"), 6),
    "new-after-own-seq": _set((*S, "new", "seq"), 9),
    "old-id-upper": _set((*S, "old", "id"), "evt_" + "A" * 32),
    "old-id-short": _set((*S, "old", "id"), "evt_abc"),
    "old-id-prefix": _set((*S, "old", "id"), "ev_" + "a" * 33),
    "new-id-number": _set((*S, "new", "id"), 5),
    "same-id-both": _set((*S, "new", "id"), ID_A),
    "decided-empty": _set((*S, "decided_by"), ""),
    "decided-person": _set((*S, "decided_by"), "person"),
    "decided-Visitor": _set((*S, "decided_by"), "Visitor"),
    "decided-rule-bare": _set((*S, "decided_by"), "rule:"),
    "decided-rule-upper": _set((*S, "decided_by"), "rule:Same"),
    "decided-model-bare": _set((*S, "decided_by"), "model:"),
    "decided-model-space": _set((*S, "decided_by"), "model:a b"),
    "decided-null": _set((*S, "decided_by"), None),
    "decided-number": _set((*S, "decided_by"), 5),
    "decided-too-long": _set((*S, "decided_by"), "model:" + "x" * 300),
    "model-unchecked": _set((*S, "checked_by"), None),
    "model-checked-by-visitor": _set((*S, "checked_by"), "visitor"),
    "model-checked-by-model": _set((*S, "checked_by"), "model:other"),
    "reason-empty": _set((*S, "reason"), ""),
    "reason-number": _set((*S, "reason"), 5),
    "reason-too-long": _set((*S, "reason"), "x" * 1001),
}


def _refused_mutations() -> list[str]:
    role, text, meta, own = _valid()
    slipped = []
    for name, mutate in META_MUTATIONS.items():
        m = copy.deepcopy(meta)
        mutate(m)
        if supersession_of(role, text, m, own) is not None:
            slipped.append(name)
    for name, (r, t) in {
        "role-user": ("user", text), "role-assistant": ("assistant", text), "text-revoke": (role, CONTROL_TEXTS["revoke"]),
        "text-space": (role, text + " "), "text-other": (role, "[control record: superseded]"),
    }.items():
        if supersession_of(r, t, meta, own) is not None:
            slipped.append(name)
    for name, checked in {"visitor-checked": "rule:shortlist", "rule-checked": "rule:shortlist"}.items():
        m = copy.deepcopy(meta)
        m["supersession"]["decided_by"] = "visitor" if name.startswith("visitor") else "rule:same-attribute"
        m["supersession"]["checked_by"] = checked
        if supersession_of(role, text, m, own) is not None:
            slipped.append(name)
    return slipped


def test_every_generated_mutation_of_a_record_is_refused() -> None:
    assert _refused_mutations() == []


def test_records_and_revocations_are_told_apart_and_both_are_control_records() -> None:
    role, text, meta, own = _valid()
    revoke = control_meta("revoke", 2, ID_A, None)
    assert control_of(role, text, meta, own) is None and supersession_of("system", CONTROL_TEXTS["revoke"], revoke, own) is None
    assert is_control_record(role, text, meta, own) and is_control_record("system", CONTROL_TEXTS["revoke"], revoke, own)
    assert not is_control_record("user", "I live in Leeds", {}, own)


# -- reasons: stored ones never quote ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("attribute", "texts", "expected"),
    [
        ("residence", ("I live in Leeds", "We've just moved to Bristol"), "residence changed"),
        ("diet", ("I'm vegetarian", "I changed my mind and eat meat"), "new diet"),
        ("port", ("My dev server port is 3000", "I moved the dev server to 8080"), None),
        ("favourite band", ("My favourite band is Muse", "Now it's Blur"), None),
        ("favourite nyc bagel", ("I live in NYC", "I moved to Boston"), "favourite changed"),
        ("github username", ("I'm octo on there", "I renamed it to cat"), "github username changed"),
        ("Residence", ("I live in NYC", "I moved to Boston"), "residence changed"),
    ],
)
def test_a_stored_reason_names_the_attribute_and_never_a_word_of_either_statement(attribute: str, texts: tuple[str, str], expected: str | None) -> None:
    assert stored_reason(attribute, *texts) == expected


@pytest.mark.parametrize("label", ["nyc home", "home in nyc", "la flat", "sf job", "ex nyc", "place", "where I live", "residence!"])
def test_a_label_outside_the_detectors_vocabulary_is_never_stored(label: str) -> None:
    # a model's free-text attribute: "nyc home changed" would outlive "I live in NYC" once it is forgotten
    assert stored_reason(label, "I live in NYC", "We moved to LA") is None


def test_the_shown_reason_quotes_the_values_while_both_texts_exist_and_the_stored_one_after(data: Path) -> None:
    supersede(data, "alice", 2, 0, decided_by="rule:same-attribute", reason="residence changed")
    link = current_supersessions(Ledger(data), "alice").superseded[0]
    assert "'Leeds'" in (shown_reason(link, "I live in Leeds", "We've just moved to Bristol") or "")
    assert shown_reason(link, None, "We've just moved to Bristol") == "residence changed"


# -- supersede and correct append exactly the right events ---------------------------------------------------
def test_supersede_appends_one_record_leaves_both_events_untouched_and_keeps_a_checkpoint(data: Path) -> None:
    led = Ledger(data)
    before = led.read_events("alice", [0, 1, 2])
    result = supersede(data, "alice", 2, 0, reason="moved away")
    assert (result.new_seq, result.old_seq, result.record_seq, result.decided_by) == (2, 0, 3, "visitor")
    count, head = led.head("alice")
    assert count == 4 and led.read_events("alice", [0, 1, 2]) == before
    ev = led.read_events("alice", [3])[0]
    assert (ev.role, ev.text) == ("system", SUPERSEDE_TEXT)
    assert ev.meta == {"supersession": {"v": 1, "new": {"seq": 2, "id": before[2].id}, "old": {"seq": 0, "id": before[0].id},
                                        "decided_by": "visitor", "checked_by": None, "reason": "moved away"}}
    assert "Leeds" not in ev.to_line().decode() and "Bristol" not in ev.to_line().decode()
    assert led.verify("alice").ok
    cp = checkpoints_files.latest(data, "alice")
    assert cp is not None and cp["body"]["tree_size"] == 4 and cp["body"]["chain_head"] == head
    assert superseded_seqs(data, "alice") == {0: 2}
    assert result.summary().startswith("session alice: seq 0 (evt_") and "record at seq 3" in result.summary()


def test_a_model_proposal_is_recorded_with_the_rule_that_checked_it(data: Path) -> None:
    r = supersede(data, "alice", "2", Ledger(data).read_events("alice", [0])[0].id, decided_by="model:llama-3.3-70b", checked_by="rule:shortlist")
    link = current_supersessions(Ledger(data), "alice").superseded[0]
    assert (r.old_seq, link.decided_by, link.checked_by, link.record_seq) == (0, "model:llama-3.3-70b", "rule:shortlist", 3)


def test_correct_appends_the_new_statement_then_the_record_and_indexes_only_the_statement(data: Path) -> None:
    led = Ledger(data)
    result = correct(data, "alice", 1, "The dev server runs on 8080 now")
    assert (result.new_seq, result.record_seq, result.old_seq, result.corrected) == (3, 4, 1, True)
    new, rec = led.read_events("alice", [3, 4])
    assert (new.role, new.text, new.meta) == ("user", "The dev server runs on 8080 now", {"kind": "chat"})
    assert supersession_of(rec.role, rec.text, rec.meta, rec.seq) == SupersessionRecord(3, new.id, 1, result.old_id, "visitor", None, None)
    assert led.head("alice")[0] == 5 and checkpoints_files.latest(data, "alice")["body"]["tree_size"] == 5  # type: ignore[index]
    idx = Index(data, led)
    try:
        assert [h.seq for h in idx.search("alice", "dev server 8080", 5).results][0] == 3
        assert 4 not in [h.seq for h in idx.search("alice", "control record supersede", 5).results]
    finally:
        idx.close()
    assert skipped(rec) and not skipped(new)


def test_the_statement_limit_is_the_chat_message_limit() -> None:
    from chat.engine import MAX_MESSAGE_CHARS

    assert MAX_STATEMENT_CHARS == MAX_MESSAGE_CHARS


# -- refusals: one line, nothing appended ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("setup", "call", "words"),
    [
        (None, lambda d: supersede(d, "bob", 2, 0), "session bob: no such session"),
        (None, lambda d: supersede(d, "../x", 2, 0), "session"),
        (None, lambda d: supersede(d, "alice", 9, 0), "session alice: no event at seq 9"),
        (None, lambda d: supersede(d, "alice", 2, "x"), "not a non-negative integer"),
        (None, lambda d: supersede(d, "alice", 2, "evt_" + "0" * 32), "no event with id"),
        (None, lambda d: supersede(d, "alice", 0, 2), "session alice: seq 2 is not older than seq 0"),
        (None, lambda d: supersede(d, "alice", 1, 1), "seq 1 is not older than seq 1"),
        ("supersede", lambda d: supersede(d, "alice", 2, 0), "session alice: seq 0 is already superseded by seq 2 (the record at seq 3)"),
        ("supersede", lambda d: supersede(d, "alice", 3, 1), "seq 3 is a control record"),
        ("supersede", lambda d: correct(d, "alice", 3, "x y"), "seq 3 is a control record"),
        ("revoke", lambda d: supersede(d, "alice", 3, 0), "seq 3 is a control record"),
        ("forget", lambda d: supersede(d, "alice", 2, 0), "session alice: seq 0 is erased"),
        ("forget", lambda d: supersede(d, "alice", 3, 1), "seq 3 is an erasure record"),
        ("forget", lambda d: correct(d, "alice", 0, "I live in York"), "seq 0 is erased"),
        (None, lambda d: supersede(d, "alice", 2, 0, reason="Leeds was grim"), "repeats a word of the event at seq 0"),
        (None, lambda d: supersede(d, "alice", 2, 0, reason="Bristol now"), "repeats a word of the event at seq 2"),
        (None, lambda d: correct(d, "alice", 0, "I live in York", reason="York it is"), "repeats a word of the event at seq 3"),
        (None, lambda d: supersede(d, "alice", 2, 0, reason="x" * 1001), "at most 1000"),
        (None, lambda d: supersede(d, "alice", 2, 0, decided_by="person"), "decided_by 'person'"),
        (None, lambda d: supersede(d, "alice", 2, 0, decided_by="model:x"), "names the rule that accepted it"),
        (None, lambda d: supersede(d, "alice", 2, 0, checked_by="rule:x"), "only a model's proposal is checked"),
        (None, lambda d: correct(d, "alice", 0, "   "), "the new statement is empty"),
        (None, lambda d: correct(d, "alice", 0, "x" * 8001), "over the limit of 8000"),
        (None, lambda d: history(d, "alice", 7), "no event at seq 7"),
        ("supersede", lambda d: history(d, "alice", 3), "seq 3 is a record, not a statement"),
    ],
)
def test_a_refused_supersede_correct_or_history_is_one_line_and_appends_nothing(data: Path, setup: str | None, call: Callable[[Path], object], words: str) -> None:
    if setup == "supersede":
        supersede(data, "alice", 2, 0)
    elif setup == "revoke":
        control.revoke(data, "alice", 1)
    elif setup == "forget":
        forget(data, "alice", [0])  # the erasure record lands at seq 3
    before = _snapshot(data)
    with pytest.raises(SupersedeError) as err:
        call(data)
    assert words in str(err.value) and "\n" not in str(err.value)
    assert _snapshot(data) == before


def test_a_supersession_record_cannot_be_revoked_or_forgotten(data: Path) -> None:
    r = supersede(data, "alice", 2, 0)
    with pytest.raises(control.ControlError, match="is a control record"):
        control.revoke(data, "alice", r.record_seq)
    with pytest.raises(PlanError, match="control record"):
        forget(data, "alice", [r.record_seq])


# -- the state: what erasing or revoking either side does --------------------------------------------------
def test_a_revoked_or_forgotten_newer_statement_leaves_the_older_one_superseded(data: Path) -> None:
    supersede(data, "alice", 2, 0)
    control.revoke(data, "alice", 2)
    assert superseded_seqs(data, "alice") == {0: 2}
    forget(data, "alice", [2])
    assert superseded_seqs(data, "alice") == {0: 2}
    rows = history(data, "alice", 0)
    assert [(r.seq, r.state, r.erased, r.revoked, r.text) for r in rows] == [
        (0, "superseded", False, False, "I live in Leeds"),
        (2, "live", True, True, None),
    ]


def test_forgetting_the_older_statement_removes_its_words_and_keeps_the_supersession(data: Path) -> None:
    supersede(data, "alice", 2, 0, decided_by="rule:same-attribute", reason="residence changed")
    forget(data, "alice", [0])
    rows = history(data, "alice", 2)
    assert [(r.seq, r.erased, r.text, r.superseded_by, r.reason, r.shown_reason) for r in rows] == [
        (0, True, None, 2, "residence changed", "residence changed"),
        (2, False, "We've just moved to Bristol", None, None, None),
    ]
    assert b"Leeds" not in (data / "sessions" / "alice" / "events.jsonl").read_bytes()


def test_history_follows_the_chain_both_ways_oldest_first(data: Path) -> None:
    supersede(data, "alice", 2, 0, decided_by="rule:same-attribute")  # 3
    r = correct(data, "alice", 2, "We live in Bath these days")  # 4, record 5
    correct(data, "alice", 1, "The dev server runs on 8080 now")  # 6, record 7
    for seq in (0, 2, 4):
        rows = history(data, "alice", seq)
        assert [x.seq for x in rows] == [0, 2, 4]
        assert [x.superseded_by for x in rows] == [2, 4, None] and {x.live_seq for x in rows} == {r.new_seq}
    assert [x.seq for x in history(data, "alice", 6)] == [1, 6]
    assert [x.supersedes for x in history(data, "alice", 4)] == [(), (0,), (2,)]
    assert [x.seq for x in history(data, "alice", Ledger(data).read_events("alice", [1])[0].id)] == [1, 6]
    assert history(data, "alice", 0)[0].to_dict()["state"] == "superseded"


def _live(rows: list[Any]) -> list[int]:
    return [r.seq for r in rows if r.state == "live"]


def test_correcting_a_superseded_statement_supersedes_the_one_holding_now(data: Path) -> None:
    supersede(data, "alice", 2, 0, decided_by="rule:same-attribute")  # record 3: Bristol replaced Leeds
    r = correct(data, "alice", 0, "Actually I live in Cardiff")  # 4, record 5
    assert (r.old_seq, r.new_seq, r.named_seq) == (2, 4, 0)
    assert "seq 2 (" in r.summary() and "which held since it superseded seq 0, superseded by the new statement at seq 4" in r.summary()
    rows = history(data, "alice", 0)
    assert [(x.seq, x.superseded_by) for x in rows] == [(0, 2), (2, 4), (4, None)] and _live(rows) == [4]


def test_correcting_the_same_statement_again_and_again_leaves_one_live_statement(data: Path) -> None:
    for text in ("I live in York", "I live in Bath", "I live in Hull"):
        correct(data, "alice", 0, text)
    rows = history(data, "alice", 0)
    assert len(rows) == 4 and _live(rows) == [rows[-1].seq] and rows[-1].text == "I live in Hull"


def test_correcting_the_statement_holding_now_names_no_other(data: Path) -> None:
    r = correct(data, "alice", 0, "I live in York")
    assert (r.old_seq, r.named_seq) == (0, None) and "which held" not in r.summary()


def test_superseding_an_already_superseded_statement_is_refused_naming_the_live_one(data: Path) -> None:
    supersede(data, "alice", 2, 0)  # record 3
    led = Ledger(data)
    led.append("alice", "user", "I live in York", {})  # 4
    before = _snapshot(data)
    with pytest.raises(SupersedeError) as err:
        supersede(data, "alice", 4, 0, ledger=led)
    assert str(err.value) == "session alice: seq 0 is already superseded; seq 2 holds its fact now, supersede that one instead"
    assert _snapshot(data) == before
    supersede(data, "alice", 4, 2, ledger=led)
    assert _live(history(data, "alice", 0)) == [4]


# -- the property: the derived state equals a naive replay ----------------------------------------------
def _ev(seq: int, prev: str, role: str, text: str, meta: dict[str, Any]) -> Event:
    return make_event(
        session="prop", seq=seq, prev=bytes.fromhex(prev), role=role, text=text, meta=meta, ts="2026-01-01T00:00:00.000000Z",
        event_id="evt_" + hashlib.sha256(b"%d" % seq).hexdigest()[:32], salt=hashlib.sha256(b"s%d" % seq).digest(),
    )


def _naive_history(pairs: list[tuple[int, int]], seq: int) -> list[int]:
    group = {seq}
    changed = True
    while changed:
        changed = False
        for old, new in pairs:
            if (old in group) != (new in group):
                group |= {old, new}
                changed = True
    return sorted(group)


ops = st.lists(st.tuples(st.sampled_from(["supersede", "revoke", "restore", "turn", "junk"]), st.integers(0, 7), st.integers(0, 7)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_derived_state_equals_a_naive_replay_of_the_records(seq_ops: list[tuple[str, int, int]]) -> None:
    events: list[Event] = []
    prev = GENESIS.hex()
    for i in range(8):  # eight statements first
        ev = _ev(i, prev, "user", f"statement {i}", {})
        events.append(ev)
        prev = ev.chain
    first: dict[int, tuple[int, int]] = {}  # old -> (new, record seq)
    pairs: list[tuple[int, int]] = []
    revoked: set[int] = set()
    for action, a, b in seq_ops:
        seq = len(events)
        old, new = min(a, b), max(a, b)
        if action == "supersede" and old < new:
            ev = _ev(seq, prev, "system", SUPERSEDE_TEXT, supersession_meta(new_seq=new, new_id=events[new].id, old_seq=old, old_id=events[old].id, decided_by="rule:same-attribute"))
            if (old, new) not in pairs:
                pairs.append((old, new))
                first.setdefault(old, (new, seq))
        elif action in ("revoke", "restore"):
            ev = _ev(seq, prev, "system", CONTROL_TEXTS[action], control_meta(action, a, events[a].id, None))
            (revoked.add if action == "revoke" else revoked.discard)(a)
        elif action == "junk":  # looks like a record but is not one: a user's, the wrong text, the wrong order
            meta = supersession_meta(new_seq=new, new_id=events[new].id, old_seq=old, old_id=events[old].id, decided_by="visitor")
            if a % 3 == 0:
                ev = _ev(seq, prev, "user", SUPERSEDE_TEXT, meta)
            elif a % 3 == 1:
                ev = _ev(seq, prev, "system", "supersede", meta)
            else:
                ev = _ev(seq, prev, "system", SUPERSEDE_TEXT, supersession_meta(new_seq=old, new_id=events[old].id, old_seq=new, old_id=events[new].id, decided_by="visitor"))
        else:
            ev = _ev(seq, prev, "user", f"question {seq}", {"kind": "chat"})
        events.append(ev)
        prev = ev.chain
    state = derive(events)
    held = state.supersessions
    assert {o: (x.new_seq, x.record_seq) for o, x in held.superseded.items()} == first
    assert [(x.old_seq, x.new_seq) for x in held.links] == pairs
    assert set(state.revoked) == revoked
    for s in range(8):
        assert held.history(s) == _naive_history(pairs, s)
        live = s
        while live in first:
            live = first[live][0]
        assert held.live(s) == live


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.booleans()), min_size=1, max_size=10))
def test_the_cached_state_follows_appends_and_equals_a_fresh_derivation(tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[int, int, bool]]) -> None:
    d = tmp_path_factory.mktemp("prop")
    led = Ledger(d)
    for text in ("one", "two", "three", "four"):
        led.append("s", "user", text, {})
    pairs: set[tuple[int, int]] = set()
    for a, b, also_revoke in steps:
        try:
            supersede(d, "s", b, a, ledger=led)
            pairs.add((a, b))
        except SupersedeError:  # refused exactly when not older, already recorded, or a already superseded by another
            assert not a < b or (a, b) in pairs or any(o == a for o, _n in pairs)
        if also_revoke:
            try:
                control.revoke(d, "s", a, ledger=led)
            except control.ControlError:
                pass
        cached = current(led, "s")
        fresh = derive(Ledger(d).events("s"))
        assert {(x.old_seq, x.new_seq) for x in cached.supersessions.links} == pairs == {(x.old_seq, x.new_seq) for x in fresh.supersessions.links}
        assert cached.supersessions.superseded == fresh.supersessions.superseded and cached.revoked == fresh.revoked


def test_another_process_derives_the_same_state_from_the_ledger(data: Path) -> None:
    supersede(data, "alice", 2, 0, decided_by="rule:same-attribute")
    correct(data, "alice", 1, "The dev server runs on 8080 now")
    here = {s: (x.new_seq, x.record_seq, x.decided_by) for s, x in current_supersessions(Ledger(data), "alice").superseded.items()}
    code = (
        "import json, sys; from storage.files.ledger.store import Ledger; from control.supersession import current_supersessions; "
        "s = current_supersessions(Ledger(sys.argv[1]), 'alice'); "
        "print(json.dumps({k: [x.new_seq, x.record_seq, x.decided_by] for k, x in s.superseded.items()}))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(data)], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert {int(k): tuple(v) for k, v in json.loads(out).items()} == here == {0: (2, 3, "rule:same-attribute"), 1: (4, 5, "visitor")}


def test_a_rebuilt_index_holds_no_record_and_the_state_is_unchanged(data: Path) -> None:
    supersede(data, "alice", 2, 0)
    correct(data, "alice", 1, "The dev server runs on 8080 now")
    before = superseded_seqs(data, "alice")
    led = Ledger(data)
    idx = Index(data, led)
    try:
        idx.rebuild()
        with idx.read() as conn:
            seqs = sorted(r[0] for r in conn.execute("SELECT seq FROM events WHERE session = 'alice'"))
    finally:
        idx.close()
    assert seqs == [0, 1, 2, 4] and superseded_seqs(data, "alice", ledger=Ledger(data)) == before == {0: 2, 1: 4}


# -- the CLI -----------------------------------------------------------------------------------------------
def test_the_cli_supersedes_and_prints_one_line(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert control_main(["supersede", str(data), "alice", "2", "0", "--reason", "moved away"]) == 0
    out = capsys.readouterr().out.strip()
    assert len(out.splitlines()) == 1 and out.startswith("session alice: seq 0 (evt_") and "superseded by seq 2" in out
    assert superseded_seqs(data, "alice") == {0: 2}
    assert current_supersessions(Ledger(data), "alice").superseded[0].reason == "moved away"


def test_the_cli_shows_a_history_as_text_and_as_json(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    supersede(data, "alice", 2, 0, decided_by="rule:same-attribute", reason="residence changed")
    assert control_main(["history", str(data), "alice", "2"]) == 0
    text = capsys.readouterr().out
    assert "seq 0" in text and "superseded by seq 2" in text and "I live in Leeds" in text and "live" in text
    assert control_main(["history", str(data), "alice", "0", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["seq"], r["state"], r["superseded_by"], r["decided_by"]) for r in rows] == [(0, "superseded", 2, "rule:same-attribute"), (2, "live", None, None)]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["supersede", "{d}", "alice", "0", "2"], "seq 2 is not older than seq 0"),
        (["supersede", "{d}", "alice", "2", "0", "--reason", "Leeds"], "repeats a word"),
        (["supersede", "{d}", "bob", "2", "0"], "no such session"),
        (["supersede", "{d}/nope", "alice", "2", "0"], "not a data directory"),
        (["history", "{d}", "alice", "99"], "no event at seq 99"),
        (["history", "{d}/nope", "alice", "0"], "not a data directory"),
    ],
)
def test_the_cli_refuses_in_one_line_with_exit_2_and_appends_nothing(data: Path, capsys: pytest.CaptureFixture[str], argv: list[str], words: str) -> None:
    before = _snapshot(data)
    assert control_main([a.replace("{d}", str(data)) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1 and "Error" not in err
    assert _snapshot(data) == before
