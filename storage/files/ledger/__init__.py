"""The file backend's ledger: sessions/<s>/events.jsonl, tail records, recovery, erasure, repair."""
