"""The one entry point the CLI, the app and MCP share for verifying a receipt."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from receipts.body import parse_receipt
from receipts.cosignature import Policy
from receipts.keys import PUBLIC_FILENAME, KeyConfigError, PublicKey, parse_public_key
from receipts.verify import Report, verify_receipt
from storage.common.keyfiles import keys_dir, legacy_keys_dir
from storage.files.receipts.audit import Auditor
from storage.files.receipts.ledger_copy import LineSource, ledger_dir


def data_dir_key(data_dir: str | os.PathLike[str]) -> PublicKey | None:
    """The public key a data directory says it signs with, if present: its keys folder's ``signing.pub``
    (receipts.keys.keys_dir), else the old place ``DATA_DIR/keys/signing.pub``. Reads only; never trusted.

    Whoever hands over a data directory also chose this file: it can show that a
    receipt is *self-consistent* with the directory, never that it is authentic.
    """
    for folder in (keys_dir(data_dir), legacy_keys_dir(data_dir)):
        path = folder / PUBLIC_FILENAME
        if path.is_file() and not path.is_symlink():
            return parse_public_key(path.read_text(encoding="utf-8"), source=str(path))
    return None


MAX_TRUST_BYTES = 64 * 1024  # a trust file is one short JSON object (§9)


def load_trust(paths: Sequence[str | os.PathLike[str]]) -> list[PublicKey]:
    keys = []
    expected = "a public key file (what `python -m receipts pubkey DATA_DIR` prints)"
    for p in paths:
        if not str(p).strip():
            raise KeyConfigError(source="--trust", expected=expected, found="an empty path")
        if Path(p).exists() and not Path(p).is_file():  # /dev/zero, a FIFO: never read to its end
            raise KeyConfigError(source=str(p), expected=expected, found="a directory" if Path(p).is_dir() else "not a regular file")
        try:
            with open(p, "rb") as f:
                data = f.read(MAX_TRUST_BYTES + 1)
            if len(data) > MAX_TRUST_BYTES:
                raise KeyConfigError(source=str(p), expected=expected, found=f"a file over {MAX_TRUST_BYTES:,} bytes")
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise KeyConfigError(source=str(p), expected=expected, found="bytes that are not UTF-8 text") from None
        except IsADirectoryError:
            raise KeyConfigError(source=str(p), expected=expected, found="a directory") from None
        except OSError as exc:  # as a person reads it ("No such file or directory"), never the exception's class
            raise KeyConfigError(source=str(p), expected=expected, found=(exc.strerror or "an unreadable file").lower()) from None
        keys.append(parse_public_key(text, source=str(p)))
    return keys


def verify_bytes(
    raw: bytes,
    *,
    trusted: Sequence[PublicKey] = (),
    data_dir: str | os.PathLike[str] | None = None,
    full: bool = False,
    source: LineSource | None = None,
    policy: Policy | None = None,
) -> Report:
    """Parse and verify a receipt. Raises MalformedReceipt for input that is not a receipt.

    Only the keys in `trusted` are trusted. With `data_dir`, the ledger checks
    run too; a key found with the data directory is never trusted (whoever
    hands over a directory chose it): with no trusted key the signatures are
    checked against it for self-consistency only, those rows are
    "not_verifiable", and the verdict is never "verified".

    `source`: the ledger is kept there (PostgreSQL's PgLedger), not in `data_dir`, which then only holds the
    key; its lines are audited from a private copy (storage.files.receipts.ledger_copy).
    """
    receipt = parse_receipt(raw)
    keys = list(trusted)
    if data_dir is None:
        return verify_receipt(receipt, keys, None, policy=policy)
    own = None
    if not keys:
        try:
            own = data_dir_key(data_dir)
        except (KeyConfigError, OSError, UnicodeDecodeError):
            own = None  # unreadable: the rows say no key was found
    with ledger_dir(data_dir, receipt.session, source) as where, Auditor.of(where, full=full).facts(receipt.session) as facts:
        return verify_receipt(receipt, keys, facts, untrusted=own, policy=policy)
