"""Revoke and restore (issue 11): control events in the ledger, the state derived from them, the CLI.

docs/FORMAT.md §17. A revocation never touches the event; the revoked set is a pure function of the
ledger (a property test replays random revoke/restore sequences naively and compares).
"""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import control
from cli.prog_control import main as control_main
from control.forget import forget
from control.plan import PlanError
from control.revocation import ControlError, current, revoked_seqs
from control.state import derive
from ledger.controls import CONTROL_TEXTS, control_meta, control_of
from ledger.event import GENESIS, Event, make_event
from storage.files.ledger.store import Ledger

from ..forget_support import engine


def _snapshot(data: Path) -> dict[str, str]:
    return {str(p.relative_to(data)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(data.rglob("*")) if p.is_file()}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    eng = engine(d)
    eng.remember("alice", "I adopted a grey cat named Miso")  # 0
    eng.remember("alice", "I moved to Lisbon in March")  # 1
    eng.remember("alice", "My sister is called Ana")  # 2
    eng.index.close()
    eng.ledger.close()
    return d


def test_revoke_appends_a_control_event_and_leaves_the_event_untouched(data: Path) -> None:
    led = Ledger(data)
    before = led.read_events("alice", [1])[0]
    result = control.revoke(data, "alice", 1, reason="not relevant any more")
    ev = led.read_events("alice", [result.control_seq])[0]
    assert (ev.role, ev.text) == ("system", CONTROL_TEXTS["revoke"])
    assert ev.meta == {"control": {"v": 1, "action": "revoke", "seq": 1, "id": before.id, "reason": "not relevant any more"}}
    assert led.read_events("alice", [1])[0] == before
    assert "Lisbon" not in ev.text and "Lisbon" not in str(ev.meta)
    assert led.verify("alice").ok
    assert revoked_seqs(data, "alice") == {1: result.control_seq}


def test_restore_appends_another_control_event_and_the_event_is_no_longer_revoked(data: Path) -> None:
    r1 = control.revoke(data, "alice", 1)
    r2 = control.restore(data, "alice", 1)
    assert r2.control_seq == r1.control_seq + 1 and r2.action == "restore"
    assert revoked_seqs(data, "alice") == {}
    ev = Ledger(data).read_events("alice", [r2.control_seq])[0]
    assert ev.text == CONTROL_TEXTS["restore"] and ev.meta["control"]["action"] == "restore"


def test_revoke_accepts_an_event_id_as_well_as_a_seq(data: Path) -> None:
    eid = Ledger(data).read_events("alice", [2])[0].id
    assert control.revoke(data, "alice", eid).seq == 2
    assert control.restore(data, "alice", "2").seq == 2


@pytest.mark.parametrize(
    ("action", "seq", "setup", "words"),
    [
        ("revoke", 99, None, "no event at seq 99"),
        ("revoke", -1, None, "not a non-negative integer"),
        ("revoke", "x", None, "not a non-negative integer"),
        ("revoke", "evt_" + "0" * 32, None, "no event with id"),
        ("revoke", 1, "revoke", "already revoked (by the control event at seq 3)"),
        ("restore", 1, None, "is not revoked"),
        ("revoke", 3, "revoke", "is a control record"),
        ("revoke", 0, "forget", "is erased (forgotten)"),
        ("revoke", 3, "forget", "is an erasure record"),
    ],
)
def test_a_refused_revoke_or_restore_is_one_line_and_appends_nothing(data: Path, action: str, seq: object, setup: str | None, words: str) -> None:
    if setup == "revoke":
        control.revoke(data, "alice", 1)
    elif setup == "forget":
        forget(data, "alice", [0])  # the record lands at seq 3, with the erasure's checkpoint
    before = _snapshot(data)
    with pytest.raises(ControlError) as err:
        (control.revoke if action == "revoke" else control.restore)(data, "alice", seq)
    assert words in str(err.value) and "\n" not in str(err.value)
    assert _snapshot(data) == before


def test_an_unknown_session_and_a_reason_quoting_the_memory_are_refused(data: Path) -> None:
    with pytest.raises(ControlError, match="no such session"):
        control.revoke(data, "bob", 0)
    with pytest.raises(ControlError, match="invalid|must"):
        control.revoke(data, "../x", 0)
    with pytest.raises(ControlError, match="repeats a word of the event at seq 1"):
        control.revoke(data, "alice", 1, reason="Lisbon is private")
    with pytest.raises(ControlError, match="at most 1000"):
        control.revoke(data, "alice", 1, reason="x" * 1001)
    assert revoked_seqs(data, "alice") == {}


def test_a_control_record_cannot_be_forgotten(data: Path) -> None:
    r = control.revoke(data, "alice", 1)
    with pytest.raises(PlanError, match="control record"):
        forget(data, "alice", [r.control_seq])


def test_the_state_is_the_same_from_a_fresh_process_view_of_the_ledger(data: Path) -> None:
    control.revoke(data, "alice", 0)
    control.revoke(data, "alice", 2)
    control.restore(data, "alice", 0)
    led = Ledger(data)
    fresh = derive(led.events("alice"))
    cached = current(led, "alice")
    assert set(fresh.revoked) == set(cached.revoked) == {2}
    assert fresh.controls == cached.controls == [3, 4, 5]


# -- the CLI -----------------------------------------------------------------------------------------------
def test_the_cli_revokes_and_restores_and_prints_one_line(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert control_main(["revoke", str(data), "alice", "1", "--reason", "outdated"]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("session alice: seq 1 (evt_") and "revoked" in out and "control event at seq 3" in out
    assert control_main(["restore", str(data), "alice", "1"]) == 0
    assert "restored" in capsys.readouterr().out
    assert revoked_seqs(data, "alice") == {}


def test_the_cli_refuses_in_one_line_with_exit_2_and_appends_nothing(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _snapshot(data)
    assert control_main(["restore", str(data), "alice", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "is not revoked" in err and len(err.splitlines()) == 1 and "Error" not in err
    assert control_main(["revoke", str(data / "nope"), "alice", "1"]) == 2
    assert "not a data directory" in capsys.readouterr().err
    assert _snapshot(data) == before


# -- the property: the derived state equals a naive replay ----------------------------------------------
def _ev(seq: int, prev: str, role: str, text: str, meta: dict[str, object]) -> Event:
    return make_event(
        session="prop", seq=seq, prev=bytes.fromhex(prev), role=role, text=text, meta=meta, ts="2026-01-01T00:00:00.000000Z",
        event_id="evt_" + hashlib.sha256(b"%d" % seq).hexdigest()[:32], salt=hashlib.sha256(b"s%d" % seq).digest(),
    )


ops = st.lists(st.tuples(st.sampled_from(["revoke", "restore", "turn", "junk"]), st.integers(0, 5)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_derived_state_equals_a_naive_replay_of_the_control_events(seq_ops: list[tuple[str, int]]) -> None:
    events: list[Event] = []
    prev = GENESIS.hex()
    for i in range(6):  # six memories first
        ev = _ev(i, prev, "user", f"memory {i}", {})
        events.append(ev)
        prev = ev.chain
    naive: set[int] = set()
    for action, target in seq_ops:
        seq = len(events)
        if action in ("revoke", "restore"):
            ev = _ev(seq, prev, "system", CONTROL_TEXTS[action], control_meta(action, target, events[target].id, None))
            (naive.add if action == "revoke" else naive.discard)(target)
        elif action == "turn":
            ev = _ev(seq, prev, "user", f"question {seq}", {"kind": "chat"})
        else:  # looks like a control event but is not one: a user's, or the wrong text
            ev = _ev(seq, prev, "user" if target % 2 else "system", "[control record: revoke]" if target % 2 else "revoke", control_meta("revoke", target, events[target].id, None))
        events.append(ev)
        prev = ev.chain
        state = derive(events)
        assert set(state.revoked) == naive
        assert state.controls == [e.seq for e in events if control_of(e.role, e.text, e.meta, e.seq)]
    for s, rev in derive(events).revoked.items():
        last = max(e.seq for e in events if control_of(e.role, e.text, e.meta, e.seq) and e.meta["control"]["seq"] == s)
        assert events[last].meta["control"]["action"] == "revoke" and rev.control_seq <= last


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 2)), min_size=1, max_size=12))
def test_the_cached_state_follows_appends_and_equals_a_fresh_derivation(tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[bool, int]]) -> None:
    d = tmp_path_factory.mktemp("prop")
    led = Ledger(d)
    for text in ("one cat", "two dogs", "three birds"):
        led.append("s", "user", text, {})
    naive: set[int] = set()
    for do_revoke, target in steps:
        try:
            (control.revoke if do_revoke else control.restore)(d, "s", target, ledger=led)
            (naive.add if do_revoke else naive.discard)(target)
        except ControlError:
            assert (target in naive) == do_revoke  # refused exactly when already in that state
        assert set(current(led, "s").revoked) == naive == set(derive(Ledger(d).events("s")).revoked)


# -- retrieval honours it, and the receipt says so (FORMAT.md §17) --------------------------------------
from receipts import body as rbody  # noqa: E402
from receipts.body import parse_receipt  # noqa: E402
from receipts.verify import FAIL, PASS  # noqa: E402
from storage.files.receipts.api import verify_bytes  # noqa: E402

QUESTION = "Where did I move, and what is my cat called?"


def _turn_engine(tmp_path: Path):  # type: ignore[no-untyped-def]
    eng = engine(tmp_path / "d")
    eng.remember("alice", "I adopted a grey cat named Miso")  # 0
    eng.remember("alice", "I moved to Lisbon in March")  # 1
    eng.remember("alice", "My sister is called Ana")  # 2
    return eng


def _statuses(raw: bytes, eng, data: bool = True) -> dict[str, str]:  # type: ignore[no-untyped-def]
    report = verify_bytes(raw, trusted=[eng.key.public_key], data_dir=eng.data_dir if data else None)
    return {c.name: c.status for c in report.checks} | {"verdict": report.verdict}


def test_after_a_revoke_the_same_question_retrieves_without_it_and_the_receipt_names_the_revocation(tmp_path: Path) -> None:
    eng = _turn_engine(tmp_path)
    before = eng.turn("alice", QUESTION)
    assert 1 in [h.seq for h in before.hits] and "exclusions" not in before.body
    rev = control.revoke(eng.data_dir, "alice", 1, ledger=eng.ledger, key=eng.key)
    after = eng.turn("alice", QUESTION)
    assert 1 not in [h.seq for h in after.hits] and {h.seq for h in after.hits} != {h.seq for h in before.hits}
    ex = parse_receipt(after.receipt_path.read_bytes()).signed_body["exclusions"]
    assert ex["v"] == 1 and [(e["seq"], e["control"]["event"]["seq"]) for e in ex["revoked"]] == [(1, rev.control_seq)]
    assert ex["revoked"][0]["id"] == rev.event_id and ex["revoked"][0]["control"]["event"]["meta"]["control"]["action"] == "revoke"
    raw = after.receipt_path.read_bytes()
    offline = _statuses(raw, eng, data=False)
    assert offline["verdict"] == "verified" and offline["exclusions.records"] == PASS
    full = _statuses(raw, eng)
    assert full["verdict"] == "verified" and full["ledger.exclusions"] == PASS
    # a control event is never a memory
    assert not any(h.role == "system" for h in after.hits)


def test_after_a_restore_the_memory_comes_back_and_no_exclusion_is_recorded(tmp_path: Path) -> None:
    eng = _turn_engine(tmp_path)
    first = {h.seq for h in eng.turn("alice", QUESTION).hits}
    control.revoke(eng.data_dir, "alice", 1, ledger=eng.ledger, key=eng.key)
    assert 1 not in {h.seq for h in eng.turn("alice", QUESTION).hits}
    control.restore(eng.data_dir, "alice", 1, ledger=eng.ledger, key=eng.key)
    back = eng.turn("alice", QUESTION)
    assert 1 in {h.seq for h in back.hits} and {0, 1} <= first
    assert "exclusions" not in parse_receipt(back.receipt_path.read_bytes()).signed_body
    assert _statuses(back.receipt_path.read_bytes(), eng)["verdict"] == "verified"


def test_rebuilding_the_index_from_the_ledger_gives_the_same_memories_and_exclusions(tmp_path: Path) -> None:
    eng = _turn_engine(tmp_path)
    control.revoke(eng.data_dir, "alice", 1, ledger=eng.ledger, key=eng.key)
    eng.turn("alice", QUESTION)
    hits, excluded = eng._retrieve("alice", QUESTION, 8, [])
    eng.index.rebuild()
    hits2, excluded2 = eng._retrieve("alice", QUESTION, 8, [])
    assert [(h.seq, h.digest) for h in hits] == [(h.seq, h.digest) for h in hits2] and excluded == excluded2
    assert [r.seq for r in excluded2] == [1]
    assert set(derive(Ledger(eng.data_dir).events("alice")).revoked) == {1}
    after = eng.turn("alice", QUESTION)
    assert [e["seq"] for e in parse_receipt(after.receipt_path.read_bytes()).signed_body["exclusions"]["revoked"]] == [1]


def _resign(eng, raw: bytes, change) -> bytes:  # type: ignore[no-untyped-def]
    """The receipt with its signed body changed by `change`, re-signed by the operator's own key (a lying operator)."""
    receipt = parse_receipt(raw)
    body = copy.deepcopy(receipt.signed_body)
    change(body)
    return rbody.dump_file(rbody.sign_receipt(body, eng.key, list(receipt.disclosures.values())))


def test_a_receipt_claiming_an_exclusion_the_ledger_does_not_hold_fails_ledger_exclusions(tmp_path: Path) -> None:
    eng = _turn_engine(tmp_path)
    rev = control.revoke(eng.data_dir, "alice", 1, ledger=eng.ledger, key=eng.key)
    revoked_turn = eng.turn("alice", QUESTION)
    control.restore(eng.data_dir, "alice", 1, ledger=eng.ledger, key=eng.key)
    eng.remember("alice", "I work as a nurse")  # 3 turn events + restore came before this
    later = eng.turn("alice", "What is my sister called?", k=1)
    assert [h.seq for h in later.hits] == [2]  # the restored memory is not among this turn's memories
    entry = parse_receipt(revoked_turn.receipt_path.read_bytes()).signed_body["exclusions"]["revoked"][0]
    assert entry["control"]["event"]["seq"] == rev.control_seq
    body = parse_receipt(later.receipt_path.read_bytes()).signed_body
    tree = body["checkpoint"]["body"]["tree_size"]
    # a revocation that is in the signed tree but was restored before the question: only the ledger can tell
    store = __import__("storage.files.receipts.files", fromlist=["synced_tree"]).synced_tree(eng.data_dir, eng.ledger, "alice")
    proof = [h.hex() for h in store.inclusion_proof(rev.control_seq, tree)]
    store.close()

    def claim_restored(b: dict) -> None:  # type: ignore[type-arg]
        b["exclusions"] = {"v": 1, "revoked": [{**entry, "control": {"event": entry["control"]["event"], "proof": proof}}]}

    lied = _resign(eng, later.receipt_path.read_bytes(), claim_restored)
    offline = _statuses(lied, eng, data=False)
    assert offline["exclusions.records"] == PASS  # well-formed and in the signed tree
    full = _statuses(lied, eng)
    assert full["ledger.exclusions"] == FAIL and full["verdict"] == "failed"
    report = verify_bytes(lied, trusted=[eng.key.public_key], data_dir=eng.data_dir)
    row = next(c for c in report.checks if c.name == "ledger.exclusions")
    assert f"restored at seq {rev.control_seq + 3}" in row.message

    # a revocation the ledger never held: a made-up control event
    def claim_invented(b: dict) -> None:  # type: ignore[type-arg]
        fake = dict(entry["control"]["event"], id="evt_" + "ab" * 16)
        b["exclusions"] = {"v": 1, "revoked": [{**entry, "control": {"event": fake, "proof": proof}}]}

    invented = _statuses(_resign(eng, later.receipt_path.read_bytes(), claim_invented), eng)
    assert invented["ledger.exclusions"] == FAIL and invented["exclusions.records"] == FAIL


def test_a_receipt_without_the_additions_verifies_exactly_as_before(tmp_path: Path) -> None:
    eng = _turn_engine(tmp_path)
    t = eng.turn("alice", QUESTION)
    names = set(_statuses(t.receipt_path.read_bytes(), eng))
    assert not {n for n in names if n.startswith(("exclusions", "consent")) or n == "ledger.exclusions"}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["revoke", "restore", "turn"]), st.integers(0, 3)), min_size=1, max_size=8))
