"""Write the golden ranking receipt vector (docs/FORMAT.md §24): a format-2 turn whose receipt commits to its ranking.

Run from the repository root: `python tests/vectors/generate_ranked.py`. Deterministic: fixed salts, ids and times, the
receipt vectors' Ed25519 key (receipt_v1_pubkey.json), the reference Merkle code; the ranked list is what the turn's
own retrieval (chat.retrieve) returns over an index of the ledger's first events (storage.asof), so the vector is
also a replay vector: tests/vectors/test_vectors_ranked.py replays it and gets the same list and scores.

The session: six memories, the question at seq 6 ("Which city does my sister live in now?"), K = 3, the answer at
seq 7; the memories handed to the model are the ranked list's three.

- `receipt_v2_ranked.json`: the receipt file (format 2 with `ranking`);
- `receipt_v2_ranked_body.json`: its signed body, decoded;
- `receipt_v2_ranked_ledger.jsonl`: the ledger it cites (it verifies and replays against it).
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT))

from chat.retrieve import retrieve  # noqa: E402
from control.state import ControlState  # noqa: E402
from receipts.keys import SigningKey  # noqa: E402
from receipts.ranking import ranking_part  # noqa: E402
from retrieval.config import IndexConfig, ranking_config  # noqa: E402
from retrieval.sql import TOKENIZER  # noqa: E402
from storage.api import file_stores  # noqa: E402
from storage.asof import prefix_index  # noqa: E402
from tests.vectors.turn_vector import one_turn  # noqa: E402

OUT = Path(__file__).resolve().parent
SESSION = "vector-ranked"
SEED = hashlib.sha256(b"mre test vector signing key").digest()  # the key of receipt_v1_pubkey.json
RECEIPT_ID = "rcpt_" + hashlib.sha256(b"vector ranked receipt").hexdigest()[:32]
MEMORIES = [
    ("user", "My sister Ana lives in Lisbon with her two cats", {"kind": "chat"}),
    ("user", "The tax form is due on Friday", {"kind": "chat"}),
    ("user", "I booked a train to see my sister in May", {"kind": "chat"}),
    ("user", "Our city library opens late on Thursdays", {"kind": "chat"}),
    ("user", "My brother plays the cello in an orchestra", {"kind": "chat"}),
    ("user", "Ana says the city is lovely in spring", {"kind": "chat"}),
]
QUESTION = "Which city does my sister live in now?"
ANSWER = "Your sister Ana lives in Lisbon."
K = 3  # turn_vector.one_turn's K


def ranking(events: list[Any]) -> dict[str, Any]:
    """The `ranking` member: the turn's retrieval over an index of the events before the question."""
    q = len(MEMORIES)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "sessions" / SESSION
        folder.mkdir(parents=True)
        (folder / "events.jsonl").write_bytes(b"".join(e.to_line() for e in events[: q + 1]))
        stores = file_stores(tmp)
        try:
            with prefix_index(stores.ledger, SESSION, q, IndexConfig()) as idx:
                got = retrieve(idx, None, ControlState(), SESSION, QUESTION, K, [])  # type: ignore[arg-type]  # nothing revoked: no cites read
        finally:
            stores.close()
    config = ranking_config(IndexConfig(), method="fts5-bm25+collapse/v1", tokenizer=TOKENIZER)
    return ranking_part(config=config, indexed=q, controls=q + 1, rules=got.rules, ranked=got.ranked())


def build() -> dict[str, str]:
    key = SigningKey.from_seed(SEED)
    common: dict[str, Any] = {"session": SESSION, "label": "ranked", "receipt_id": RECEIPT_ID, "memories": MEMORIES, "question": QUESTION, "answer": ANSWER, "key": key}
    events, _body, _raw = one_turn(cited=[], member=lambda _cp: {}, **common)  # the same events up to the question
    member = ranking(events)
    cited = [r["seq"] for r in member["ranked"]]
    events, body, raw = one_turn(cited=cited, member=lambda _cp: {"ranking": member}, **common)
    return {
        "receipt_v2_ranked.json": raw.decode("utf-8"),
        "receipt_v2_ranked_body.json": json.dumps(body, indent=2, ensure_ascii=False) + "\n",
        "receipt_v2_ranked_ledger.jsonl": "".join(e.to_line().decode("utf-8") for e in events),
    }


def main() -> None:
    for name, text in build().items():
        (OUT / name).write_text(text, encoding="utf-8")
    print(f"wrote ranking receipt vectors to {OUT}")


if __name__ == "__main__":
    main()
