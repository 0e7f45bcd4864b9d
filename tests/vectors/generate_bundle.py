"""Write the golden session-bundle vector (docs/FORMAT.md §21).

Run from the repository root: `python tests/vectors/generate_bundle.py`. Deterministic: the memory-states vector's
ledger and receipt (receipt_v2_states_*), its receipt's own signed checkpoint (it covers the whole ledger), the
receipt vectors' Ed25519 key (receipt_v1_pubkey.json), a fixed export time, and a zip written here with stored
(uncompressed) members and a fixed member time, so the file does not depend on the zlib in use.

- `bundle_v1_manifest.json`: the manifest (the DSSE payload), canonical JSON;
- `bundle_v1_manifest.dsse.json`: the signed envelope, as the bundle stores it;
- `bundle_v1.mre.zip`: the whole bundle (`python -m bundle verify tests/vectors/bundle_v1.mre.zip --trust
  tests/vectors/receipt_v1_pubkey.json` says VERIFIED).

And the witnessed bundle (§21.1), of the witnessed receipt vector (receipt_v2_witnessed_*, generate_witnessed.py):

- `bundle_v1_witnessed.note` (its member notes/5.note): its witnessed tree head as a signed note with the witness's cosignature (bundle.notes);
- `bundle_v1_witnessed_manifest.json`, `bundle_v1_witnessed_manifest.dsse.json`: its manifest and envelope;
- `bundle_v1_witnessed.mre.zip`: the whole bundle (`python -m bundle verify tests/vectors/bundle_v1_witnessed.mre.zip
  --trust tests/vectors/receipt_v1_pubkey.json --policy tests/vectors/witness_v1.policy` says VERIFIED).

tests/vectors/test_vectors_bundle.py checks the code reproduces the manifest and envelope byte for byte, and that the
committed bundle still verifies (old bundles keep verifying); tests/vectors/test_vectors_bundle_witnessed.py the same
for the witnessed one, and its note.
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
from bundle.notes import NoteCollector  # noqa: E402
from ledger.canonical import canonical_json  # noqa: E402
from receipts.dsse import sign_envelope  # noqa: E402
from receipts.keys import SigningKey, format_public_key  # noqa: E402

OUT = Path(__file__).resolve().parent
SEED = hashlib.sha256(b"mre test vector signing key").digest()  # the key of receipt_v1_pubkey.json
SESSION = "vector-states"
EXPORTED_AT = "2026-01-02T03:05:00.000000Z"
ZIP_TIME = (2026, 1, 2, 3, 5, 0)


def members(vector: str = "receipt_v2_states") -> dict[str, bytes]:
    key = SigningKey.from_seed(SEED)
    receipt = (OUT / f"{vector}.json").read_bytes()
    body = json.loads((OUT / f"{vector}_body.json").read_text("utf-8"))
    rid = body["receipt_id"]
    files = {
        "ledger/events.jsonl": (OUT / f"{vector}_ledger.jsonl").read_bytes(),
        "checkpoint.json": canonical_json(body["checkpoint"]),
        f"receipts/{rid}.json": receipt,
        key_member(key.key_id): format_public_key(key.public_key).encode("utf-8"),
    }
    notes = NoteCollector(key)  # §21.1: none for a receipt no witness cosigned
    notes.add(receipt)
    return {**files, **dict(notes.members())}


def build(vector: str = "receipt_v2_states", session: str = SESSION, prefix: str = "bundle_v1") -> dict[str, bytes]:
    key = SigningKey.from_seed(SEED)
    files = members(vector)
    ledger = files["ledger/events.jsonl"]
    last = json.loads(ledger.splitlines()[-1])
    payload = build_manifest(
        session=session, exported_at=EXPORTED_AT, events=len(ledger.splitlines()), chain_head=last["chain"], signer=key.key_id,
        members=[Member(name, len(data), hashlib.sha256(data).hexdigest()) for name, data in files.items()],
    )
    envelope = canonical_json(sign_envelope(payload, MANIFEST_PAYLOAD_TYPE, key))
    return {f"{prefix}_manifest.json": payload, f"{prefix}_manifest.dsse.json": envelope, **{f"member:{n}": d for n, d in files.items()}}


def build_witnessed() -> dict[str, bytes]:
    """The bundle of the witnessed receipt vector: its note (notes/5.note) and its manifest and envelope."""
    return build("receipt_v2_witnessed", "vector-witnessed", "bundle_v1_witnessed")


def write_zip(path: Path, built: dict[str, bytes], prefix: str = "bundle_v1") -> None:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
        for name, data in sorted((n.removeprefix("member:"), d) for n, d in built.items() if n.startswith("member:")):
            z.writestr(zipfile.ZipInfo(name, ZIP_TIME), data)
        z.writestr(zipfile.ZipInfo(MANIFEST_NAME, ZIP_TIME), built[f"{prefix}_manifest.dsse.json"])


def main() -> None:
    built = build()
    for name in ("bundle_v1_manifest.json", "bundle_v1_manifest.dsse.json"):
        (OUT / name).write_bytes(built[name])
    write_zip(OUT / "bundle_v1.mre.zip", built)
    witnessed = build_witnessed()
    for name in ("bundle_v1_witnessed_manifest.json", "bundle_v1_witnessed_manifest.dsse.json"):
        (OUT / name).write_bytes(witnessed[name])
    (OUT / "bundle_v1_witnessed.note").write_bytes(witnessed["member:notes/5.note"])
    write_zip(OUT / "bundle_v1_witnessed.mre.zip", witnessed, "bundle_v1_witnessed")
    print(f"wrote bundle vectors to {OUT}")


if __name__ == "__main__":
    main()
