"""Ask me first (issue 11): propose → a person approves some memories → answer; docs/FORMAT.md §18.

The token is single-use, bound to the session and the exact proposal, and expires: every abuse is
refused with one line and nothing appended. The receipt records proposed / approved / withheld, the
prompt hash covers only the approved ones, and verification names the check a lie fails.
"""

from __future__ import annotations

import copy
import hashlib
import threading
from pathlib import Path
from typing import Any

import pytest

import control
from chat.consent import TOKEN_TTL, ConsentError, proposal_store
from chat.engine import Engine, TurnError
from cli.prog_chat import main as chat_main
from receipts import body as rbody
from receipts.body import MalformedReceipt, parse_receipt
from receipts.prompt import TEMPLATE_V1, build_messages, prompt_hash
from receipts.verify import FAIL, PASS
from storage.files.receipts.api import verify_bytes

from ..forget_support import engine

QUESTION = "Tell me about my cat Miso, Lisbon and my sister"
MEMORIES = [
    "I adopted a grey cat named Miso",
    "I moved to Lisbon in March",
    "My sister is called Ana",
    "Miso the cat sleeps all day in Lisbon",
]


@pytest.fixture
def eng(tmp_path: Path) -> Engine:
    e = engine(tmp_path / "d")
    for text in MEMORIES:
        e.remember("alice", text)
    e.remember("bob", "Bob keeps bees")
    return e


def _ledgers(e: Engine) -> dict[str, str]:
    """Every session's ledger and receipts, by hash: what 'nothing appended' compares."""
    root = e.data_dir / "sessions"
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file() and "lock" not in p.name}


def _verify(e: Engine, raw: bytes, data: bool = True) -> dict[str, Any]:
    report = verify_bytes(raw, trusted=[e.key.public_key], data_dir=e.data_dir if data else None)
    return {c.name: c for c in report.checks} | {"verdict": report.verdict}


def test_propose_returns_the_candidates_and_a_token_and_appends_nothing(eng: Engine) -> None:
    before = _ledgers(eng)
    p = eng.propose("alice", QUESTION, k=4)
    assert [c.rank for c in p.candidates] == [1, 2, 3, 4] and {c.seq for c in p.candidates} == {0, 1, 2, 3}
    assert all(c.text in MEMORIES for c in p.candidates) and p.token.startswith("ct1.")
    assert _ledgers(eng) == before


def test_an_answer_sends_only_the_approved_memories_and_the_receipt_lists_the_two_withheld(eng: Engine) -> None:
    p = eng.propose("alice", QUESTION, k=4)
    withheld = [p.candidates[1], p.candidates[3]]
    approved = [c for c in p.candidates if c not in withheld]
    turn = eng.answer(p.token, [c.event_id for c in approved], session="alice")
    assert [h.seq for h in turn.hits] == [c.seq for c in approved]
    raw = turn.receipt_path.read_bytes()
    body = parse_receipt(raw).signed_body
    consent = body["consent"]
    assert consent["decided_by"] == "person" and consent["v"] == 1
    assert [x["event"]["seq"] for x in consent["proposed"]] == [c.seq for c in p.candidates]
    assert consent["approved"] == [c.seq for c in approved] and consent["withheld"] == [c.seq for c in withheld]
    # the prompt hash is over the approved memories only
    events = eng.ledger.read_events("alice", [c.seq for c in approved])
    assert body["prompt"]["sha256"] == prompt_hash(build_messages(TEMPLATE_V1, QUESTION, [ev.to_dict() for ev in events]))
    # a withheld memory's words are nowhere in the receipt: only its hashed fields and commitment
    for c in withheld:
        assert c.text.encode() not in raw and c.text.encode() not in parse_receipt(raw).envelope.payload
    checks = _verify(eng, raw)
    assert checks["verdict"] == "verified"
    for name in ("consent.proposed", "consent.decision", "consent.prompt", "prompt.hash"):
        assert checks[name].status == PASS, checks[name].message
    assert _verify(eng, raw, data=False)["verdict"] == "verified"


