"""Property: random sequences of remember / turn / forget keep `ledger verify` passing, every stored receipt
verifying with the ledger, and every forgotten word absent from every file we own."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from control import forget as control
from storage.files.ledger.store import Ledger
from storage.files.receipts import files
from storage.files.receipts.api import verify_bytes

from ..forget_support import engine

# Nonsense words with distinct beginnings (FTS5 may store a term as the suffix after a prefix shared with the
# term before it): each one's last six letters are what the grep looks for.
WORDS = ["blorptax", "quindlewop", "frazzmoor", "gwendquist", "snorfblat", "trellwix", "vumpkrazz", "yorblenk"]
PLAIN = ["I moved to Lisbon in March", "My cat is called Miso", "I like green tea", "The meeting is on Friday"]
QUESTIONS = ["What is my secret word?", "Tell me my secret word", "Where did I move?", "What is my cat called?"]


def _grep(roots: list[Path], needle: bytes) -> list[str]:
    from ..forget_support import _blobs

    return [str(p) for root in roots for p in sorted(root.rglob("*")) if p.is_file() and any(needle in b for b in _blobs(p.read_bytes()))]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_remember_turn_forget_sequences_keep_verifying_and_forget_completely(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    data = tmp_path / "data"
    eng = engine(data)
    kw = {"ledger": eng.ledger, "index": eng.index, "key": eng.key}
    words = list(WORDS)
    rng.shuffle(words)
    marked: dict[int, str] = {}  # seq -> the word its memory holds
    forgotten: set[str] = set()
    eng.remember("s", rng.choice(PLAIN))
    for _ in range(14):
        op = rng.choice(["plain", "marked", "turn", "turn", "forget"])
        if op == "plain":
            eng.remember("s", rng.choice(PLAIN))
        elif op == "marked" and words:
            w = words.pop()
            marked[eng.remember("s", f"My secret word is {w}").seq] = w
        elif op == "turn":
            eng.turn("s", rng.choice(QUESTIONS))
        else:
            led = Ledger(data)
            live = [ev.seq for ev in led.events("s") if not ev.erased and ev.role != "system"]
            if not live:
                continue
            pick = rng.choice([s for s in live if s in marked] or live)
            result = control.forget(data, "s", [pick], cascade=rng.random() < 0.8, **kw)  # type: ignore[arg-type]
            forgotten.update(marked[s] for s in result.erased if s in marked)
        report = Ledger(data).verify("s")
        assert report.ok, report.brk
    led = Ledger(data)
    still = [ev.seq for ev in led.events("s") if ev.seq in marked and not ev.erased]
    if still:  # end by forgetting one more, so every run forgets at least one word
        result = control.forget(data, "s", [still[0]], **kw)  # type: ignore[arg-type]
        forgotten.update(marked[s] for s in result.erased if s in marked)
    assert forgotten and Ledger(data).verify("s").ok
    roots = [data, Path(os.environ["MRE_CACHE_DIR"])]
    for w in sorted(forgotten):
        assert _grep(roots, w[-6:].encode()) == [], w
    for path in files.list_receipts(data, "s"):
        report = verify_bytes(path.read_bytes(), trusted=[eng.key.public_key], data_dir=data)
        assert report.verdict == "verified", (path.name, [c.name for c in report.failed])
