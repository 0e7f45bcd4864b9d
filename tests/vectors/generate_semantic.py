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
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ledger.event import GENESIS, Event, make_event  # noqa: E402
from receipts import body as rbody  # noqa: E402
from receipts.keys import SigningKey  # noqa: E402
from receipts.merkle import inclusion_proof, leaf_hash, root_from_leaf_hashes  # noqa: E402
from receipts.prompt import TEMPLATE_V1, build_messages, prompt_hash  # noqa: E402

OUT = Path(__file__).resolve().parent
SESSION = "vector-semantic"
SEED = hashlib.sha256(b"mre test vector signing key").digest()  # the key of receipt_v1_pubkey.json
RECEIPT_ID = "rcpt_" + hashlib.sha256(b"vector semantic receipt").hexdigest()[:32]
TS = "2026-01-02T03:04:05.000000Z"
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


def _event(seq: int, prev: bytes, role: str, text: str, meta: dict[str, Any], name: bytes) -> Event:
    return make_event(
        session=SESSION, seq=seq, prev=prev, role=role, text=text, meta=meta, ts=TS,
        event_id="evt_" + hashlib.sha256(b"semantic vector event " + name).hexdigest()[:32],
        salt=hashlib.sha256(b"semantic vector salt " + name).digest(),
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
    body = rbody.build_body(
        receipt_id=RECEIPT_ID, issued_at=TS, session=SESSION, k=3, retrieval="fts5-bm25+collapse/v1",
        query=query, query_proof=inclusion_proof(leaves, query.seq),
        memories=[(m, inclusion_proof(leaves, m.seq)) for m in cited],
        response=answer, response_proof=inclusion_proof(leaves, answer.seq),
        provider="groq", model="vector-model", fallback_reason=None,
        template=TEMPLATE_V1, prompt_sha256=p_hash, checkpoint=checkpoint, receipt_format=2, semantic=SEMANTIC,
    )
    raw = rbody.dump_file(rbody.sign_receipt(body, key, rbody.disclosures_for([query, *cited, answer])))
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