def test_approving_none_sends_the_question_alone(eng: Engine) -> None:
    p = eng.propose("alice", QUESTION, k=3)
    turn = eng.answer(p.token, [], session="alice")
    assert turn.hits == [] and parse_receipt(turn.receipt_path.read_bytes()).signed_body["consent"]["approved"] == []
    assert _verify(eng, turn.receipt_path.read_bytes())["verdict"] == "verified"


def test_cancel_appends_no_event_and_writes_no_receipt_and_spends_the_token(eng: Engine) -> None:
    before = _ledgers(eng)
    p = eng.propose("alice", QUESTION)
    eng.cancel(p.token, session="alice")
    assert _ledgers(eng) == before
    assert not list((eng.data_dir / "sessions" / "alice").glob("receipts/*.json"))
    with pytest.raises(ConsentError, match="cancelled"):
        eng.answer(p.token, [], session="alice")
    # the question left the disk with the proposal
    assert not any(QUESTION.encode() in f.read_bytes() for f in (eng.data_dir / "proposals").iterdir() if f.is_file())


# -- token abuse: each refused, nothing appended ------------------------------------------------------------
def _abuse(eng: Engine, how: str) -> str:
    p = eng.propose("alice", QUESTION, k=3)
    first = p.candidates[0].event_id
    if how == "replay":
        eng.answer(p.token, [first], session="alice")
    before = _ledgers(eng)
    token, ids, session = p.token, [first], "alice"
    if how == "other session":
        session = "bob"
    elif how == "expired":
        eng.clock = lambda: __import__("time").time() + TOKEN_TTL + 1
    elif how == "forged id":
        ids = [first, eng.ledger.read_events("bob", [0])[0].id]  # an event of another session: never proposed
    elif how == "seq not proposed":
        ids = [first, 99]
    elif how == "altered mac":
        token = token[:-1] + ("0" if token[-1] != "0" else "1")
    elif how == "altered expiry":
        parts = token.split(".")
        token = ".".join([parts[0], parts[1], str(int(parts[2]) + 3600), parts[3]])
    elif how == "unknown nonce":
        parts = token.split(".")
        token = ".".join([parts[0], "f" * 32, parts[2], parts[3]])
    elif how == "not a token":
        token = "hello"
    with pytest.raises(ConsentError) as err:
        eng.answer(token, ids, session=session)
    assert "\n" not in str(err.value) and "Error" not in str(err.value)
    assert _ledgers(eng) == before, f"{how}: something was appended"
    return str(err.value)


@pytest.mark.parametrize(
    ("how", "words"),
    [
        ("replay", "already used"),
        ("other session", "another session"),
        ("expired", "expired at"),
        ("forged id", "was not proposed with this token"),
        ("seq not proposed", "99' was not proposed"),
        ("altered mac", "does not match its proposal"),
        ("altered expiry", "does not match its proposal"),
        ("unknown nonce", "unknown"),
        ("not a token", "not a turn token"),
    ],
)
def test_token_abuse_is_refused_in_one_line_and_nothing_is_appended(eng: Engine, how: str, words: str) -> None:
    assert words in _abuse(eng, how)


def test_a_token_from_another_data_directory_is_unknown_here(eng: Engine, tmp_path: Path) -> None:
    other = engine(tmp_path / "other")
    other.remember("alice", "I adopted a grey cat named Miso")
    p = other.propose("alice", "my cat?")
    before = _ledgers(eng)
    with pytest.raises(ConsentError, match="unknown"):
        eng.answer(p.token, [p.candidates[0].event_id], session="alice")
    assert _ledgers(eng) == before


def test_an_expired_token_stays_refused_and_its_question_is_removed(eng: Engine) -> None:
    p = eng.propose("alice", QUESTION)
    eng.clock = lambda: __import__("time").time() + TOKEN_TTL + 1
    for _ in range(2):
        with pytest.raises(ConsentError, match="expired"):
            eng.answer(p.token, [], session="alice")
    assert not any(QUESTION.encode() in f.read_bytes() for f in (eng.data_dir / "proposals").iterdir() if f.is_file())


