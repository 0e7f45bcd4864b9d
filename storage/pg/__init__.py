"""The PostgreSQL backend: the same ledger, index, receipts and checkpoints, in one database.

  sql.py      every SQL statement of this backend (schema and queries), nothing else
  connect.py  the connection pool, the schema (created and versioned on first use), clear errors
"""