def test_random_revoke_restore_turn_sequences_keep_revoked_memories_out_and_receipts_honest(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, int]]
) -> None:
    eng = engine(tmp_path_factory.mktemp("seq") / "d")
    for text in ("grey cat Miso", "Lisbon in March", "sister Ana", "cat food brand"):
        eng.remember("p", text)
    naive: set[int] = set()
    for action, target in steps:
        if action == "turn":
            t = eng.turn("p", "cat Miso Lisbon sister food", k=4)
            assert not naive & {h.seq for h in t.hits}
            body = parse_receipt(t.receipt_path.read_bytes()).signed_body
            named = {e["seq"] for e in body.get("exclusions", {}).get("revoked", [])}
            assert named <= naive and not named & {h.seq for h in t.hits}
            assert verify_bytes(t.receipt_path.read_bytes(), trusted=[eng.key.public_key], data_dir=eng.data_dir).verdict == "verified"
        else:
            try:
                (control.revoke if action == "revoke" else control.restore)(eng.data_dir, "p", target, ledger=eng.ledger, key=eng.key)
                (naive.add if action == "revoke" else naive.discard)(target)
            except ControlError:
                assert (target in naive) == (action == "revoke")
        assert set(current(eng.ledger, "p").revoked) == naive == set(derive(Ledger(eng.data_dir).events("p")).revoked)
