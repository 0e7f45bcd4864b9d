"""The committed ranking receipt vector (docs/FORMAT.md §24) is reproduced byte for byte, verifies offline and with its
ledger with every row passing, replays to the same ranked list and scores, and a `ranking` member of any other shape
is refused at parse time."""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import shutil
from pathlib import Path
from typing import Any

import pytest

from chat.citing import Cites
from chat.replay import REPLAYED, replay
from receipts import body as rbody
from receipts.body import MalformedReceipt, parse_receipt
from receipts.keys import SigningKey, parse_public_key
from receipts.verify import PASS
from storage.files.receipts.api import verify_bytes
from storage.stores import file_stores

VECTORS = Path(__file__).resolve().parent
RAW = (VECTORS / "receipt_v2_ranked.json").read_bytes()
PUB = parse_public_key((VECTORS / "receipt_v1_pubkey.json").read_text())
KEY = SigningKey.from_seed(hashlib.sha256(b"mre test vector signing key").digest())
SESSION = "vector-ranked"


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("generate_ranked", VECTORS / "generate_ranked.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _data(tmp_path: Path) -> Path:
    folder = tmp_path / "sessions" / SESSION
    folder.mkdir(parents=True)
    shutil.copy(VECTORS / "receipt_v2_ranked_ledger.jsonl", folder / "events.jsonl")
    return tmp_path


def test_code_reproduces_the_committed_ranking_vector_exactly() -> None:
    files = _generator().build()
    assert set(files) == {"receipt_v2_ranked.json", "receipt_v2_ranked_body.json", "receipt_v2_ranked_ledger.jsonl"}
    for name, text in files.items():
        assert (VECTORS / name).read_text(encoding="utf-8") == text, name


def test_the_ranking_vector_verifies_offline_and_with_its_ledger_every_row_passing(tmp_path: Path) -> None:
    offline = verify_bytes(RAW, trusted=[PUB])
    assert offline.verdict == "verified"
    assert [c.status for c in offline.checks if c.name == "ranking.memories"] == [PASS]
    report = verify_bytes(RAW, trusted=[PUB], data_dir=_data(tmp_path))
    assert report.verdict == "verified"
    assert all(c.status == PASS for c in report.checks), [c.to_dict() for c in report.checks if c.status != PASS]


def test_the_ranking_vector_replays_to_its_committed_list_and_scores(tmp_path: Path) -> None:
    stores = file_stores(_data(tmp_path))
    try:
        got = replay(stores, Cites(stores), parse_receipt(RAW))
    finally:
        stores.close()
    assert got.verdict == REPLAYED, got.lines()
    body = parse_receipt(RAW).signed_body
    assert [r.seq for r in got.replayed] == [r["seq"] for r in body["ranking"]["ranked"]] == [m["event"]["seq"] for m in body["memories"]]
    assert [repr(r.score) for r in got.replayed] == [r["score"] for r in body["ranking"]["ranked"]]  # exactly, on files


def _resigned(mutate: Any) -> bytes:
    """The vector's body changed by `mutate` and signed again with the vector's key (what a forger holding it makes)."""
    receipt = parse_receipt(RAW)
    body = copy.deepcopy(receipt.signed_body)
    mutate(body["ranking"], body)
    return rbody.dump_file(rbody.sign_receipt(body, KEY, list(receipt.disclosures.values())))


MUTATIONS = {
    "unknown-version": lambda m, b: m.update(v=2),
    "version-as-string": lambda m, b: m.update(v="1"),
    "missing-rules": lambda m, b: m.pop("rules"),
    "extra-member": lambda m, b: m.update(why="because"),
    "not-an-object": lambda m, b: b.update(ranking=["x"]),
    "config-sha-short": lambda m, b: m.update(config_sha256="ab" * 31),
    "config-empty": lambda m, b: m.update(config=""),
    "indexed-above-controls": lambda m, b: m.update(indexed=m["controls"] + 1),
    "negative-size": lambda m, b: m.update(controls=-1),
    "unknown-rule": lambda m, b: m.update(rules=["vibes"]),
    "rules-out-of-order": lambda m, b: m.update(rules=["superseded", "revoked"]),
    "rule-twice": lambda m, b: m.update(rules=["revoked", "revoked"]),
    "seq-at-indexed": lambda m, b: m["ranked"][0].update(seq=m["indexed"]),
    "seq-twice": lambda m, b: m["ranked"][1].update(seq=m["ranked"][0]["seq"]),
    "score-a-number": lambda m, b: m["ranked"][0].update(score=2),  # a float cannot even be signed (§1)
    "score-not-decimal": lambda m, b: m["ranked"][0].update(score="0x1p-20"),
    "score-nan": lambda m, b: m["ranked"][0].update(score="nan"),
    "score-too-long": lambda m, b: m["ranked"][0].update(score="1." + "0" * 60),
    "score-infinite": lambda m, b: m["ranked"][0].update(score="1e999"),
    "unknown-match": lambda m, b: m["ranked"][0].update(match="vibes"),
    "entry-extra-key": lambda m, b: m["ranked"][0].update(rank=1),
    "too-many": lambda m, b: m.update(ranked=[{"seq": i, "score": "1.0", "match": "own text"} for i in range(51)], indexed=60, controls=60),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_each_corruption_of_the_ranking_member_is_refused_at_parse_time(name: str) -> None:
    with pytest.raises(MalformedReceipt, match="ranking"):
        parse_receipt(_resigned(MUTATIONS[name]))


def test_a_ranking_whose_list_is_not_the_memories_fails_the_offline_row() -> None:
    def swap(m: dict[str, Any], _b: dict[str, Any]) -> None:
        m["ranked"][0], m["ranked"][1] = m["ranked"][1], m["ranked"][0]

    report = verify_bytes(_resigned(swap), trusted=[PUB])
    row = next(c for c in report.checks if c.name == "ranking.memories")
    assert report.verdict == "failed" and row.status != PASS and "not the ranked list's first ones" in row.message


def test_a_format_1_receipt_cannot_carry_it() -> None:
    with pytest.raises(ValueError, match="format-2 additions"):
        rbody.build_body(
            receipt_id="rcpt_" + "0" * 32, issued_at="2026-01-02T03:04:05.000000Z", session="s", k=1, retrieval="r",
            query=None, query_proof=[], memories=[], response=None, response_proof=[], provider="groq", model="m",  # type: ignore[arg-type]
            fallback_reason=None, template="t", prompt_sha256="0" * 64, checkpoint={}, receipt_format=1,
            ranking={"v": 1},
        )
