"""The embedded backend: JSONL ledgers, the SQLite FTS5 index, receipt / Merkle / checkpoint / key files, all
under DATA_DIR. Only storage.stores.open_stores names it."""
