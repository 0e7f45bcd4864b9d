"""A turn's durable writes on files (issue 30): fewer fsyncs, the same promise.

The turn's first checkpoint (the question's, in place while the model runs) is renamed into place after the question
is fsynced, and its folder's fsync is left to the answer's checkpoint. So a power cut while the model runs leaves the
previous checkpoint or the question's, each whole and each a verifiable prefix of the ledger, and when the turn
returns every file it wrote and every rename it made has been fsynced.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chat.engine import Engine
from chat.llm import LLM, Completion
from receipts.body import checkpoint_bytes, decode_sig
from receipts.merkle import leaf_hash, root_from_leaf_hashes
from storage.files.ledger.store import Ledger
from storage.files.receipts import checkpoint_files
from storage.files.receipts.api import verify_bytes

# caches a fresh open checks against the ledger's own bytes (stat, head) before trusting: written without fsync on purpose
DERIVED = ("tail.json", "control-state.json")
FACTS = ["My cat is called Miso", "I live in Lisbon", "My sister Ana marries in Porto in October"]


@pytest.fixture(autouse=True)
def _no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RECEIPT_SIGNING_KEY", raising=False)


def engine_with_facts(data: Path) -> Engine:
    engine = Engine(data, llm=LLM(api_key=""))
    for fact in FACTS:
        engine.remember("alice", fact)
    engine.turn("alice", "Where do I live?")
    return engine


class Recorder:
    """The order of a turn's writes, fsyncs and renames, by real path (os.write only for ledger files)."""

    def __init__(self, data: Path) -> None:
        self.data = data.resolve()
        self.ops: list[tuple[str, Path]] = []

    def path(self, fd: int) -> Path:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))

    @staticmethod
    def install(monkeypatch: pytest.MonkeyPatch, rec: Recorder) -> None:
        real_fsync, real_replace, real_write = os.fsync, os.replace, os.write

        def fsync(fd: int) -> None:
            rec.ops.append(("fsync", rec.path(fd)))
            real_fsync(fd)

        def replace(src: Any, dst: Any, **kw: Any) -> None:
            real_replace(src, dst, **kw)
            rec.ops.append(("rename", Path(dst).resolve()))

        def write(fd: int, data: Any) -> int:
            n = real_write(fd, data)
            p = rec.path(fd)
            if p.name == "events.jsonl" or p.name.endswith(".tmp"):
                rec.ops.append(("write", p))
            return n

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "replace", replace)
        monkeypatch.setattr(os, "write", write)

    def last(self, op: str, path: Path, before: int | None = None) -> int:
        idx = [i for i, (o, p) in enumerate(self.ops[:before]) if o == op and p == path]
        return idx[-1] if idx else -1

    def fsyncs(self) -> int:
        return sum(1 for o, _ in self.ops if o == "fsync")


@pytest.fixture()
def recorded_turn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    engine = engine_with_facts(tmp_path)
    rec = Recorder(tmp_path)
    Recorder.install(monkeypatch, rec)
    engine.turn("alice", "What is my cat called?")
    monkeypatch.undo()
    yield rec


def test_a_returned_turn_has_fsynced_every_file_it_wrote_and_every_folder_it_renamed_in(recorded_turn: Recorder) -> None:
    rec = recorded_turn
    written = {p for o, p in rec.ops if o == "write" and not p.name.lstrip(".").startswith(DERIVED)}
    assert any(p.name == "events.jsonl" for p in written)
    for p in written:
        assert rec.last("fsync", p) > rec.last("write", p), f"{p.name}: written after its last fsync"
    for folder in {p.parent for o, p in rec.ops if o == "rename" and p.name not in DERIVED}:
        last_rename = max(i for i, (o, p) in enumerate(rec.ops) if o == "rename" and p.parent == folder and p.name not in DERIVED)
        assert rec.last("fsync", folder) > last_rename, f"{folder.name}: a rename after its folder's last fsync"


