"""Review (issue 14): an erasure on one replica and the receipt copies another replica keeps in its own DATA_DIR.

Every replica writes a copy of each receipt it issues under DATA_DIR/receipt-copies/ (storage.stores.RECEIPT_COPIES).
PgReceipts.replace_receipt / delete_receipt / forget_session only touch the copies folder of the Stores that runs
the forget, so a memory forgotten through replica A stays verbatim in replica B's copies of the receipts B issued.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chat.engine import Engine
from chat.llm import LLM
from control import forget as cf
from storage.stores import pg_stores

from .forget_support import files_with_marker, marked_session

S = "alice"


@pytest.fixture
def two_replicas(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("RECEIPT_SIGNING_KEY", "11" * 32)  # one key for every replica, as docs/guides/scaling-out.md says
    out = []
    for name in ("a", "b"):
        data = tmp_path / name
        data.mkdir()
        stores = pg_stores(pg_url, data, pool_size=2)
        out.append((data, stores, Engine(data, llm=LLM(api_key=""), stores=stores)))
    try:
        yield out
    finally:
        for _d, st, _e in out:
            st.close()


@pytest.mark.pg
def test_forgetting_a_memory_on_one_replica_leaves_no_copy_of_its_words_on_another(two_replicas) -> None:  # type: ignore[no-untyped-def]
    (data_a, stores_a, eng_a), (data_b, _stores_b, eng_b) = two_replicas
    mem, _turns = marked_session(eng_b, S)  # the visitor's turns were answered by replica B
    assert list((data_b / "receipt-copies").rglob("*.json")) == []  # an app replica keeps no copy (fixed: rows only)
    cf.forget(data_a, S, [mem], stores=stores_a, key=eng_a.key)  # the visitor's forget lands on replica A
    assert files_with_marker(data_a) == []
    assert files_with_marker(data_b) == [], "replica B still holds the erased words in its receipt copies"


@pytest.mark.pg
def test_forgetting_a_session_on_one_replica_leaves_no_copy_on_another(two_replicas) -> None:  # type: ignore[no-untyped-def]
    (data_a, stores_a, eng_a), (data_b, _stores_b, eng_b) = two_replicas
    marked_session(eng_b, S)
    cf.forget_session(data_a, S, stores=stores_a, key=eng_a.key)
    left = sorted(p.name for p in (data_b / "receipt-copies").rglob("*.json"))
    assert left == [], f"replica B keeps {len(left)} receipt copies of a deleted session"
