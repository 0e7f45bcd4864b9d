"""`python -m receipts replay` and `python -m retrieval search --as-of` (issue 34): each exit status with its one line,
and bad input answered with one line and exit 2, never a traceback."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest

from chat.engine import Engine
from chat.llm import LLM
from cli import prog_receipts as receipts_cli
from cli import prog_retrieval as retrieval_cli
from control.forget import forget
from receipts import body as rbody
from receipts.body import parse_receipt
from receipts.keys import format_public_key

VECTORS = Path(__file__).resolve().parents[1] / "vectors"


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("replay-cli")
    data = root / "data"
    e = Engine(data, llm=LLM(api_key=""))
    for text in ["My sister Ana lives in Lisbon", "The tax form is due on Friday", "I booked a train to see my sister in May"]:
        e.remember("alice", text)
    turn = e.turn("alice", "Where does my sister live?", k=3)
    e.remember("bob", "I like kayaks")
    (root / "pub.json").write_text(format_public_key(e.key.public_key))
    receipt = parse_receipt(turn.receipt_path.read_bytes())
    body = copy.deepcopy(receipt.signed_body)
    body["ranking"]["ranked"][1]["score"] = repr(float(body["ranking"]["ranked"][1]["score"]) * 2)
    (root / "edited.json").write_bytes(rbody.dump_file(rbody.sign_receipt(body, e.key, list(receipt.disclosures.values()))))
    shutil.copy(turn.receipt_path, root / "turn.json")
    e.close()
    return {"root": root, "data": data, "receipt": root / "turn.json", "pub": root / "pub.json", "edited": root / "edited.json"}


def run(capsys: pytest.CaptureFixture[str], main: Any, *argv: object) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_a_fresh_receipt_replays_exit_0(made: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, receipts_cli.main, "replay", made["receipt"], "--data", made["data"], "--trust", made["pub"])
    assert code == 0 and out.startswith("REPLAYED"), out


def test_a_resigned_receipt_with_an_edited_score_differs_exit_1_naming_the_rank(made: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, receipts_cli.main, "replay", made["edited"], "--data", made["data"], "--trust", made["pub"])
    assert code == 1 and out.startswith("DIFFERS") and "rank 2: another score" in out, out


def test_a_receipt_that_does_not_verify_under_the_trusted_key_is_not_replayed_exit_1(made: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, receipts_cli.main, "replay", made["receipt"], "--data", made["data"], "--trust", VECTORS / "receipt_v1_pubkey.json")
    assert code == 1 and out.startswith("NOT REPLAYED: the receipt does not verify"), out


def test_an_old_receipt_is_not_replayable_exit_3_and_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "sessions" / "vector-receipts"
    folder.mkdir(parents=True)
    shutil.copy(VECTORS / "receipt_v1_ledger.jsonl", folder / "events.jsonl")
    code, out, _ = run(capsys, receipts_cli.main, "replay", VECTORS / "receipt_v2.json", "--data", tmp_path, "--trust", VECTORS / "receipt_v1_pubkey.json")
    assert code == 3 and "format 2 without a ranking commitment" in out, out


def test_a_receipt_whose_search_saw_an_event_erased_since_is_not_replayable_exit_3(made: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    shutil.copytree(made["data"], data)
    shutil.copytree(made["root"] / "data.keys", tmp_path / "data.keys")
    forget(data, "alice", [1], cascade=False)  # the tax form: the turn's search saw it
    code, out, _ = run(capsys, receipts_cli.main, "replay", made["receipt"], "--data", data, "--trust", made["pub"])
    assert code == 3 and "seq 1 was erased" in out, out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["replay", "{receipt}", "--data", "{data}"], "--trust PUBKEY"),
        (["replay", "{root}", "--data", "{data}", "--trust", "{pub}"], "is a directory"),
        (["replay", "{pub}", "--data", "{data}", "--trust", "{pub}"], "malformed receipt"),
        (["replay", "{root}/missing.json", "--data", "{data}", "--trust", "{pub}"], "missing.json"),
        (["replay", "{receipt}", "--data", "{root}/nowhere", "--trust", "{pub}"], "nowhere"),
        (["replay", "{receipt}", "--data", "{data}", "--trust", "{receipt}"], "expected only the fields"),  # a receipt given as a key
        (["replay", "/dev/zero", "--data", "{data}", "--trust", "{pub}"], "not a regular file"),  # its size says 0: never read whole
        (["replay", "{receipt}", "--data", "{data}", "--trust", "/dev/zero"], "not a regular file"),
        (["replay", "{root}/huge.json", "--data", "{data}", "--trust", "{pub}"], "receipt limit"),
    ],
)
def test_bad_replay_input_is_one_line_exit_2(made: dict[str, Any], capsys: pytest.CaptureFixture[str], argv: list[str], says: str) -> None:
    from receipts.body import MAX_RECEIPT_BYTES

    huge = made["root"] / "huge.json"
    if not huge.exists():
        huge.write_bytes(b" " * (MAX_RECEIPT_BYTES + 1))
    code, out, err = run(capsys, receipts_cli.main, *(a.format(**{k: str(v) for k, v in made.items()}) for a in argv))
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, (out, err)


def test_as_of_the_questions_seq_gives_the_receipts_memories(made: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    import json

    body = parse_receipt(made["receipt"].read_bytes()).signed_body
    q = body["query"]["event"]["seq"]
    code, out, _ = run(capsys, retrieval_cli.main, "search", made["data"], "alice", "Where does my sister live?", "-k", "3", "--as-of", q, "--json")
    assert code == 0
    assert [r["seq"] for r in json.loads(out)["results"]] == [m["event"]["seq"] for m in body["memories"]]


@pytest.mark.parametrize(
    ("as_of", "says"),
    [
        ("99", "the session holds"),
        ("abc", "abc"),
        ("{pub}", "neither a ledger size nor a checkpoint"),
        ("{root}/bob.json", "a checkpoint of session 'bob', not alice"),
        ("/dev/zero", "not a regular file"),
        ("{root}", "not a regular file"),
        ("{root}/big.json", "over 1,048,576 bytes"),
    ],
)
def test_bad_as_of_is_one_line_exit_2(made: dict[str, Any], capsys: pytest.CaptureFixture[str], as_of: str, says: str) -> None:
    bob = made["root"] / "bob.json"
    if not bob.exists():
        assert receipts_cli.main(["checkpoint", str(made["data"]), "bob"]) == 0
        bob.write_text(capsys.readouterr().out)
    big = made["root"] / "big.json"
    if not big.exists():
        big.write_bytes(b" " * (2 << 20))
    value = as_of.format(**{k: str(v) for k, v in made.items()})
    code, out, err = run(capsys, retrieval_cli.main, "search", made["data"], "alice", "sister", "--as-of", value)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, (out, err)


def _note(root: Path, name: str, extensions: str) -> Path:
    from receipts.keys import SigningKey
    from receipts.note import b64, sign_note

    path = root / name
    path.write_text(sign_note(f"mre.example/other/alice\n1\n{b64(bytes(32))}\n{extensions}", SigningKey.generate()))
    return path


@pytest.mark.parametrize(
    ("name", "extensions", "says"),
    [
        ("no-head.note", "", "cannot be tied to this ledger"),
        ("two-heads.note", "mre-chain-head " + "a" * 64 + "\nmre-chain-head " + "b" * 64 + "\n", "cannot be tied to this ledger"),
        ("other-head.note", "mre-chain-head " + "0" * 64 + "\n", "another history"),
    ],
)
def test_as_of_a_note_that_does_not_name_this_ledgers_chain_head_is_refused_exit_2(
    made: dict[str, Any], capsys: pytest.CaptureFixture[str], name: str, extensions: str, says: str
) -> None:
    note = _note(made["root"], name, extensions)
    code, out, err = run(capsys, retrieval_cli.main, "search", made["data"], "alice", "sister", "--as-of", note)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1 and not out, (out, err)


def test_as_of_zero_is_the_empty_memory(made: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, retrieval_cli.main, "search", made["data"], "alice", "sister", "--as-of", "0")
    assert code == 0 and "no results" in out, (out, err)


def test_a_data_directory_whose_index_cannot_be_opened_is_unusable_input_exit_2_not_a_verdict(
    made: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    shutil.copytree(made["data"], data)
    (data / "index.sqlite").unlink()
    (data / "index.sqlite").mkdir()  # as a read-only folder would: SQLite cannot open it
    code, out, err = run(capsys, receipts_cli.main, "replay", made["receipt"], "--data", data, "--trust", made["pub"])
    assert code == 2 and "cannot be opened" in err and len(err.strip().splitlines()) == 1 and not out, (out, err)


@pytest.mark.parametrize("argv", [["verify", "/dev/zero"], ["verify", "{receipt}", "--trust", "/dev/zero"]])
def test_receipts_verify_never_reads_an_endless_file(made: dict[str, Any], capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    """/dev/zero says it holds 0 bytes and never ends: refused in one line, not read until memory runs out."""
    code, _out, err = run(capsys, receipts_cli.main, *(a.format(**{k: str(v) for k, v in made.items()}) for a in argv))
    assert code == 2 and "not a regular file" in err and len(err.strip().splitlines()) == 1, err
