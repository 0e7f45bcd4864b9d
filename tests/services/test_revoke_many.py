"""A session with more than 10,000 revoke/restore events still answers (issue 11).

Control events get no row in the index (retrieval.indexing.skipped), so a turn excludes only what is revoked now,
never every control event ever made; an exclude set of any size is filtered in SQLite before the LIMIT, no cap. An
index kept up to date and one rebuilt from the ledger hold the same rows.
"""

from __future__ import annotations

import pytest

from chat.engine import Engine
from control.revocation import current, revoked_seqs
from ledger.controls import CONTROL_TEXTS, control_meta
from ledger.messages import Message
from receipts.body import parse_receipt
from storage.files.receipts.api import verify_bytes
from storage.files.retrieval.db import Index

from ..forget_support import engine

CONTROLS = 10_001  # revoke, restore, … ending on a revoke


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    eng = engine(tmp_path_factory.mktemp("many") / "d")
    eng.remember("alice", "I adopted a grey cat named Miso")  # 0
    target = eng.remember("alice", "I moved to Lisbon in March")  # 1
    eng.remember("alice", "My sister is called Ana")  # 2
    eng.turn("alice", "Where did I move, and what is my cat called?")  # 3, 4: its index rows go before the controls
    batch = [
        Message("system", CONTROL_TEXTS[action], control_meta(action, target.seq, target.id, None))
        for action in (("revoke", "restore")[i % 2] for i in range(CONTROLS))
    ]
    eng.ledger.append_many("alice", batch)  # straight into the ledger: one write
    eng.index.index_session("alice")  # the index kept up to date (a rebuild is compared with it)
    return eng


def _rows(index: Index) -> list[tuple[int, str, str]]:
    with index.read() as conn:
        return [(int(r[0]), str(r[1]), str(r[2])) for r in conn.execute("SELECT seq, text, context FROM events ORDER BY id")]


def test_a_session_with_more_than_ten_thousand_control_events_still_answers_without_the_revoked_memory(busy: Engine) -> None:
    count = busy.ledger.head("alice")[0]
    assert count == 5 + CONTROLS and revoked_seqs(busy.data_dir, "alice", ledger=busy.ledger) == {1: count - 1}
    turn = busy.turn("alice", "Where did I move, and what is my cat called?")
    assert 1 not in [h.seq for h in turn.hits] and 0 in [h.seq for h in turn.hits]
    entries = parse_receipt(turn.receipt_path.read_bytes()).signed_body["exclusions"]["revoked"]
    assert [(e["seq"], e["control"]["event"]["seq"]) for e in entries] == [(1, count - 1)]
    report = verify_bytes(turn.receipt_path.read_bytes(), trusted=[busy.key.public_key], data_dir=busy.data_dir)
    assert report.verdict == "verified", [(c.name, c.message) for c in report.checks if c.status != "pass"]


def test_control_events_get_no_index_row_and_a_rebuild_gives_the_same_rows(busy: Engine) -> None:
    kept = _rows(busy.index)
    assert not [seq for seq, text, _ in kept if text in CONTROL_TEXTS.values()]
    assert not [seq for seq, _, context in kept if "control record" in context], "a control event is nobody's neighbour"
    exclusions = busy._retrieve("alice", "Lisbon cat", 8, [])
    busy.index.rebuild()
    assert _rows(busy.index) == kept
    assert busy._retrieve("alice", "Lisbon cat", 8, []) == exclusions
    assert set(current(busy.ledger, "alice").revoked) == {1}


def test_an_exclude_set_of_any_size_is_searched_without_a_cap(busy: Engine) -> None:
    every = list(range(50_000))  # more seqs than the session holds, and more than the old cap of 10,000
    assert busy.index.search("alice", "cat Lisbon", 8, exclude_seqs=every).results == []
    hits = busy.index.search("alice", "cat Lisbon", 8, exclude_seqs=[*range(5, 30_000), 1]).results
    assert [h.seq for h in hits if h.seq in (0, 1)] == [0]

