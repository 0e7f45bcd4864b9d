"""The file backend's receipts: receipt and cites files, the producer's Merkle tree, checkpoints, audits."""
