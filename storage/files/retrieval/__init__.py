"""The file backend's search index: DATA_DIR/index.sqlite (FTS5)."""
