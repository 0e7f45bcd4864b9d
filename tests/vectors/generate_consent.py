"""Write the golden consent receipt vector (docs/FORMAT.md §17, §18).

Run from the repository root: `python tests/vectors/generate_consent.py`. Deterministic: fixed salts,
ids and times, the receipt vectors' Ed25519 key (receipt_v1_pubkey.json), the reference Merkle code.
tests/vectors/test_vectors_consent.py checks the code reproduces the files exactly.

The session: four memories, a revocation of seq 3 (a control event at seq 4), then a consent turn —
retrieval proposed seqs 0, 2, 1 (seq 3 left out: revoked, and it would have ranked), the person
approved seq 0 only and withheld 2 and 1, the question at seq 5, the answer at seq 6.

- `receipt_v2_consent.json`: the receipt file (format 2 with `exclusions` and `consent`);
- `receipt_v2_consent_body.json`: its signed body, decoded;
- `receipt_v2_consent_ledger.jsonl`: the ledger it cites (it verifies against it, every row passing).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ledger.controls import CONTROL_TEXTS, control_meta  # noqa: E402
from ledger.event import GENESIS, Event, make_event  # noqa: E402
from receipts import body as rbody  # noqa: E402
from receipts.keys import SigningKey  # noqa: E402
from receipts.merkle import inclusion_proof, leaf_hash, root_from_leaf_hashes  # noqa: E402
from receipts.prompt import TEMPLATE_V1, build_messages, prompt_hash  # noqa: E402

OUT = Path(__file__).resolve().parent
SESSION = "vector-consent"
SEED = hashlib.sha256(b"mre test vector signing key").digest()  # the key of receipt_v1_pubkey.json
RECEIPT_ID = "rcpt_" + hashlib.sha256(b"vector consent receipt").hexdigest()[:32]
TS = "2026-01-02T03:04:05.000000Z"
MEMORIES = [
    ("user", "I adopted a grey cat named Miso", {"kind": "chat"}),
    ("user", "I moved to Lisbon in March", {"kind": "chat"}),
    ("user", "My sister is called Ana", {"kind": "chat"}),
    ("user", "My cat Miso was born in Porto", {"kind": "chat"}),
]
QUESTION = "What do you know about my cat?"
ANSWER = "Your cat is a grey cat named Miso."
PROPOSED = [0, 2, 1]  # retrieval's order, best first
APPROVED = [0]


def _event(seq: int, prev: bytes, role: str, text: str, meta: dict[str, Any], name: bytes) -> Event:
    return make_event(
        session=SESSION, seq=seq, prev=prev, role=role, text=text, meta=meta, ts=TS,
        event_id="evt_" + hashlib.sha256(b"consent vector event " + name).hexdigest()[:32],
        salt=hashlib.sha256(b"consent vector salt " + name).digest(),
    )


def build() -> dict[str, str]:
    key = SigningKey.from_seed(SEED)
    events: list[Event] = []
    prev = GENESIS
    for seq, (role, text, meta) in enumerate(MEMORIES):
        events.append(_event(seq, prev, role, text, meta, b"%d" % seq))
        prev = bytes.fromhex(events[-1].chain)
    control = _event(4, prev, "system", CONTROL_TEXTS["revoke"], control_meta("revoke", 3, events[3].id, "not about this any more"), b"control")
    events.append(control)
    query = _event(5, bytes.fromhex(control.chain), "user", QUESTION, {"kind": "chat"}, b"query")
    events.append(query)
    approved = [events[s] for s in APPROVED]
    p_hash = prompt_hash(build_messages(TEMPLATE_V1, QUESTION, [m.to_dict() for m in approved]))
    meta = {"kind": "chat", "model": "vector-model", "prompt_sha256": p_hash, "provider": "groq", "receipt_id": RECEIPT_ID}
    answer = _event(6, bytes.fromhex(query.chain), "assistant", ANSWER, meta, b"answer")
    events.append(answer)
    leaves = [leaf_hash(bytes.fromhex(e.digest)) for e in events]
    checkpoint = rbody.sign_checkpoint(
        session=SESSION, tree_size=len(events), root=root_from_leaf_hashes(leaves), chain_head=answer.chain, issued_at=TS, key=key
    )
    consent = rbody.consent_part(
        proposed=[(events[s], inclusion_proof(leaves, s)) for s in PROPOSED], approved=APPROVED, proposed_at=TS
    )
    body = rbody.build_body(
        receipt_id=RECEIPT_ID, issued_at=TS, session=SESSION, k=3, retrieval="fts5-bm25+collapse/v1",
        query=query, query_proof=inclusion_proof(leaves, query.seq),
        memories=[(m, inclusion_proof(leaves, m.seq)) for m in approved],
        response=answer, response_proof=inclusion_proof(leaves, answer.seq),
        provider="groq", model="vector-model", fallback_reason=None,
        template=TEMPLATE_V1, prompt_sha256=p_hash, checkpoint=checkpoint, receipt_format=2,
        exclusions=[(3, events[3].id, control, inclusion_proof(leaves, control.seq))], consent=consent,
    )
    raw = rbody.dump_file(rbody.sign_receipt(body, key, rbody.disclosures_for([query, *approved, answer])))
    return {
        "receipt_v2_consent.json": raw.decode("utf-8"),
        "receipt_v2_consent_body.json": json.dumps(body, indent=2, ensure_ascii=False) + "\n",
        "receipt_v2_consent_ledger.jsonl": "".join(e.to_line().decode("utf-8") for e in events),
    }


def main() -> None:
    for name, text in build().items():
        (OUT / name).write_text(text, encoding="utf-8")
    print(f"wrote consent receipt vectors to {OUT}")


if __name__ == "__main__":
    main()
