"""Write the golden receipt vectors (docs/FORMAT.md §9-§11, format 2: §15).

Run from the repository root: `python tests/vectors/generate_receipt.py`.
Everything is deterministic: fixed salts, ids and times, an Ed25519 key from a
fixed seed (Ed25519 signatures are deterministic), the reference Merkle code.
tests/vectors/test_vectors_receipt.py checks the code reproduces the files exactly.

The format-2 vector is the same turn (same events, same ledger, same receipt id)
in format 2: the signed body cites each event in erased form and the texts ride
beside the envelope as disclosures; `receipt_v2_redacted.json` is that file with
memory#2's disclosure withheld (receipts.redact), its signature untouched.
`receipt_v2_ledger_erased.jsonl` is the vector's ledger after memory#2 (seq 2) was
erased: that line in erased form and an erasure record appended (seq 6); the
redacted receipt verifies against it with memory#2's content `erased`.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ledger.event import GENESIS, Event, erased_form, erasure_record_meta, erasure_record_text, make_event  # noqa: E402
from receipts import body as rbody  # noqa: E402
from receipts import redact  # noqa: E402
from receipts.keys import SigningKey, format_public_key  # noqa: E402
from receipts.merkle import inclusion_proof, leaf_hash, root_from_leaf_hashes  # noqa: E402
from receipts.prompt import TEMPLATE_V1, build_messages, prompt_hash  # noqa: E402

OUT = Path(__file__).resolve().parent
SESSION = "vector-receipts"
SEED = hashlib.sha256(b"mre test vector signing key").digest()
RECEIPT_ID = "rcpt_" + hashlib.sha256(b"vector receipt").hexdigest()[:32]
TS = "2026-01-02T03:04:05.000000Z"
MESSAGES = [
    ("user", "I adopted a grey cat named Miso", {"kind": "chat"}),
    ("assistant", "Noted: your cat is Miso.", {"kind": "chat"}),
    ("user", "I moved to Lisbon in March", {"kind": "chat"}),
    ("assistant", "Lisbon, since March. Got it.", {"kind": "chat"}),
    ("user", "What is my cat called?", {"kind": "chat"}),
]
ANSWER = "Your cat is called Miso [evt_m]."


def build() -> dict[str, Any]:
    key = SigningKey.from_seed(SEED)
    events: list[Event] = []
    prev = GENESIS
    for seq, (role, text, meta) in enumerate(MESSAGES):
        ev = make_event(
            session=SESSION, seq=seq, prev=prev, role=role, text=text, meta=meta, ts=TS,
            event_id="evt_" + hashlib.sha256(b"vector event %d" % seq).hexdigest()[:32],
            salt=hashlib.sha256(b"vector receipt salt %d" % seq).digest(),
        )
        events.append(ev)
        prev = bytes.fromhex(ev.chain)
    query = events[-1]
    memories = [events[0], events[2]]  # the retrieval result this vector pins, best first
    messages = build_messages(TEMPLATE_V1, query.text, [m.to_dict() for m in memories])
    p_hash = prompt_hash(messages)
    meta = {"kind": "chat", "model": "vector-model", "prompt_sha256": p_hash, "provider": "groq", "receipt_id": RECEIPT_ID}
    answer = make_event(
        session=SESSION, seq=len(events), prev=prev, role="assistant", text=ANSWER, meta=meta, ts=TS,
        event_id="evt_" + hashlib.sha256(b"vector event answer").hexdigest()[:32],
        salt=hashlib.sha256(b"vector receipt salt answer").digest(),
    )
    events.append(answer)
    leaves = [leaf_hash(bytes.fromhex(e.digest)) for e in events]
    size = len(events)
    checkpoint = rbody.sign_checkpoint(
        session=SESSION, tree_size=size, root=root_from_leaf_hashes(leaves), chain_head=answer.chain, issued_at=TS, key=key
    )
    def body_of(receipt_format: int) -> dict[str, Any]:
        return rbody.build_body(
            receipt_id=RECEIPT_ID, issued_at=TS, session=SESSION, k=8, retrieval="fts5-bm25+collapse/v1",
            query=query, query_proof=inclusion_proof(leaves, query.seq),
            memories=[(m, inclusion_proof(leaves, m.seq)) for m in memories],
            response=answer, response_proof=inclusion_proof(leaves, answer.seq),
            provider="groq", model="vector-model", fallback_reason=None,
            template=TEMPLATE_V1, prompt_sha256=p_hash, checkpoint=checkpoint, receipt_format=receipt_format,
        )

    body = body_of(1)
    body2 = body_of(2)
    file2 = rbody.sign_receipt(body2, key, rbody.disclosures_for([query, *memories, answer]))
    raw2 = rbody.dump_file(file2)
    gone = erased_form(events[memories[1].seq])
    record = make_event(
        session=SESSION, seq=len(events), prev=bytes.fromhex(answer.chain), role="system", text=erasure_record_text(1),
        meta=erasure_record_meta([gone], "golden vector"), ts=TS,
        event_id="evt_" + hashlib.sha256(b"vector event erasure").hexdigest()[:32],
        salt=hashlib.sha256(b"vector receipt salt erasure").digest(),
    )
    erased_ledger = [gone if e.seq == gone.seq else e for e in events] + [record]
    return {
        "receipt_v1.json": json.dumps(rbody.sign_receipt(body, key), indent=2, sort_keys=True) + "\n",
        "receipt_v1_body.json": json.dumps(body, indent=2, ensure_ascii=False) + "\n",
        "receipt_v1_prompt.json": json.dumps(messages, indent=2, ensure_ascii=False) + "\n",
        "receipt_v1_pubkey.json": format_public_key(key.public_key),
        "receipt_v1_ledger.jsonl": "".join(e.to_line().decode("utf-8") for e in events),
        "receipt_v2.json": raw2.decode("utf-8"),
        "receipt_v2_body.json": json.dumps(body2, indent=2, ensure_ascii=False) + "\n",
        "receipt_v2_redacted.json": redact(raw2, [memories[1].seq]).decode("utf-8"),
        "receipt_v2_ledger_erased.jsonl": "".join(e.to_line().decode("utf-8") for e in erased_ledger),
    }


def main() -> None:
    for name, text in build().items():
        (OUT / name).write_text(text, encoding="utf-8")
    print(f"wrote receipt vectors to {OUT}")


if __name__ == "__main__":
    main()