def test_no_checkpoint_is_put_in_place_over_a_ledger_line_not_yet_fsynced(recorded_turn: Recorder) -> None:
    rec = recorded_turn
    log = rec.data / "sessions" / "alice" / "events.jsonl"
    renames = [i for i, (o, p) in enumerate(rec.ops) if o == "rename" and p.name == "checkpoint.json"]
    assert len(renames) == 2, "a turn signs after the question and after the answer"
    for i in renames:
        assert rec.last("fsync", log, before=i) > rec.last("write", log, before=i)


def test_the_memories_handed_record_is_durable_before_the_answer_is_written(recorded_turn: Recorder) -> None:
    rec = recorded_turn
    log = rec.data / "sessions" / "alice" / "events.jsonl"
    answer = rec.last("write", log)
    cites = [i for i, (o, p) in enumerate(rec.ops) if o == "rename" and p.suffix == ".cites"]
    assert len(cites) == 1 and cites[0] < answer
    assert rec.last("fsync", rec.ops[cites[0]][1].parent, before=answer) > cites[0]


def test_a_turn_makes_nine_fsyncs_not_ten(recorded_turn: Recorder) -> None:
    # the question, its checkpoint's file, the memories-handed record and its folder, the answer, the answer's
    # checkpoint and its folder, the receipt and its folder: the question's checkpoint folder fsync is left out
    assert recorded_turn.fsyncs() == 9


@pytest.mark.parametrize("cut", ["rename lost", "rename kept"])
def test_a_power_cut_while_the_model_runs_leaves_a_whole_verifiable_prefix(tmp_path: Path, cut: str) -> None:
    data = tmp_path / "data"
    engine = engine_with_facts(data)
    before = checkpoint_files.latest(data, "alice")
    assert before is not None
    after_cut = tmp_path / "after-cut"
    real = engine.llm.complete

    def complete(*args: Any, **kwargs: Any) -> Completion:
        # what the disk may hold if the power goes now: the question (fsynced), and the previous checkpoint or the
        # question's (renamed, its folder not fsynced)
        shutil.copytree(data, after_cut)
        if cut == "rename lost":
            checkpoint_files.keep(after_cut, "alice", before)
        return real(*args, **kwargs)

    engine.llm.complete = complete  # type: ignore[method-assign]
    engine.turn("alice", "What is my cat called?")
    engine.close()

    ledger = Ledger(after_cut)
    assert ledger.verify("alice").ok
    count, _ = ledger.head("alice")
    kept = checkpoint_files.latest(after_cut, "alice")
    assert kept is not None
    size = kept["body"]["tree_size"]
    assert size == (before["body"]["tree_size"] if cut == "rename lost" else count)
    # whole and a prefix: signed by the key, over the first `size` events as stored
    sig = decode_sig(kept["sig"])
    assert sig is not None and engine.key.public_key.verify(sig, checkpoint_bytes(kept["body"]))
    events = ledger.read_events("alice", range(size))
    assert kept["body"]["root"] == root_from_leaf_hashes([leaf_hash(bytes.fromhex(ev.digest)) for ev in events]).hex()
    assert kept["body"]["chain_head"] == events[-1].chain
    # and the next turn signs past it: the ledger proved to extend the checkpoint held before, its receipt verified
    again = Engine(after_cut, llm=LLM(api_key=""), key=engine.key)  # the key may live outside the data directory
    try:
        turn = again.turn("alice", "Where does my sister marry?")
    finally:
        again.close()
    trusted = [engine.key.public_key]
    since = checkpoint_files.prove_since(after_cut, "alice", before, trusted)
    assert since.verdict == "verified", [(c.name, c.message) for c in since.checks if c.status != "pass"]
    report = verify_bytes(turn.receipt_path.read_bytes(), trusted=trusted, data_dir=after_cut, full=True)
    assert report.verdict == "verified", report.failed
