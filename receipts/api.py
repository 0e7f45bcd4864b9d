"""The one entry point the CLI, the app and MCP share for verifying a receipt."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from .audit import Auditor
from .body import parse_receipt
from .keys import KeyConfigError, PublicKey, parse_public_key
from .verify import Report, verify_receipt


def data_dir_key(data_dir: str | os.PathLike[str]) -> PublicKey | None:
    """The public key a data directory signs with (DATA_DIR/keys/signing.pub), if present."""
    path = Path(data_dir) / "keys" / "signing.pub"
    if not path.is_file():
        return None
    return parse_public_key(path.read_text(encoding="utf-8"), source=str(path))


def load_trust(paths: Sequence[str | os.PathLike[str]]) -> list[PublicKey]:
    keys = []
    for p in paths:
        try:
            text = Path(p).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise KeyConfigError(source=str(p), expected="a readable public key file", found=type(exc).__name__) from None
        keys.append(parse_public_key(text, source=str(p)))
    return keys


def verify_bytes(
    raw: bytes,
    *,
    trusted: Sequence[PublicKey] = (),
    data_dir: str | os.PathLike[str] | None = None,
    full: bool = False,
) -> Report:
    """Parse and verify a receipt. Raises MalformedReceipt for input that is not a receipt.

    With `data_dir`, the ledger checks run too, and when no key is given the
    data directory's own public key is trusted.
    """
    receipt = parse_receipt(raw)
    keys = list(trusted)
    if data_dir is None:
        return verify_receipt(receipt, keys, None)
    if not keys:
        own = data_dir_key(data_dir)
        if own is not None:
            keys.append(own)
    with Auditor(data_dir, full=full).facts(receipt.session) as facts:
        return verify_receipt(receipt, keys, facts)
