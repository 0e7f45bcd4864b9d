"""Write the golden earlier-statements receipt vector (docs/FORMAT.md §20, states v2, issue 32).

Run from the repository root: `python tests/vectors/generate_earlier.py`. Deterministic: fixed salts, ids
and times, the receipt vectors' Ed25519 key (receipt_v1_pubkey.json), the reference Merkle code.
tests/vectors/test_vectors_earlier.py checks the code reproduces the files exactly.

The session: "I live in Paris and I work as a nurse." (seq 0, said on 2 January), "The weather is lovely
today." (seq 1), "I moved to Berlin last month." (seq 2, said on 9 March). No supersession record: the
compound first statement is kept whole at write time, and the question resolves it (facts.resolve). Then the
question "Where do I live?" (seq 3) and the answer (seq 4). The model was handed seq 2, then seq 0 marked
as an earlier statement replaced by seq 2 (template mre-prompt/v3), then seq 1.

- `receipt_v2_earlier.json`: the receipt file (format 2 with `states` v2);
- `receipt_v2_earlier_body.json`: its signed body, decoded;
- `receipt_v2_earlier_ledger.jsonl`: the ledger it cites (it verifies against it, every row passing);
- `receipt_v2_earlier_show.txt`: what `python -m receipts show` prints for it.
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
from receipts.prompt import TEMPLATE_V3, build_messages, earlier_mark, prompt_hash  # noqa: E402
from receipts.show import render_text, summarize  # noqa: E402
from receipts.states import states_part  # noqa: E402

OUT = Path(__file__).resolve().parent
SESSION = "vector-earlier"
SEED = hashlib.sha256(b"mre test vector signing key").digest()  # the key of receipt_v1_pubkey.json
RECEIPT_ID = "rcpt_" + hashlib.sha256(b"vector earlier receipt").hexdigest()[:32]
TIMES = ["2026-01-02T03:04:05.000000Z", "2026-02-01T10:00:00.000000Z", "2026-03-09T18:30:00.000000Z",
         "2026-04-01T08:00:00.000000Z", "2026-04-01T08:00:01.000000Z"]
QUESTION = "Where do I live?"
ANSWER = "You live in Berlin now; in January you said you lived in Paris."


def _event(seq: int, prev: bytes, role: str, text: str, meta: dict[str, Any], name: bytes) -> Event:
    return make_event(
        session=SESSION, seq=seq, prev=prev, role=role, text=text, meta=meta, ts=TIMES[seq],
        event_id="evt_" + hashlib.sha256(b"earlier vector event " + name).hexdigest()[:32],
        salt=hashlib.sha256(b"earlier vector salt " + name).digest(),
    )


def _events() -> list[Event]:
    events: list[Event] = []
    for text in ("I live in Paris and I work as a nurse.", "The weather is lovely today.", "I moved to Berlin last month.", QUESTION):
        prev = bytes.fromhex(events[-1].chain) if events else GENESIS
        events.append(_event(len(events), prev, "user", text, {"kind": "chat"}, b"%d" % len(events)))
    return events


def build() -> dict[str, str]:
    key = SigningKey.from_seed(SEED)
    events = _events()
    paris, weather, berlin, query = events
    memories = [berlin, paris, weather]
    marks = {2: earlier_mark(paris.ts, berlin.seq)}
    p_hash = prompt_hash(build_messages(TEMPLATE_V3, QUESTION, [m.to_dict() for m in memories], marks))
    meta = {"kind": "chat", "model": "vector-model", "prompt_sha256": p_hash, "provider": "groq", "receipt_id": RECEIPT_ID}
    answer = _event(4, bytes.fromhex(query.chain), "assistant", ANSWER, meta, b"answer")
    events.append(answer)
    leaves = [leaf_hash(bytes.fromhex(e.digest)) for e in events]
    checkpoint = rbody.sign_checkpoint(
        session=SESSION, tree_size=len(events), root=root_from_leaf_hashes(leaves), chain_head=answer.chain, issued_at=answer.ts, key=key
    )
    states = states_part(superseded=[], excluded=[], earlier=[(2, paris.seq, paris.id, berlin.seq)])
    body = rbody.build_body(
        receipt_id=RECEIPT_ID, issued_at=answer.ts, session=SESSION, k=3, retrieval="fts5-bm25+collapse/v1",
        query=query, query_proof=inclusion_proof(leaves, query.seq),
        memories=[(m, inclusion_proof(leaves, m.seq)) for m in memories],
        response=answer, response_proof=inclusion_proof(leaves, answer.seq),
        provider="groq", model="vector-model", fallback_reason=None,
        template=TEMPLATE_V3, prompt_sha256=p_hash, checkpoint=checkpoint, receipt_format=2, states=states,
    )
    raw = rbody.dump_file(rbody.sign_receipt(body, key, rbody.disclosures_for([query, *memories, answer])))
    shown = render_text(summarize(rbody.parse_receipt(raw).body))
    return {
        "receipt_v2_earlier.json": raw.decode("utf-8"),
        "receipt_v2_earlier_body.json": json.dumps(body, indent=2, ensure_ascii=False) + "\n",
        "receipt_v2_earlier_ledger.jsonl": "".join(e.to_line().decode("utf-8") for e in events),
        "receipt_v2_earlier_show.txt": shown + "\n",
    }


def main() -> None:
    for name, text in build().items():
        (OUT / name).write_text(text, encoding="utf-8")
    print(f"wrote earlier-statements receipt vectors to {OUT}")


if __name__ == "__main__":
    main()
