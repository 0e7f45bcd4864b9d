"""Write the golden vectors of an erased ledger (docs/FORMAT.md §4.4, §4.5).

Run from the repository root: `python tests/vectors/generate_erased.py`. It reads
the four events of tests/vectors/ledger_v1_session.jsonl, erases seq 2 and
appends the erasure record with a fixed id, salt and time. The output is
committed; tests/vectors/test_vectors_erased.py checks the code reproduces it byte for
byte and that it verifies.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from ledger.event import (  # noqa: E402
    erased_form,
    erasure_record_meta,
    erasure_record_text,
    event_from_dict,
    make_event,
)

OUT = Path(__file__).resolve().parent
ERASED = [2]
REASON = "golden vector: the visitor asked to forget it"
RECORD_TS = "2026-12-03T12:00:00.000000Z"


def build() -> tuple[bytes, dict[str, object]]:
    original = (OUT / "ledger_v1_session.jsonl").read_bytes().splitlines(keepends=True)
    events = [event_from_dict(orjson.loads(line), n + 1) for n, line in enumerate(original)]
    gone = [erased_form(events[s]) for s in ERASED]
    for e in gone:
        events[e.seq] = e
    last = events[-1]
    record = make_event(
        session=last.session,
        seq=last.seq + 1,
        prev=bytes.fromhex(last.chain),
        role="system",
        text=erasure_record_text(len(gone)),
        meta=erasure_record_meta(gone, REASON),
        ts=RECORD_TS,
        event_id="evt_" + hashlib.sha256(b"vector erasure record id").hexdigest()[:32],
        salt=hashlib.sha256(b"vector erasure record salt").digest(),
    )
    lines = [e.to_line() for e in events] + [record.to_line()]
    described = {
        "format": 1,
        "session": last.session,
        "from": "ledger_v1_session.jsonl",
        "erased": [
            {
                "seq": e.seq,
                "original_line": original[e.seq].decode("utf-8"),
                "commit": e.commit,
                "digest": e.digest,
                "erased_line": e.to_line().decode("utf-8"),
            }
            for e in gone
        ],
        "record": {"seq": record.seq, "reason": REASON, "ts": RECORD_TS, "line": record.to_line().decode("utf-8")},
        "verify": {"ok": True, "events": len(lines), "head": record.chain, "erased": ERASED},
    }
    return b"".join(lines), described


def main() -> None:
    data, described = build()
    (OUT / "ledger_v1_erased.jsonl").write_bytes(data)
    (OUT / "ledger_v1_erased.json").write_text(json.dumps(described, indent=2, ensure_ascii=False) + "\n")
    lines = data.count(b"\n")
    print(f"wrote ledger_v1_erased.jsonl ({lines} lines) and ledger_v1_erased.json to {OUT}")


if __name__ == "__main__":
    main()