def test_an_answer_that_opened_the_proposal_before_another_spent_it_still_reads_it_whole(eng: Engine) -> None:
    """The race behind 'its proposal cannot be read': spending must not empty the inode a reader already opened."""
    from storage.files.receipts.file_backend import FileProposals

    p = eng.propose("alice", QUESTION, k=2)
    nonce = p.token.split(".")[1]
    store = proposal_store(eng.stores)
    assert isinstance(store, FileProposals)
    (path,) = store.folder.glob(f"*.{nonce}.json")
    whole = path.read_bytes()
    with path.open("rb") as reader:  # opened before the spend, read after it
        assert store.spend(nonce, "used")
        assert reader.read() == whole
    assert store.load(nonce) is None and store.spent(nonce) == "used"
    (tomb,) = store.folder.glob(f"*.{nonce}.used")
    assert tomb.read_bytes() == b""  # the question left the disk with the proposal
    with pytest.raises(ConsentError, match="already used"):
        eng.answer(p.token, [p.candidates[0].event_id], session="alice")


def test_two_answers_racing_for_one_token_make_exactly_one_turn(eng: Engine) -> None:
    p = eng.propose("alice", QUESTION, k=2)
    outcomes: list[str] = []

    def go() -> None:
        try:
            eng.answer(p.token, [p.candidates[0].event_id], session="alice")
            outcomes.append("answered")
        except ConsentError as exc:
            outcomes.append(str(exc))

    threads = [threading.Thread(target=go) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("answered") == 1 and all("already used" in o for o in outcomes if o != "answered")
    assert len(list((eng.data_dir / "sessions" / "alice" / "receipts").glob("*.json"))) == 1


def test_a_memory_revoked_after_the_proposal_cannot_be_approved(eng: Engine) -> None:
    p = eng.propose("alice", QUESTION, k=3)
    target = p.candidates[0]
    control.revoke(eng.data_dir, "alice", target.seq, ledger=eng.ledger, key=eng.key)
    before = _ledgers(eng)
    with pytest.raises(ConsentError, match=f"memory seq {target.seq} was revoked since it was proposed"):
        eng.answer(p.token, [target.event_id], session="alice")
    assert _ledgers(eng) == before
    # withholding it is fine, and the token was not spent by the refusal
    turn = eng.answer(p.token, [p.candidates[1].event_id], session="alice")
    assert _verify(eng, turn.receipt_path.read_bytes())["verdict"] == "verified"


def test_a_proposal_leaves_revoked_memories_out_and_the_receipt_names_the_revocation(eng: Engine) -> None:
    rev = control.revoke(eng.data_dir, "alice", 1, ledger=eng.ledger, key=eng.key)
    p = eng.propose("alice", QUESTION, k=4)
    assert 1 not in {c.seq for c in p.candidates} and p.excluded == (1,)
    turn = eng.answer(p.token, [c.event_id for c in p.candidates], session="alice")
    body = parse_receipt(turn.receipt_path.read_bytes()).signed_body
    assert [(e["seq"], e["control"]["event"]["seq"]) for e in body["exclusions"]["revoked"]] == [(1, rev.control_seq)]
    checks = _verify(eng, turn.receipt_path.read_bytes())
    assert checks["verdict"] == "verified" and checks["ledger.exclusions"].status == PASS


# -- verification names the lie ---------------------------------------------------------------------------------
def _resign(e: Engine, raw: bytes, change: Any) -> bytes:
    receipt = parse_receipt(raw)
    body = copy.deepcopy(receipt.signed_body)
    change(body)
    return rbody.dump_file(rbody.sign_receipt(body, e.key, list(receipt.disclosures.values())))


@pytest.fixture
def consent_receipt(eng: Engine) -> bytes:
    p = eng.propose("alice", QUESTION, k=4)
    return eng.answer(p.token, [p.candidates[0].event_id, p.candidates[2].event_id], session="alice").receipt_path.read_bytes()


def test_an_approved_memory_missing_from_the_prompt_fails_consent_prompt(eng: Engine, consent_receipt: bytes) -> None:
    def claim_more(b: dict[str, Any]) -> None:
        moved = b["consent"]["withheld"].pop(0)
        b["consent"]["approved"].append(moved)

    checks = _verify(eng, _resign(eng, consent_receipt, claim_more), data=False)
    assert checks["consent.prompt"].status == FAIL and "is missing from the prompt" in checks["consent.prompt"].message
    assert checks["verdict"] == "failed"


def test_a_withheld_memory_inside_the_prompt_fails_consent_prompt(eng: Engine, consent_receipt: bytes) -> None:
    def hide_one(b: dict[str, Any]) -> None:
        moved = b["consent"]["approved"].pop(0)
        b["consent"]["withheld"].insert(0, moved)

    checks = _verify(eng, _resign(eng, consent_receipt, hide_one), data=False)
    assert checks["consent.prompt"].status == FAIL and "is in the prompt" in checks["consent.prompt"].message


def test_a_decision_not_made_by_a_person_or_not_splitting_the_proposal_fails_consent_decision(eng: Engine, consent_receipt: bytes) -> None:
    checks = _verify(eng, _resign(eng, consent_receipt, lambda b: b["consent"].update(decided_by="retrieval")), data=False)
    assert checks["consent.decision"].status == FAIL
    checks = _verify(eng, _resign(eng, consent_receipt, lambda b: b["consent"]["withheld"].pop()), data=False)
    assert checks["consent.decision"].status == FAIL and "not exactly the proposed seqs" in checks["consent.decision"].message


def test_a_proposed_record_that_is_not_in_the_signed_tree_fails_consent_proposed(eng: Engine, consent_receipt: bytes) -> None:
    def bend(b: dict[str, Any]) -> None:
        b["consent"]["proposed"][1]["event"]["commit"] = "0" * 64

    checks = _verify(eng, _resign(eng, consent_receipt, bend), data=False)
    assert checks["consent.proposed"].status == FAIL


def test_a_disclosure_for_a_withheld_memory_is_malformed(eng: Engine, consent_receipt: bytes) -> None:
    import json

    obj = json.loads(consent_receipt)
    withheld = parse_receipt(consent_receipt).signed_body["consent"]["withheld"][0]
    ev = eng.ledger.read_events("alice", [withheld])[0]
    obj["disclosures"] = sorted([*obj["disclosures"], {"seq": ev.seq, "salt": ev.salt, "text": ev.text, "meta": ev.meta}], key=lambda d: d["seq"])
    with pytest.raises(MalformedReceipt, match="not an event this receipt cites"):
        parse_receipt(rbody.dump_file(obj))


# -- the CLI ------------------------------------------------------------------------------------------------------
def test_the_cli_proposes_then_answers_with_the_ids_given(eng: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    data = str(eng.data_dir)
    assert chat_main(["propose", data, "alice", QUESTION, "-k", "3"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith("token: ct1.") and out[0].startswith("#1  seq ")
    # rank, seq, id, role, when, score (a share of the best candidate's, as the app shows it), text
    assert [line.split()[6] for line in out[:3]] == ["score"] * 3 and out[0].split()[7] == "1.00"
    assert all(0 <= float(line.split()[7]) <= 1 for line in out[:3]) and "'" in out[0]
    token = out[-1].removeprefix("token: ")
    first_id = out[0].split()[3]
    assert chat_main(["answer", data, token, first_id, "--session", "alice"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].startswith("receipt: ") and lines[-2] == "memories: 1 of k=3"
    assert chat_main(["answer", data, token, first_id]) == 2
    assert "already used" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("how", "words"),
    [
        ("wrong --session", "another session"),
        ("forged id", "was not proposed with this token"),
        ("expired", "expired at"),
        ("replay", "already used"),
    ],
)
def test_the_cli_refuses_token_abuse_with_exit_2_in_one_line_and_appends_nothing(
    eng: Engine, how: str, words: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import cli.prog_chat as chat_cli

    data = str(eng.data_dir)
    assert chat_main(["propose", data, "alice", QUESTION, "-k", "3"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    token, first_id = out[-1].removeprefix("token: "), out[0].split()[3]
    args = ["answer", data, token, first_id, "--session", "alice"]
    if how == "replay":
        assert chat_main(args) == 0
        capsys.readouterr()
    elif how == "wrong --session":
        args[-1] = "bob"
    elif how == "forged id":
        args[3] = "evt_" + "0" * 32
    elif how == "expired":  # the answer runs in a later process: its clock is past the token's expiry
        real = chat_cli._engine

        def later(*a: Any, **kw: Any) -> Engine:
            e: Engine = real(*a, **kw)
            e.clock = lambda: __import__("time").time() + TOKEN_TTL + 1
            return e

        monkeypatch.setattr(chat_cli, "_engine", later)
    before = _ledgers(eng)
    assert chat_main(args) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1 and words in captured.err
    assert "Traceback" not in captured.err and "Error" not in captured.err
    assert _ledgers(eng) == before, f"{how}: something was appended"


def test_the_cli_cancel_sends_nothing(eng: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    data = str(eng.data_dir)
    chat_main(["propose", data, "alice", QUESTION])
    token = capsys.readouterr().out.strip().splitlines()[-1].removeprefix("token: ")
    before = _ledgers(eng)
    assert chat_main(["answer", data, token, "--cancel"]) == 0
    assert "nothing was sent" in capsys.readouterr().out
    assert _ledgers(eng) == before


def test_a_turn_that_fails_after_the_token_was_spent_is_a_turn_error_not_an_answer(eng: Engine) -> None:
    p = eng.propose("alice", QUESTION, k=2)

    def broken(*_a: Any, **_k: Any) -> Any:
        raise OSError("disk full")

    eng.write_receipt = broken
    with pytest.raises(TurnError, match="receipt could not be written"):
        eng.answer(p.token, [p.candidates[0].event_id], session="alice")
    with pytest.raises(ConsentError, match="already used"):
        eng.answer(p.token, [], session="alice")


def test_deleting_a_session_removes_its_waiting_proposals_and_their_questions(eng: Engine) -> None:
    from control.forget import forget_session

    eng.propose("alice", "a question about Miso waiting for consent")
    p_bob = eng.propose("bob", "bees?")
    forget_session(eng.data_dir, "alice", ledger=eng.ledger, index=eng.index, key=eng.key)
    left = [f.name for f in (eng.data_dir / "proposals").iterdir()]
    assert not any(n.startswith("alice.") for n in left) and any(n.startswith("bob.") for n in left)
    assert eng.forget("bob")
    assert [f.name for f in (eng.data_dir / "proposals").iterdir()] == ["secret"]
    with pytest.raises(ConsentError, match="unknown"):
        eng.answer(p_bob.token, [])


def test_a_new_sessions_first_question_is_proposed_with_no_candidates_and_answered(eng: Engine) -> None:
    p = eng.propose("newcomer", "hello, who are you?")
    assert p.candidates == () and not (eng.data_dir / "sessions" / "newcomer").exists()
    turn = eng.answer(p.token, [], session="newcomer")
    assert _verify(eng, turn.receipt_path.read_bytes())["verdict"] == "verified"


def test_waiting_proposals_and_the_secret_are_private_files(eng: Engine) -> None:
    eng.propose("alice", QUESTION)
    folder = eng.data_dir / "proposals"
    assert folder.stat().st_mode & 0o777 == 0o700
    assert {f.stat().st_mode & 0o777 for f in folder.iterdir()} == {0o600}
