"""Write the golden memory-states receipt vector (docs/FORMAT.md §19, §20).

Run from the repository root: `python tests/vectors/generate_states.py`. Deterministic: fixed salts, ids
and times, the receipt vectors' Ed25519 key (receipt_v1_pubkey.json), the reference Merkle code.
tests/vectors/test_vectors_states.py checks the code reproduces the files exactly.

The session: "I live in Leeds" (seq 0) and "My dev server port is 3000" (seq 1); "We've just moved to
Bristol" (seq 2) and the supersession record of seq 0 by seq 2 (seq 3, decided by rule:same-attribute);
"I moved the dev server to 8080" (seq 4) and the record of seq 1 by seq 4 (seq 5). Then the question
(seq 6) and the answer (seq 7). The model was handed seq 0, marked superseded (template mre-prompt/v2),
and seq 2, live; seq 1 is listed as a superseded statement retrieval left out.

- `receipt_v2_states.json`: the receipt file (format 2 with `states`);
- `receipt_v2_states_body.json`: its signed body, decoded;
- `receipt_v2_states_ledger.jsonl`: the ledger it cites (it verifies against it, every row passing);
- `receipt_v2_states_show.txt`: what `python -m receipts show` prints for it.
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
from ledger.supersessions import SUPERSEDE_TEXT, supersession_meta  # noqa: E402
from receipts import body as rbody  # noqa: E402
from receipts.keys import SigningKey  # noqa: E402
from receipts.merkle import inclusion_proof, leaf_hash, root_from_leaf_hashes  # noqa: E402
from receipts.prompt import TEMPLATE_V2, build_messages, prompt_hash, superseded_mark  # noqa: E402
from receipts.show import render_text, summarize  # noqa: E402
from receipts.states import states_part  # noqa: E402

OUT = Path(__file__).resolve().parent
SESSION = "vector-states"
SEED = hashlib.sha256(b"mre test vector signing key").digest()  # the key of receipt_v1_pubkey.json
RECEIPT_ID = "rcpt_" + hashlib.sha256(b"vector states receipt").hexdigest()[:32]
TS = "2026-01-02T03:04:05.000000Z"
QUESTION = "Where did I live before?"
ANSWER = "Before Bristol you lived in Leeds [superseded]."


def _event(seq: int, prev: bytes, role: str, text: str, meta: dict[str, Any], name: bytes) -> Event:
    return make_event(
        session=SESSION, seq=seq, prev=prev, role=role, text=text, meta=meta, ts=TS,
        event_id="evt_" + hashlib.sha256(b"states vector event " + name).hexdigest()[:32],
        salt=hashlib.sha256(b"states vector salt " + name).digest(),
    )


def _events() -> list[Event]:
    events: list[Event] = []

    def add(role: str, text: str, meta: dict[str, Any]) -> Event:
        prev = bytes.fromhex(events[-1].chain) if events else GENESIS
        events.append(_event(len(events), prev, role, text, meta, b"%d" % len(events)))
        return events[-1]

    def record(new: Event, old: Event, reason: str) -> Event:
        meta = supersession_meta(new_seq=new.seq, new_id=new.id, old_seq=old.seq, old_id=old.id, decided_by="rule:same-attribute", reason=reason)
        return add("system", SUPERSEDE_TEXT, meta)

    leeds = add("user", "I live in Leeds", {"kind": "chat"})
    port = add("user", "My dev server port is 3000", {"kind": "chat"})
    record(add("user", "We've just moved to Bristol", {"kind": "chat"}), leeds, "residence changed")
    record(add("user", "I moved the dev server to 8080", {"kind": "chat"}), port, "new port")
    add("user", QUESTION, {"kind": "chat"})
    return events


def build() -> dict[str, str]:
    key = SigningKey.from_seed(SEED)
    events = _events()
    leeds, port, bristol, rec_leeds, _new_port, rec_port, query = events
    memories = [leeds, bristol]
    marks = {1: superseded_mark(rec_leeds.ts, bristol.seq)}
    p_hash = prompt_hash(build_messages(TEMPLATE_V2, QUESTION, [m.to_dict() for m in memories], marks))
    meta = {"kind": "chat", "model": "vector-model", "prompt_sha256": p_hash, "provider": "groq", "receipt_id": RECEIPT_ID}
    answer = _event(7, bytes.fromhex(query.chain), "assistant", ANSWER, meta, b"answer")
    events.append(answer)
    leaves = [leaf_hash(bytes.fromhex(e.digest)) for e in events]
    checkpoint = rbody.sign_checkpoint(
        session=SESSION, tree_size=len(events), root=root_from_leaf_hashes(leaves), chain_head=answer.chain, issued_at=TS, key=key
    )
    states = states_part(
        superseded=[(1, leeds.seq, leeds.id, rec_leeds, inclusion_proof(leaves, rec_leeds.seq))],
        excluded=[(port.seq, port.id, rec_port, inclusion_proof(leaves, rec_port.seq))],
    )
    body = rbody.build_body(
        receipt_id=RECEIPT_ID, issued_at=TS, session=SESSION, k=3, retrieval="fts5-bm25+collapse/v1",
        query=query, query_proof=inclusion_proof(leaves, query.seq),
        memories=[(m, inclusion_proof(leaves, m.seq)) for m in memories],
        response=answer, response_proof=inclusion_proof(leaves, answer.seq),
        provider="groq", model="vector-model", fallback_reason=None,
        template=TEMPLATE_V2, prompt_sha256=p_hash, checkpoint=checkpoint, receipt_format=2, states=states,
    )
    raw = rbody.dump_file(rbody.sign_receipt(body, key, rbody.disclosures_for([query, *memories, answer])))
    shown = render_text(summarize(rbody.parse_receipt(raw).body))
    return {
        "receipt_v2_states.json": raw.decode("utf-8"),
        "receipt_v2_states_body.json": json.dumps(body, indent=2, ensure_ascii=False) + "\n",
        "receipt_v2_states_ledger.jsonl": "".join(e.to_line().decode("utf-8") for e in events),
        "receipt_v2_states_show.txt": shown + "\n",
    }


def main() -> None:
    for name, text in build().items():
        (OUT / name).write_text(text, encoding="utf-8")
    print(f"wrote memory-states receipt vectors to {OUT}")


if __name__ == "__main__":
    main()
