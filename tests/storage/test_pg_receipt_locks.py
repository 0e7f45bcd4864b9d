"""PgReceipts' per-process session locks (ledger.locks.KeyedLocks): an entry lives only while a thread
holds or waits for it, so a long-running app keeps none for the sessions it served, and the locking is what it was
with a lock kept forever — one holder per session at a time, other sessions not held up."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from ledger.locks import KeyedLocks

RID = "rcpt_" + "a" * 32


def _until(check: Any, timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.01)
    return False


class TestKeyedLocks:
    def test_no_entry_is_kept_after_many_sessions_held_one_after_another(self) -> None:
        locks = KeyedLocks()
        for n in range(1000):
            with locks.held(f"s{n}"):
                assert len(locks) == 1
        assert len(locks) == 0

    def test_a_holder_that_raises_leaves_no_entry_and_the_lock_free(self) -> None:
        locks = KeyedLocks()
        with pytest.raises(RuntimeError), locks.held("s1"):
            raise RuntimeError("the model failed")
        assert len(locks) == 0
        got = threading.Event()

        def again() -> None:
            with locks.held("s1"):
                got.set()

        t = threading.Thread(target=again)
        t.start()
        t.join(timeout=10)
        assert got.is_set() and len(locks) == 0

    def test_a_waiter_keeps_the_entry_and_gets_the_lock_only_after_the_holder(self) -> None:
        locks = KeyedLocks()
        waiting, got = threading.Event(), threading.Event()

        def second() -> None:
            waiting.set()
            with locks.held("s1"):
                got.set()

        with locks.held("s1"):
            t = threading.Thread(target=second)
            t.start()
            assert waiting.wait(10)
            time.sleep(0.2)
            assert not got.is_set(), "a second thread took the lock the first one holds"
            assert len(locks) == 1  # one entry, shared by the holder and the waiter
        t.join(timeout=10)
        assert got.is_set() and len(locks) == 0

    def test_another_session_is_not_held_up(self) -> None:
        locks = KeyedLocks()
        got = threading.Event()

        def other() -> None:
            with locks.held("s2"):
                got.set()

        with locks.held("s1"):
            t = threading.Thread(target=other)
            t.start()
            t.join(timeout=10)
            assert got.is_set()
            assert len(locks) == 1
        assert len(locks) == 0

    def test_threads_of_one_session_never_hold_it_together_while_entries_come_and_go(self) -> None:
        """Many threads over a few sessions, each entry removed whenever no one holds or waits for it: never two
        holders of one session at once."""
        locks = KeyedLocks()
        inside = {f"s{n}": 0 for n in range(3)}
        overlaps: list[str] = []
        guard = threading.Lock()

        def worker(n: int) -> None:
            for i in range(200):
                session = f"s{(n + i) % 3}"
                with locks.held(session):
                    with guard:
                        inside[session] += 1
                        if inside[session] > 1:
                            overlaps.append(session)
                    time.sleep(0)  # let another thread run while this one holds the lock
                    with guard:
                        inside[session] -= 1

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert overlaps == [] and len(locks) == 0


@pytest.fixture
def store(pg_url: str) -> Iterator[Any]:
    from storage.pg.connect import Database
    from storage.pg.receipts import PgReceipts

    with Database(pg_url, max_size=4) as db, PgReceipts(db) as receipts:
        yield receipts


@pytest.mark.pg
class TestPgReceiptsTurnLocks:
    def test_a_store_that_served_many_sessions_keeps_no_lock_entry_for_them(self, store: Any) -> None:
        for n in range(50):
            session = f"visitor{n}"
            with store.turn_lock(session):
                store.write_cites(session, RID, 1, [0])
        assert len(store._locks) == 0
        assert [len(store.pending_cites(f"visitor{n}")) for n in (0, 49)] == [1, 1]

    def test_a_turn_waiting_for_the_session_keeps_its_entry_until_it_is_done(self, store: Any) -> None:
        got = threading.Event()

        def second() -> None:
            with store.turn_lock("s1"):
                got.set()

        with store.turn_lock("s1"):
            t = threading.Thread(target=second)
            t.start()
            assert _until(lambda: store._locks.users("s1") == 2), "the second turn never came to wait"
            time.sleep(0.2)
            assert not got.is_set(), "a second turn of the session ran while the first held its lock"
        t.join(timeout=30)
        assert got.is_set() and len(store._locks) == 0
