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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ledger.event import GENESIS, Event, make_event  # noqa: E402
from receipts import body as rbody  # noqa: E402
from receipts.cosignature import cosign, witness_key  # noqa: E402
from receipts.keys import SigningKey  # noqa: E402
from receipts.merkle import inclusion_proof, leaf_hash, root_from_leaf_hashes  # noqa: E402
from receipts.note import b64, checkpoint_text, verifier  # noqa: E402
from receipts.prompt import TEMPLATE_V1, build_messages, prompt_hash  # noqa: E402

OUT = Path(__file__).resolve().parent
SESSION = "vector-witnessed"
SEED = hashlib.sha256(b"mre test vector signing key").digest()  # the key of receipt_v1_pubkey.json
RECEIPT_ID = "rcpt_" + hashlib.sha256(b"vector witnessed receipt").hexdigest()[:32]
WITNESS_SEED = hashlib.sha256(b"mre test vector witness key").digest()
WITNESS_NAME = "witness.example/w1"
COSIGNED_AT = 1_767_323_045  # 2026-01-02T03:04:05Z
TS = "2026-01-02T03:04:05.000000Z"
MEMORIES = [
    ("user", "I adopted a puppy last week", {"kind": "chat"}),
    ("user", "the tax form is due on Friday", {"kind": "chat"}),
    ("user", "My sister plays the cello", {"kind": "chat"}),
]
QUESTION = "What did I adopt last week?"
ANSWER = "You adopted a puppy last week."
CITED = [0]


def _event(seq: int, prev: bytes, role: str, text: str, meta: dict[str, Any], name: bytes) -> Event:
    return make_event(
        session=SESSION, seq=seq, prev=prev, role=role, text=text, meta=meta, ts=TS,
        event_id="evt_" + hashlib.sha256(b"witnessed vector event " + name).hexdigest()[:32],
        salt=hashlib.sha256(b"witnessed vector salt " + name).digest(),
    )


def build() -> dict[str, str]:
    key = SigningKey.from_seed(SEED)
    events: list[Event] = []
    prev = GENESIS
    for seq, (role, text, meta) in enumerate(MEMORIES):
        events.append(_event(seq, prev, role, text, meta, b"%d" % seq))
        prev = bytes.fromhex(events[-1].chain)
    query = _event(3, prev, "user", QUESTION, {"kind": "chat"}, b"query")
    events.append(query)
    cited = [events[s] for s in CITED]
    p_hash = prompt_hash(build_messages(TEMPLATE_V1, QUESTION, [m.to_dict() for m in cited]))
    meta = {"kind": "chat", "model": "vector-model", "prompt_sha256": p_hash, "provider": "groq", "receipt_id": RECEIPT_ID}
    answer = _event(4, bytes.fromhex(query.chain), "assistant", ANSWER, meta, b"answer")
    events.append(answer)
    leaves = [leaf_hash(bytes.fromhex(e.digest)) for e in events]
    checkpoint = rbody.sign_checkpoint(
        session=SESSION, tree_size=len(events), root=root_from_leaf_hashes(leaves), chain_head=answer.chain, issued_at=TS, key=key
    )
    witness = SigningKey.from_seed(WITNESS_SEED)
    line = cosign(checkpoint_text(checkpoint).encode(), witness, WITNESS_NAME, COSIGNED_AT)
    cosigned = [(line.name, b64(line.key_hash.to_bytes(4, "big") + line.sig))]
    body = rbody.build_body(
        receipt_id=RECEIPT_ID, issued_at=TS, session=SESSION, k=3, retrieval="fts5-bm25+collapse/v1",
        query=query, query_proof=inclusion_proof(leaves, query.seq),
        memories=[(m, inclusion_proof(leaves, m.seq)) for m in cited],
        response=answer, response_proof=inclusion_proof(leaves, answer.seq),
        provider="groq", model="vector-model", fallback_reason=None,
        template=TEMPLATE_V1, prompt_sha256=p_hash, checkpoint=checkpoint, receipt_format=2, witnesses=cosigned,
    )
    raw = rbody.dump_file(rbody.sign_receipt(body, key, rbody.disclosures_for([query, *cited, answer])))
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
