"""The PostgreSQL backend: the same ledger, index, receipts and checkpoints, in one database.

  sql.py      every SQL statement of this backend (schema and queries), nothing else
  connect.py  the connection pool, the schema (created and versioned on first use), clear errors
  receipts.py receipt envelopes, cited-seq rows, `.cites` records, checkpoints, the turn lock (receipts.stores)
  merkle.py   the producer's Merkle tree as rows of complete subtrees (storage.files.receipts.merkle_store's interface)
  (moved to storage/migrate_receipts.py) `ledger migrate`'s step for receipts, .cites records, checkpoints and trees
"""
