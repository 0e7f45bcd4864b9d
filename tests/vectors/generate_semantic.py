"""Write the golden semantic receipt vector (docs/FORMAT.md §25): a format-2 turn whose search ran hybrid.

Run from the repository root: `python tests/vectors/generate_semantic.py`. Deterministic: fixed salts, ids and
times, the receipt vectors' Ed25519 key (receipt_v1_pubkey.json), the reference Merkle code.
tests/vectors/test_vectors_semantic.py checks the code reproduces the files exactly.

The session: three memories; the question at seq 3 shares no word with the memory it needs ("young dog" / "puppy"),
which a hybrid search found; the answer at seq 4. The body's `semantic` member names the fusion method, the model and
its file's sha256, as storage/common/semantic.py pins them.

- `receipt_v2_semantic.json`: the receipt file (format 2 with `semantic`);
- `receipt_v2_semantic_body.json`: its signed body, decoded;
- `receipt_v2_semantic_ledger.jsonl`: the ledger it cites (it verifies against it, every row passing).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from receipts.keys import SigningKey  # noqa: E402
from tests.vectors.turn_vector import one_turn  # noqa: E402

OUT = Path(__file__).resolve().parent
SESSION = "vector-semantic"
SEED = hashlib.sha256(b"mre test vector signing key").digest()  # the key of receipt_v1_pubkey.json
RECEIPT_ID = "rcpt_" + hashlib.sha256(b"vector semantic receipt").hexdigest()[:32]
MEMORIES = [
    ("user", "I adopted a puppy last week", {"kind": "chat"}),
    ("user", "the tax form is due on Friday", {"kind": "chat"}),
    ("user", "My sister plays the cello", {"kind": "chat"}),
]
QUESTION = "How is the young dog settling in?"
ANSWER = "You adopted a puppy last week."
CITED = [0]
SEMANTIC = {
    "method": "linear-fusion-v1",
    "model": "all-MiniLM-L6-v2-onnx-int8",
    "model_sha256": "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
}


def build() -> dict[str, str]:
    events, body, raw = one_turn(
        session=SESSION, label="semantic", receipt_id=RECEIPT_ID, memories=MEMORIES, question=QUESTION, answer=ANSWER,
        cited=CITED, key=SigningKey.from_seed(SEED), member=lambda _cp: {"semantic": SEMANTIC},
    )
    return {
        "receipt_v2_semantic.json": raw.decode("utf-8"),
        "receipt_v2_semantic_body.json": json.dumps(body, indent=2, ensure_ascii=False) + "\n",
        "receipt_v2_semantic_ledger.jsonl": "".join(e.to_line().decode("utf-8") for e in events),
    }


def main() -> None:
    for name, text in build().items():
        (OUT / name).write_text(text, encoding="utf-8")
    print(f"wrote semantic receipt vectors to {OUT}")


if __name__ == "__main__":
    main()
