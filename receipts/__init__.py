"""Signed receipts: DSSE envelopes over assistant answers, verifiable offline with a public key."""
