"""The control state kept on disk, so that a fresh process folds only the events appended since (issue 15).

`DATA_DIR/sessions/<s>/control-state.json` holds ControlState (control.state) after the first `size` events:
the revocations, the control seqs and the supersession links, with the chain hash of event size-1 (`head`) and
the byte span [start, end) that event's line had in the log when the file was written. It is derived data, a hint
like `tail.json` (ledger/tailrecord.py): written atomically (temp file, rename), never fsynced, and trusted only
when the line found at [start, end) of the log now claims seq size-1 and ends the chain on `head`. A chain hash
commits to every line before it, so the folded prefix is the one the file describes; the one change a chain hash
does not show, an erasure, appends an erasure record after it, which control.revocation checks when it folds
the new lines (an erased control line makes it derive the state again). Anything else — no file, a torn or
edited one (its second line is the sha256 of its first), another version, a line that does not match — is a
full derivation, as without the file. It holds seqs, ids, and the reasons the control and supersession records
hold in the ledger (which never quote a memory: control.plan.quoted); no memory text.

Line 1: canonical-enough JSON of the state (orjson, sorted keys); line 2: its sha256, hex.

This module only encodes and decodes; the file is read and written by the file backend (its Ledger's
control_state_cache / keep_control_state_cache, storage/files/ledger/control_scan.py). On PostgreSQL no such file
is written; control.revocation derives the state from the session's role 'system' rows, which the server selects,
and caches it in the process.
"""

from __future__ import annotations

import hashlib
from typing import Any, NamedTuple

import orjson

from control.state import ControlState, Revocation
from control.supersession_state import Supersession, SupersessionState

VERSION = 2  # 2: folded with issue 28's rule (a supersession whose `new` is not a user statement is none); a 1 is derived again


class Saved(NamedTuple):
    """A state as the file holds it, with the span its last folded line had in the log."""

    state: ControlState
    start: int  # byte offset of the line of seq state.size - 1
    end: int  # byte offset just after it (its newline included): where the next line starts


def encode(saved: Saved) -> bytes:
    s = saved.state
    body = orjson.dumps(
        {
            "v": VERSION,
            "size": s.size,
            "head": s.head,
            "start": saved.start,
            "end": saved.end,
            "revoked": [[r.seq, r.event_id, r.control_seq, r.control_id, r.reason] for r in s.revoked.values()],
            "controls": s.controls,
            "links": [
                [x.old_seq, x.old_id, x.new_seq, x.new_id, x.decided_by, x.checked_by, x.reason, x.record_seq, x.record_id]
                for x in s.supersessions.links
            ],
        },
        option=orjson.OPT_SORT_KEYS,
    )
    return body + b"\n" + hashlib.sha256(body).hexdigest().encode("ascii") + b"\n"


def _nat(v: Any) -> bool:
    return type(v) is int and v >= 0


def _text(v: Any, *, optional: bool = False) -> bool:
    return type(v) is str or (optional and v is None)


def decode(data: bytes) -> Saved | None:
    """The state in `data`, or None for anything that is not exactly one this module wrote."""
    body, sep, rest = data.partition(b"\n")
    if not sep or rest != hashlib.sha256(body).hexdigest().encode("ascii") + b"\n":
        return None
    try:
        obj: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    keys = {"v", "size", "head", "start", "end", "revoked", "controls", "links"}
    if type(obj) is not dict or obj.keys() != keys or obj["v"] != VERSION:
        return None
    size, head, start, end = obj["size"], obj["head"], obj["start"], obj["end"]
    if not (_nat(size) and size > 0 and type(head) is str and len(head) == 64 and _nat(start) and _nat(end) and start < end):
        return None
    revoked: dict[int, Revocation] = {}
    for r in obj["revoked"] if type(obj["revoked"]) is list else [None]:
        if type(r) is not list or len(r) != 5 or not (_nat(r[0]) and _text(r[1]) and _nat(r[2]) and _text(r[3]) and _text(r[4], optional=True)):
            return None
        revoked[r[0]] = Revocation(r[0], r[1], r[2], r[3], r[4])
    controls = obj["controls"]
    if type(controls) is not list or not all(_nat(c) and c < size for c in controls):
        return None
    links: list[Supersession] = []
    for x in obj["links"] if type(obj["links"]) is list else [None]:
        if type(x) is not list or len(x) != 9:
            return None
        if not (_nat(x[0]) and _text(x[1]) and _nat(x[2]) and _text(x[3]) and _text(x[4]) and _text(x[5], optional=True)):
            return None
        if not (_text(x[6], optional=True) and _nat(x[7]) and x[7] < size and _text(x[8])):
            return None
        links.append(Supersession(*x))
    state = ControlState(size, head, revoked, list(controls), SupersessionState.from_links(links))
    return Saved(state, start, end)
