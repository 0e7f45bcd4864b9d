"""A lock per key (a session, a cache folder) for the threads of one process, kept only while it is used.

A long-running app that serves a new session id on every visit must not keep one lock per id it ever saw. An
entry is removed (under the guard) only when no thread holds or waits for it, and a thread counts itself in before
it waits: so two threads of one key always wait on the same lock, as with a lock kept forever. Used by the turn
locks (storage.files.receipts.files, storage.pg.receipts) and the verifier's cache folders (storage.files.receipts.audit).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class _Entry:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0  # threads holding or waiting for `lock`


class KeyedLocks:
    """`with locks.held(key):` — one holder per key at a time; other keys are not held up. Safe for many threads."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._entries: dict[str, _Entry] = {}

    def __len__(self) -> int:
        """Keys whose lock a thread holds or waits for now."""
        with self._guard:
            return len(self._entries)

    def users(self, key: str) -> int:
        """Threads holding or waiting for `key`'s lock now (0: no entry)."""
        with self._guard:
            entry = self._entries.get(key)
            return 0 if entry is None else entry.users

    @contextmanager
    def held(self, key: str) -> Iterator[None]:
        with self._guard:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry()
            entry.users += 1
        try:
            with entry.lock:
                yield
        finally:
            with self._guard:
                entry.users -= 1
                if entry.users == 0:
                    del self._entries[key]
