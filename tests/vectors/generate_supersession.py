"""Write the golden supersession vectors (docs/FORMAT.md §19).

Run from the repository root: `python tests/vectors/generate_supersession.py`. Deterministic: fixed ids,
salts and times. tests/vectors/test_vectors_supersession.py checks the code reproduces the files byte for byte,
that the ledger verifies and that the parsed records and the derived state are the described ones.

The session: a residence stated, a port stated, a move (the detector's rule supersedes the residence), the
visitor's correction of the port, a model's proposal (checked by a rule) superseding the move, and then the
first residence forgotten — its supersession stays, naming a line that holds no words.

- `ledger_v1_supersession.jsonl`: the ledger (it must verify);
- `ledger_v1_supersession.json`: each record's line, its meta and what it parses to, and the derived state.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from control.state import derive  # noqa: E402
from ledger.event import GENESIS, Event, erased_form, erasure_record_meta, erasure_record_text, make_event  # noqa: E402
from ledger.supersessions import SUPERSEDE_TEXT, supersession_meta, supersession_of  # noqa: E402

OUT = Path(__file__).resolve().parent
SESSION = "vector-supersede"
TS = "2026-03-04T05:06:07.000000Z"
STATEMENTS = {
    0: "I live in Leeds",
    1: "My dev server port is 3000",
    2: "We've just moved to Bristol",
    4: "The dev server runs on 8080 now",
    6: "We live in Bath these days",
}
# record seq -> (new, old, decided_by, checked_by, reason)
RECORDS: dict[int, tuple[int, int, str, str | None, str | None]] = {
    3: (2, 0, "rule:same-attribute", None, "residence changed"),
    5: (4, 1, "visitor", None, None),
    7: (6, 2, "model:vector-model", "rule:shortlist", "new residence"),
}
ERASED = [0]
ERASURE_REASON = "golden vector: the visitor asked to forget it"


def _event(seq: int, prev: str, role: str, text: str, meta: dict[str, Any], name: bytes) -> Event:
    return make_event(
        session=SESSION, seq=seq, prev=bytes.fromhex(prev), role=role, text=text, meta=meta, ts=TS,
        event_id="evt_" + hashlib.sha256(b"supersession vector event " + name).hexdigest()[:32],
        salt=hashlib.sha256(b"supersession vector salt " + name).digest(),
    )


def events() -> list[Event]:
    out: list[Event] = []
    prev = GENESIS.hex()
    for seq in range(8):
        if seq in STATEMENTS:
            ev = _event(seq, prev, "user", STATEMENTS[seq], {"kind": "chat"}, b"%d" % seq)
        else:
            new, old, decided_by, checked_by, reason = RECORDS[seq]
            meta = supersession_meta(
                new_seq=new, new_id=out[new].id, old_seq=old, old_id=out[old].id, decided_by=decided_by, checked_by=checked_by, reason=reason
            )
            ev = _event(seq, prev, "system", SUPERSEDE_TEXT, meta, b"record %d" % seq)
        out.append(ev)
        prev = ev.chain
    gone = [erased_form(out[s]) for s in ERASED]
    for e in gone:
        out[e.seq] = e
    record = _event(8, prev, "system", erasure_record_text(len(gone)), erasure_record_meta(gone, ERASURE_REASON), b"erasure")
    return [*out, record]


def build() -> dict[str, str]:
    evs = events()
    state = derive(evs).supersessions
    described = {
        "format": 1,
        "session": SESSION,
        "records": [
            {
                "seq": s,
                "line": evs[s].to_line().decode("utf-8"),
                "parsed": dataclasses.asdict(rec) if (rec := supersession_of(evs[s].role, evs[s].text, evs[s].meta, s)) else None,
            }
            for s in sorted(RECORDS)
        ],
        "erased": ERASED,
        "state": {
            "superseded": {str(s): {"by": x.new_seq, "record": x.record_seq, "decided_by": x.decided_by} for s, x in sorted(state.superseded.items())},
            "history": {str(s): state.history(s) for s in sorted(STATEMENTS)},
            "live": {str(s): state.live(s) for s in sorted(STATEMENTS)},
        },
        "verify": {"ok": True, "events": len(evs), "head": evs[-1].chain, "erased": ERASED},
    }
    return {
        "ledger_v1_supersession.jsonl": "".join(e.to_line().decode("utf-8") for e in evs),
        "ledger_v1_supersession.json": json.dumps(described, indent=2, ensure_ascii=False) + "\n",
    }


def main() -> None:
    for name, text in build().items():
        (OUT / name).write_text(text, encoding="utf-8")
    print(f"wrote supersession vectors to {OUT}")


if __name__ == "__main__":
    main()
