"""Code both backends share (trillian-tessera's storage/internal): the key files in DATA_DIR, durable file
helpers, and the retrieval algorithm (indexing, search, housekeeping) each backend runs over its own SQL."""
