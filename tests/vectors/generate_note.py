"""Write the golden C2SP vectors (docs/FORMAT.md §22): the vector key's note verifier key, the receipt
vector's checkpoint as a signed note, and the tlog-proof of memory#2 (seq 2) of `receipt_v2.json`.

Run from the repository root: `python tests/vectors/generate_note.py`. Deterministic: the receipt vector's
fixed seed (Ed25519 signatures are deterministic) and its committed receipt. The event the proof is for is
line 3 of `receipt_v1_ledger.jsonl` (seq 2). tests/vectors/test_vectors_note.py checks the code reproduces the files
exactly and that they verify; tests/core/test_tlog_go.py has Go's own packages read them.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from receipts.body import parse_receipt  # noqa: E402
from receipts.keys import SigningKey  # noqa: E402
from receipts.note import sign_checkpoint_note, verifier  # noqa: E402
from receipts.tlog_proof import tlog_proof_for  # noqa: E402

OUT = Path(__file__).resolve().parent
SEED = hashlib.sha256(b"mre test vector signing key").digest()  # generate_receipt.py's
SEQ = 2


def build() -> dict[str, str]:
    key = SigningKey.from_seed(SEED)
    receipt = parse_receipt((OUT / "receipt_v2.json").read_bytes())
    return {
        "note_v1_vkey.txt": verifier(key.public_key).vkey() + "\n",
        "note_v1_checkpoint.txt": sign_checkpoint_note(receipt.signed_body["checkpoint"], key),
        "note_v1_seq2.tlog-proof": tlog_proof_for(receipt, SEQ, key),
    }


def main() -> None:
    for name, text in build().items():
        (OUT / name).write_text(text, encoding="utf-8")
    print(f"wrote note vectors to {OUT}")


if __name__ == "__main__":
    main()
