"""A session built fast for the erasures of many events: one memory, then N question/answer pairs appended in
one batch (Ledger.append_many), each answer with a format-2 receipt citing the memory, signed here as the chat
engine signs one (receipts.body.build_body over the producer's Merkle tree at the answer's size)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ledger.event import now_ts
from ledger.messages import Message
from receipts import body as rbody
from receipts.keys import SigningKey
from receipts.prompt import TEMPLATE_V1
from storage.common.keyfiles import load_or_create
from storage.files.ledger.store import Ledger
from storage.files.receipts import files

MARKER = "Zyxqolvendrab"
NEEDLES = (b"zyxqolvendr", b"qolvendrab")


def receipt_id(i: int) -> str:
    return "rcpt_" + hashlib.sha256(b"many %d" % i).hexdigest()[:32]


def build(data: Path, answers: int, session: str = "s") -> tuple[Ledger, SigningKey, int, list[int]]:
    """The session: seq 0 the marked memory, then `answers` pairs (question at odd seqs, answer after it), every
    answer quoting the memory and cited by its receipt. Returns (ledger, key, memory seq, answer seqs)."""
    led = Ledger(data)
    key = load_or_create(data)
    (mem,) = led.append_many(session, [Message("user", f"My locker code word is {MARKER}", {"kind": "memory"})])
    msgs = []
    for i in range(answers):
        msgs.append(Message("user", f"question {i}: what is my locker code word?", {"kind": "chat"}))
        msgs.append(Message("assistant", f"From what I remember: My locker code word is {MARKER} ({i})", {"kind": "chat", "receipt_id": receipt_id(i)}))
    events = led.append_many(session, msgs)
    store = files.synced_tree(data, led, session)
    try:
        for i in range(answers):
            q, a = events[2 * i], events[2 * i + 1]
            size = a.seq + 1
            cp = rbody.sign_checkpoint(session=session, tree_size=size, root=store.root(size), chain_head=a.chain, issued_at=now_ts(), key=key)
            body = rbody.build_body(
                receipt_id=receipt_id(i),
                issued_at=now_ts(),
                session=session,
                k=1,
                retrieval="fts5-bm25+collapse/v1",
                query=q,
                query_proof=store.inclusion_proof(q.seq, size),
                memories=[(mem, store.inclusion_proof(mem.seq, size))],
                response=a,
                response_proof=store.inclusion_proof(a.seq, size),
                provider="offline",
                model="stand-in",
                fallback_reason=None,
                template=TEMPLATE_V1,
                prompt_sha256="0" * 64,
                checkpoint=cp,
                receipt_format=rbody.RECEIPT_VERSION_2,
            )
            envelope = rbody.sign_receipt(body, key, rbody.disclosures_for([q, mem, a]))
            files.write_receipt(data, session, receipt_id(i), envelope)
    finally:
        store.close()
    return led, key, mem.seq, [events[2 * i + 1].seq for i in range(answers)]


def files_with_marker(root: Path) -> list[str]:
    return sorted(str(p) for p in root.rglob("*") if p.is_file() and any(n in p.read_bytes().lower() for n in NEEDLES))
