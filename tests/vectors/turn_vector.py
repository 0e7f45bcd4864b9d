"""One signed format-2 turn for a golden vector (generate_semantic.py, generate_witnessed.py): memories, a question, the
answer citing some of them, the checkpoint after it, and the receipt with the body member the vector is about.

Deterministic: ids and salts from `label`, one fixed time, the caller's key, the reference Merkle code.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ledger.event import GENESIS, Event, make_event
from receipts import body as rbody
from receipts.keys import SigningKey
from receipts.merkle import inclusion_proof, leaf_hash, root_from_leaf_hashes
from receipts.prompt import TEMPLATE_V1, build_messages, prompt_hash

TS = "2026-01-02T03:04:05.000000Z"


def one_turn(
    *,
    session: str,
    label: str,
    receipt_id: str,
    memories: Sequence[tuple[str, str, dict[str, Any]]],
    question: str,
    answer: str,
    cited: Sequence[int],
    key: SigningKey,
    member: Callable[[Mapping[str, Any]], Mapping[str, Any]],
) -> tuple[list[Event], dict[str, Any], bytes]:
    """(the session's events, the signed body, the receipt file's bytes). `member(checkpoint)`: the build_body
    keywords of the format-2 member (`semantic=…`, `witnesses=…`), given the turn's signed checkpoint."""

    def event(seq: int, prev: bytes, role: str, text: str, meta: dict[str, Any], name: bytes) -> Event:
        return make_event(
            session=session, seq=seq, prev=prev, role=role, text=text, meta=meta, ts=TS,
            event_id="evt_" + hashlib.sha256(f"{label} vector event ".encode() + name).hexdigest()[:32],
            salt=hashlib.sha256(f"{label} vector salt ".encode() + name).digest(),
        )

    events: list[Event] = []
    prev = GENESIS
    for seq, (role, text, meta) in enumerate(memories):
        events.append(event(seq, prev, role, text, meta, b"%d" % seq))
        prev = bytes.fromhex(events[-1].chain)
    query = event(len(events), prev, "user", question, {"kind": "chat"}, b"query")
    events.append(query)
    handed = [events[s] for s in cited]
    p_hash = prompt_hash(build_messages(TEMPLATE_V1, question, [m.to_dict() for m in handed]))
    meta = {"kind": "chat", "model": "vector-model", "prompt_sha256": p_hash, "provider": "groq", "receipt_id": receipt_id}
    reply = event(len(events), bytes.fromhex(query.chain), "assistant", answer, meta, b"answer")
    events.append(reply)
    leaves = [leaf_hash(bytes.fromhex(e.digest)) for e in events]
    checkpoint = rbody.sign_checkpoint(
        session=session, tree_size=len(events), root=root_from_leaf_hashes(leaves), chain_head=reply.chain, issued_at=TS, key=key
    )
    body = rbody.build_body(
        receipt_id=receipt_id, issued_at=TS, session=session, k=3, retrieval="fts5-bm25+collapse/v1",
        query=query, query_proof=inclusion_proof(leaves, query.seq),
        memories=[(m, inclusion_proof(leaves, m.seq)) for m in handed],
        response=reply, response_proof=inclusion_proof(leaves, reply.seq),
        provider="groq", model="vector-model", fallback_reason=None,
        template=TEMPLATE_V1, prompt_sha256=p_hash, checkpoint=checkpoint, receipt_format=2, **member(checkpoint),
    )
    raw = rbody.dump_file(rbody.sign_receipt(body, key, rbody.disclosures_for([query, *handed, reply])))
    return events, body, raw
