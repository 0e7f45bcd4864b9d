"""Golden vectors of an erased ledger (tests/vectors/ledger_v1_erased.*, docs/FORMAT.md §4.4, §4.5)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson
import rfc8785

from ledger.event import ERASED_KEYS, recompute_digest
from ledger.verify import verify_stream

VECTORS = Path(__file__).resolve().parent
ORIGINAL = VECTORS / "ledger_v1_session.jsonl"
ERASED = VECTORS / "ledger_v1_erased.jsonl"
DESCRIBED = VECTORS / "ledger_v1_erased.json"
SESSION = "vector-session_1"


def test_the_erased_vector_ledger_verifies_and_lists_its_erased_line() -> None:
    report = verify_stream(SESSION, [ERASED.read_bytes()])
    want = json.loads(DESCRIBED.read_text())["verify"]
    assert report.ok, report.brk
    assert (report.events, report.head, list(report.erased)) == (want["events"], want["head"], want["erased"])


def test_each_erased_line_has_the_digest_chain_and_commitment_of_its_original() -> None:
    original = [orjson.loads(line) for line in ORIGINAL.read_bytes().splitlines()]
    commitments = {v["input"]["seq"]: v["commitment"] for v in json.loads((VECTORS / "ledger_v1.json").read_text())["vectors"]}
    erased = [orjson.loads(line) for line in ERASED.read_bytes().splitlines()]
    described = json.loads(DESCRIBED.read_text())
    seqs = [e["seq"] for e in described["erased"]]
    assert seqs == [2]
    for seq, (before, after) in enumerate(zip(original, erased, strict=False)):
        if seq in seqs:
            assert sorted(after) == sorted(ERASED_KEYS)
            assert after["commit"] == commitments[seq]
            assert recompute_digest(after) == recompute_digest(before) and after["digest"] == before["digest"]
            assert {k: v for k, v in after.items() if k != "commit"} == {k: v for k, v in before.items() if k not in ("text", "meta", "salt")}
            assert before["text"] and before["text"] not in ERASED.read_text(encoding="utf-8")
        else:
            assert after == before


def test_every_line_is_jcs_and_the_record_lists_the_erased_line() -> None:
    lines = ERASED.read_bytes().splitlines(keepends=True)
    assert all(line == rfc8785.dumps(orjson.loads(line)) + b"\n" for line in lines)
    record = orjson.loads(lines[-1])
    described = json.loads(DESCRIBED.read_text())
    assert record["role"] == "system" and record["text"] == "[erasure record: 1 event(s) erased]"
    (entry,) = record["meta"]["erasure"]["erased"]
    e = described["erased"][0]
    assert entry == {"seq": e["seq"], "id": orjson.loads(e["erased_line"])["id"], "digest": e["digest"], "commit": e["commit"]}
    assert record["meta"]["erasure"]["reason"] == described["record"]["reason"]
    assert lines[e["seq"]].decode() == e["erased_line"] and lines[-1].decode() == described["record"]["line"]


def test_the_generator_reproduces_the_committed_vectors_byte_for_byte() -> None:
    import importlib.util  # the generator as a module: compare what it would write, without writing

    spec = importlib.util.spec_from_file_location("generate_erased", VECTORS / "generate_erased.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    data, described = mod.build()
    assert data == ERASED.read_bytes()
    assert json.dumps(described, indent=2, ensure_ascii=False) + "\n" == DESCRIBED.read_text(encoding="utf-8")


def test_ledger_verify_on_the_vector_says_erased_not_malformed(tmp_path: Path) -> None:
    folder = tmp_path / "sessions" / SESSION
    folder.mkdir(parents=True)
    (folder / "events.jsonl").write_bytes(ERASED.read_bytes())
    out = subprocess.run([sys.executable, "-m", "ledger", "verify", str(tmp_path), SESSION], capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 event erased (seq 2)" in out.stdout
    out = subprocess.run([sys.executable, "-m", "ledger", "verify", str(tmp_path), SESSION, "--json"], capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0 and json.loads(out.stdout)["sessions"][0]["erased"] == [2]
