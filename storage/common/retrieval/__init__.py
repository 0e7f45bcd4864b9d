"""The retrieval algorithm both backends run: indexing, search, housekeeping, over a connection each supplies."""
