"""The error both backends' Merkle tree stores raise when a tree cannot be used."""

from __future__ import annotations


class MerkleStoreError(Exception):
    """The store's files cannot be used: unknown format, an I/O failure, or the store is closed."""
