"""Write the golden erasure-certificate vector (docs/FORMAT.md §16).

Run from the repository root: `python tests/vectors/generate_erasure_cert.py`.
Deterministic: fixed salts, ids and times, the receipt vector's Ed25519 seed (so
tests/vectors/receipt_v1_pubkey.json is its trusted key), the reference Merkle code.

The session: a memory (seq 0), an answer that quoted it (seq 1), two more events,
then the memory and the answer erased together and the erasure record appended
(seq 4): one record, so the body's `records` holds one item (an erasure of more than
64 events has one record per 64, all listed there in seq order). `erasure_cert_v1_ledger.jsonl` is that ledger after the erasure;
tests/services/test_control_certificate.py checks the code reproduces every file exactly.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ledger.canonical import canonical_json  # noqa: E402
from ledger.event import GENESIS, Event, content_commitment, make_event  # noqa: E402
from receipts import body as rbody  # noqa: E402
from receipts import certificate as cert  # noqa: E402
from receipts.keys import SigningKey  # noqa: E402
from receipts.merkle import inclusion_proof, leaf_hash, root_from_leaf_hashes  # noqa: E402

OUT = Path(__file__).resolve().parent
SESSION = "vector-erasure"
SEED = hashlib.sha256(b"mre test vector signing key").digest()
TS = "2026-01-02T03:04:05.000000Z"
ERASED_AT = "2026-01-02T04:00:00.000000Z"
MESSAGES = [
    ("user", "My locker code word is Quuxberry", {"kind": "chat"}),
    ("assistant", "From what I remember: My locker code word is Quuxberry", {"kind": "chat", "receipt_id": "rcpt_" + "1" * 32}),
    ("user", "I moved to Lisbon in March", {"kind": "chat"}),
    ("assistant", "Lisbon, since March.", {"kind": "chat", "receipt_id": "rcpt_" + "2" * 32}),
]
ERASE = (0, 1)
WITHDRAWN = ["rcpt_" + "1" * 32]


def commit_of(ev: Event) -> str:
    return content_commitment(bytes.fromhex(ev.salt), ev.text, ev.meta).hex()


def erased_line(ev: Event) -> bytes:
    """The erased ledger line (docs/FORMAT.md §4.4): JCS of the ten kept fields, commit in place of text/meta/salt."""
    d = ev.to_dict()
    for k in ("text", "meta", "salt"):
        del d[k]
    d["commit"] = commit_of(ev)
    return canonical_json(d) + b"\n"


def build_events() -> tuple[list[Event], Event]:
    events: list[Event] = []
    prev = GENESIS
    for seq, (role, text, meta) in enumerate(MESSAGES):
        ev = make_event(
            session=SESSION, seq=seq, prev=prev, role=role, text=text, meta=meta, ts=TS,
            event_id="evt_" + hashlib.sha256(b"erasure vector event %d" % seq).hexdigest()[:32],
            salt=hashlib.sha256(b"erasure vector salt %d" % seq).digest(),
        )
        events.append(ev)
        prev = bytes.fromhex(ev.chain)
    entries = [{"seq": s, "id": events[s].id, "digest": events[s].digest, "commit": commit_of(events[s])} for s in ERASE]
    record = make_event(
        session=SESSION, seq=len(events), prev=prev, role="system", text=f"[erasure record: {len(ERASE)} event(s) erased]",
        meta={"erasure": {"v": 1, "erased": entries, "reason": "the visitor asked"}}, ts=ERASED_AT,
        event_id="evt_" + hashlib.sha256(b"erasure vector record").hexdigest()[:32],
        salt=hashlib.sha256(b"erasure vector record salt").digest(),
    )
    return events, record


def build() -> dict[str, str]:
    key = SigningKey.from_seed(SEED)
    events, record = build_events()
    everything = [*events, record]
    leaves = [leaf_hash(bytes.fromhex(e.digest)) for e in everything]
    size = len(everything)
    checkpoint = rbody.sign_checkpoint(
        session=SESSION, tree_size=size, root=root_from_leaf_hashes(leaves), chain_head=record.chain, issued_at=ERASED_AT, key=key
    )
    erased: list[dict[str, Any]] = []
    for s in ERASE:
        hashed = {**events[s].to_dict(), "commit": commit_of(events[s])}
        erased.append(cert.erased_entry(hashed, inclusion_proof(leaves, s)))
    body = cert.events_body(
        session=SESSION, erased=erased, redacted=[], withdrawn=WITHDRAWN,
        records=[(record.to_dict(), inclusion_proof(leaves, record.seq))], checkpoint=checkpoint, issued_at=ERASED_AT,
    )
    ledger = b"".join(erased_line(e) if e.seq in ERASE else e.to_line() for e in everything)
    return {
        "erasure_cert_v1.json": cert.certificate_file_bytes(cert.sign_certificate(body, key)).decode("utf-8"),
        "erasure_cert_v1_body.json": json.dumps(body, indent=2, ensure_ascii=False) + "\n",
        "erasure_cert_v1_ledger.jsonl": ledger.decode("utf-8"),
    }


def main() -> None:
    for name, text in build().items():
        (OUT / name).write_text(text, encoding="utf-8")
    print(f"wrote erasure certificate vectors to {OUT}")


if __name__ == "__main__":
    main()
