"""Write the golden session-bundle vector (docs/FORMAT.md §21).

Run from the repository root: `python tests/vectors/generate_bundle.py`. Deterministic: the memory-states vector's
ledger and receipt (receipt_v2_states_*), its receipt's own signed checkpoint (it covers the whole ledger), the
receipt vectors' Ed25519 key (receipt_v1_pubkey.json), a fixed export time, and a zip written here with stored
(uncompressed) members and a fixed member time, so the file does not depend on the zlib in use.

- `bundle_v1_manifest.json`: the manifest (the DSSE payload), canonical JSON;
- `bundle_v1_manifest.dsse.json`: the signed envelope, as the bundle stores it;
- `bundle_v1.mre.zip`: the whole bundle (`python -m bundle verify tests/vectors/bundle_v1.mre.zip --trust
  tests/vectors/receipt_v1_pubkey.json` says VERIFIED).

tests/vectors/test_vectors_bundle.py checks the code reproduces the manifest and envelope byte for byte, and that the
committed bundle still verifies (old bundles keep verifying).
"""

from __future__ import annotations

import hashlib
import json
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bundle.format import MANIFEST_NAME, MANIFEST_PAYLOAD_TYPE, Member, build_manifest, key_member  # noqa: E402
from ledger.canonical import canonical_json  # noqa: E402
from receipts.dsse import sign_envelope  # noqa: E402
from receipts.keys import SigningKey, format_public_key  # noqa: E402

OUT = Path(__file__).resolve().parent
SEED = hashlib.sha256(b"mre test vector signing key").digest()  # the key of receipt_v1_pubkey.json
SESSION = "vector-states"
EXPORTED_AT = "2026-01-02T03:05:00.000000Z"
ZIP_TIME = (2026, 1, 2, 3, 5, 0)


def members() -> dict[str, bytes]:
    key = SigningKey.from_seed(SEED)
    receipt = (OUT / "receipt_v2_states.json").read_bytes()
    body = json.loads((OUT / "receipt_v2_states_body.json").read_text("utf-8"))
    rid = body["receipt_id"]
    return {
        "ledger/events.jsonl": (OUT / "receipt_v2_states_ledger.jsonl").read_bytes(),
        "checkpoint.json": canonical_json(body["checkpoint"]),
        f"receipts/{rid}.json": receipt,
        key_member(key.key_id): format_public_key(key.public_key).encode("utf-8"),
    }


def build() -> dict[str, bytes]:
    key = SigningKey.from_seed(SEED)
    files = members()
    ledger = files["ledger/events.jsonl"]
    last = json.loads(ledger.splitlines()[-1])
    payload = build_manifest(
        session=SESSION, exported_at=EXPORTED_AT, events=len(ledger.splitlines()), chain_head=last["chain"], signer=key.key_id,
        members=[Member(name, len(data), hashlib.sha256(data).hexdigest()) for name, data in files.items()],
    )
    envelope = canonical_json(sign_envelope(payload, MANIFEST_PAYLOAD_TYPE, key))
    return {"bundle_v1_manifest.json": payload, "bundle_v1_manifest.dsse.json": envelope, **{f"member:{n}": d for n, d in files.items()}}


def write_zip(path: Path, built: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
        for name, data in sorted((n.removeprefix("member:"), d) for n, d in built.items() if n.startswith("member:")):
            z.writestr(zipfile.ZipInfo(name, ZIP_TIME), data)
        z.writestr(zipfile.ZipInfo(MANIFEST_NAME, ZIP_TIME), built["bundle_v1_manifest.dsse.json"])


def main() -> None:
    built = build()
    for name in ("bundle_v1_manifest.json", "bundle_v1_manifest.dsse.json"):
        (OUT / name).write_bytes(built[name])
    write_zip(OUT / "bundle_v1.mre.zip", built)
    print(f"wrote bundle vectors to {OUT}")


if __name__ == "__main__":
    main()
