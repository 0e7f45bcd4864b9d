"""Write the golden vectors of the ledger format (docs/FORMAT.md).

Run from the repository root: `python tests/vectors/generate.py`. The output is
committed; tests/core/test_ledger.py checks the code still reproduces it byte for
byte, so a change to any hash shows up as a vector diff (= a format change).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ledger.canonical import canonical_json  # noqa: E402
from ledger.event import GENESIS, TAG_CHAIN, TAG_CONTENT, TAG_EVENT, make_event  # noqa: E402

OUT = Path(__file__).resolve().parent

INPUTS = [
    {"role": "system", "text": "", "meta": {}, "ts": "2024-01-01T00:00:00.000000Z"},
    {
        "role": "user",
        "text": "Caroline: I went to the LGBTQ support group yesterday 🏳️‍🌈",
        "meta": {"dia_id": "D1:3", "session": 1, "speaker": "Caroline", "tags": ["a", None, True, -9007199254740991]},
        "ts": "2023-05-08T13:56:00.000000Z",
    },
    {
        "role": "assistant",
        "text": "Quote \" backslash \\ tab \t newline \n control \u0001 del \u007f é ℵ 𝄞 \u2028",
        "meta": {"nested": {"z": 1, "a": [1, 2, {"b": "c"}]}, "A": 0},
        "ts": "2026-12-02T14:41:10.123456Z",
    },
    {"role": "tool", "text": "tool output", "meta": {"tool": "search"}, "ts": "2026-12-02T14:41:11.000001Z"},
]


def main() -> None:
    session = "vector-session_1"
    prev = GENESIS
    vectors = []
    lines = []
    for seq, inp in enumerate(INPUTS):
        salt = hashlib.sha256(b"vector salt %d" % seq).digest()
        event_id = "evt_" + hashlib.sha256(b"vector id %d" % seq).hexdigest()[:32]
        ev = make_event(
            session=session, seq=seq, prev=prev, role=inp["role"], text=inp["text"], meta=inp["meta"],
            ts=inp["ts"], event_id=event_id, salt=salt,
        )
        content = canonical_json({"meta": inp["meta"], "text": inp["text"]})
        commit = hashlib.sha256(TAG_CONTENT + salt + content).digest()
        hashed = canonical_json(
            {"commit": commit.hex(), "id": event_id, "role": inp["role"], "seq": seq, "session": session, "ts": inp["ts"], "v": 1}
        )
        digest = hashlib.sha256(TAG_EVENT + hashed).digest()
        chain = hashlib.sha256(TAG_CHAIN + prev + digest).digest()
        assert digest.hex() == ev.digest and chain.hex() == ev.chain
        vectors.append(
            {
                "input": {"session": session, "seq": seq, "prev": prev.hex(), "id": event_id, "salt": salt.hex(), **inp},
                "content_canonical_hex": content.hex(),
                "commitment": commit.hex(),
                "hashed_fields_canonical": hashed.decode("utf-8"),
                "digest": digest.hex(),
                "chain": chain.hex(),
                "line": ev.to_line().decode("utf-8"),
            }
        )
        lines.append(ev.to_line())
        prev = chain
    (OUT / "ledger_v1.json").write_text(json.dumps({"format": 1, "vectors": vectors}, indent=2, ensure_ascii=False) + "\n")
    (OUT / "ledger_v1_session.jsonl").write_bytes(b"".join(lines))
    print(f"wrote {len(vectors)} vectors to {OUT}")


if __name__ == "__main__":
    main()
