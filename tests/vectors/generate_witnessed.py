"""Write the golden witnessed receipt vector (docs/FORMAT.md §22, "Witness cosignatures in a receipt"): a format-2 turn
whose checkpoint a witness cosigned before the receipt was signed.

Run from the repository root: `python tests/vectors/generate_witnessed.py`. Deterministic: fixed salts, ids and
times, the receipt vectors' Ed25519 key (receipt_v1_pubkey.json) as the log's, a fixed witness key and cosignature
time, the reference Merkle code. tests/vectors/test_vectors_witnessed.py checks the code reproduces the files exactly.

- `receipt_v2_witnessed.json`: the receipt file (format 2 with `witnesses`);
- `receipt_v2_witnessed_body.json`: its signed body, decoded;
- `receipt_v2_witnessed_ledger.jsonl`: the ledger it cites;
- `witness_v1.policy`: a c2sp.org/tlog-policy naming the log and the witness, quorum the witness.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from receipts.cosignature import cosign, witness_key  # noqa: E402
from receipts.keys import SigningKey  # noqa: E402
from receipts.note import b64, checkpoint_text, verifier  # noqa: E402
from tests.vectors.turn_vector import one_turn  # noqa: E402

OUT = Path(__file__).resolve().parent
SESSION = "vector-witnessed"
SEED = hashlib.sha256(b"mre test vector signing key").digest()  # the key of receipt_v1_pubkey.json
RECEIPT_ID = "rcpt_" + hashlib.sha256(b"vector witnessed receipt").hexdigest()[:32]
WITNESS_SEED = hashlib.sha256(b"mre test vector witness key").digest()
WITNESS_NAME = "witness.example/w1"
COSIGNED_AT = 1_767_323_045  # 2026-01-02T03:04:05Z
MEMORIES = [
    ("user", "I adopted a puppy last week", {"kind": "chat"}),
    ("user", "the tax form is due on Friday", {"kind": "chat"}),
    ("user", "My sister plays the cello", {"kind": "chat"}),
]
QUESTION = "What did I adopt last week?"
ANSWER = "You adopted a puppy last week."
CITED = [0]


def build() -> dict[str, str]:
    key = SigningKey.from_seed(SEED)
    witness = SigningKey.from_seed(WITNESS_SEED)

    def cosigned(checkpoint: Mapping[str, Any]) -> dict[str, Any]:
        line = cosign(checkpoint_text(checkpoint).encode(), witness, WITNESS_NAME, COSIGNED_AT)
        return {"witnesses": [(line.name, b64(line.key_hash.to_bytes(4, "big") + line.sig))]}

    events, body, raw = one_turn(
        session=SESSION, label="witnessed", receipt_id=RECEIPT_ID, memories=MEMORIES, question=QUESTION, answer=ANSWER,
        cited=CITED, key=key, member=cosigned,
    )
    policy = (
        f"log {verifier(key.public_key).vkey()}\n"
        f"witness w1 {witness_key(witness.public_key, WITNESS_NAME).vkey()}\n"
        "quorum w1\n"
    )
    return {
        "receipt_v2_witnessed.json": raw.decode("utf-8"),
        "receipt_v2_witnessed_body.json": json.dumps(body, indent=2, ensure_ascii=False) + "\n",
        "receipt_v2_witnessed_ledger.jsonl": "".join(e.to_line().decode("utf-8") for e in events),
        "witness_v1.policy": policy,
    }


def main() -> None:
    for name, text in build().items():
        (OUT / name).write_text(text, encoding="utf-8")
    print(f"wrote witnessed receipt vectors to {OUT}")


if __name__ == "__main__":
    main()
