"""Reviewer finding (issue 28 item 3, PostgreSQL with several replicas / data directories): a receipt copy a process
keeps in its own DATA_DIR/receipt-copies/ (`python -m chat` on PostgreSQL, storage.stores receipt_copies=True) is
redacted or deleted only by a forget run with that same DATA_DIR. A forget run on another replica (another DATA_DIR,
the same database) redacts the database's receipt rows and leaves the first replica's copy holding the forgotten word,
and nothing pending tells the first replica to finish it: the word stays on its disk for good.

What is asserted, and when: B's forget runs in another process with another DATA_DIR and cannot reach A's disk, and
the copy A keeps is, by design, the receipt's plain bytes (the visitor reads it with `receipts show`; the test
checks it holds the word before the forget). So no step of B's can remove it; what can be promised is that A never
serves it and does not keep it past its next look at the database: A checks its copies against the rows when its
store opens (start-up) and before it reads, lists or writes a receipt of the session, rewriting a copy whose row was
redacted and deleting one whose row is gone. The test checks each of those two moments, with nothing pending."""

from __future__ import annotations

from pathlib import Path

import pytest

from chat.engine import Engine
from chat.llm import LLM
from control import forget as cf
from storage.stores import pg_stores

from .forget_support import MARKER, files_with_marker

pytestmark = pytest.mark.pg


@pytest.mark.parametrize("then", ["a_reads", "a_restarts"])
def test_a_forget_on_another_replica_leaves_no_receipt_copy_with_the_word(then: str, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_dir.mkdir()
    b_dir.mkdir()
    a = Engine(a_dir, llm=LLM(api_key=""), stores=pg_stores(pg_url, a_dir, receipt_copies=True))  # as `python -m chat` opens it
    b = Engine(b_dir, llm=LLM(api_key=""), stores=pg_stores(pg_url, b_dir))
    try:
        mem = a.remember("s1", f"My locker code word is {MARKER}")
        a.turn("s1", "What is my locker code word?")  # the offline stand-in quotes it; its receipt discloses it
        assert files_with_marker(a_dir / "receipt-copies"), "the copy A keeps holds the word before the forget"
        cf.forget(b_dir, "s1", [mem.seq], stores=b.stores, key=b.key)
        assert cf.pending_sessions(b_dir, b.stores) == []
        (copy,) = (a_dir / "receipt-copies" / "s1").glob("rcpt_*.json")
        if then == "a_reads":  # A's next read of the session's receipts (its download, `receipts show` through it)
            served = a.stores.receipts.read_receipt("s1", copy.stem)
            assert MARKER.encode() not in served
        else:  # A's next start: a new process opening the same DATA_DIR on the database
            pg_stores(pg_url, a_dir, receipt_copies=True).close()
        assert files_with_marker(a_dir) == []
        if copy.exists():  # rewritten from the row: the redacted receipt, byte for byte
            assert copy.read_bytes() == b.stores.receipts.read_receipt("s1", copy.stem)
    finally:
        a.close()
        b.close()
