"""The checkpoints a visitor's browser keeps (the value of a gr.BrowserState), read and rewritten (pure).

The browser keeps, for each of the last few sessions it opened, the latest
signed checkpoint it was shown, so the next visit can ask the server to prove
that today's history extends it (receipts.checkpoints.prove_since). The value
comes back from the browser's localStorage, so it is visitor-controlled input:
anything that is not exactly the shape below is ignored with a note and
replaced, never an error; each entry is bounded in size and the list in length.
The checkpoint itself is kept as its JSON text, so the service parses it with
the one strict parser (receipts.checkpoints.parse_checkpoint) — duplicate keys,
non-finite numbers and the rest are refused there, not by a lenient decode here.

Value (version 1), most recently stored last:

    {"v": 1, "kept": [[session_id, checkpoint_json_text], ...]}   # at most KEEP entries
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ledger.event import SESSION_ID_RE
from ledger.jsonnames import json_type
from receipts.checkpoints import checkpoint_file_bytes

STATE_VERSION = 1
STORAGE_KEY = "mre-kept-checkpoints"
# Not a secret (the page carries it). Deliberately NOT tied to the signing key, unlike the session key's
# state: a new key must not silently wipe the checkpoints a visitor kept (that would hide a rewrite).
STATE_SECRET = hashlib.sha256(b"mre-browser-state:kept-checkpoints:v1").hexdigest()[:32]
KEEP = 8  # sessions remembered per browser
MAX_ENTRY_CHARS = 4096  # a signed checkpoint is ~450 characters of JSON


@dataclass(frozen=True, slots=True)
class Kept:
    """What the browser holds for one session: the checkpoint's JSON text (None: nothing), and why not, if unreadable."""

    text: str | None
    note: str | None = None


def _entries(state: object) -> tuple[list[tuple[str, str]], str | None]:
    """The well-formed entries of a state value (others dropped), and a note if anything was dropped."""
    if state is None:
        return [], None
    if not isinstance(state, Mapping):
        return [], f"expected an object, found JSON {json_type(state)}"
    if state.get("v") != STATE_VERSION or set(state) != {"v", "kept"}:
        return [], f"not a version-{STATE_VERSION} value (fields {sorted(map(str, state))[:5]})"
    raw = state["kept"]
    if not isinstance(raw, list):
        return [], f"'kept' is JSON {json_type(raw)}, not an array"
    out: list[tuple[str, str]] = []
    dropped = max(0, len(raw) - KEEP)
    for item in raw[-KEEP:]:
        ok = (
            isinstance(item, list)
            and len(item) == 2
            and isinstance(item[0], str)
            and SESSION_ID_RE.fullmatch(item[0]) is not None
            and isinstance(item[1], str)
            and len(item[1]) <= MAX_ENTRY_CHARS
        )
        if ok:
            out.append((item[0], item[1]))
        else:
            dropped += 1
    return out, (f"{dropped} malformed or surplus entr{'y' if dropped == 1 else 'ies'} dropped" if dropped else None)


def kept_for(state: object, session: str) -> Kept:
    """The checkpoint text the browser kept for `session` (the newest entry for it), with a note about anything unreadable."""
    entries, problem = _entries(state)
    mine = [text for sid, text in entries if sid == session]
    note = None
    if problem is not None:
        note = (
            f"the checkpoints kept in this browser were {'partly ' if entries else ''}unreadable ({problem}): ignored"
        )
    return Kept(mine[-1] if mine else None, note)


def stored(state: object, session: str, checkpoint: Mapping[str, Any]) -> dict[str, Any]:
    """A new state value: `checkpoint` kept for `session` (most recent last), other sessions' good entries kept, bounded."""
    text = checkpoint_file_bytes(checkpoint).decode("utf-8").rstrip("\n")
    if len(text) > MAX_ENTRY_CHARS:  # cannot happen for a v1 checkpoint; never store what would be dropped on read
        raise ValueError(f"checkpoint of session {session}: {len(text)} characters is over the {MAX_ENTRY_CHARS} kept")
    others = [[sid, t] for sid, t in _entries(state)[0] if sid != session]
    return {"v": STATE_VERSION, "kept": [*others[-(KEEP - 1) :], [session, text]]}


def dropped(state: object, session: str) -> dict[str, Any]:
    """The state without `session`'s entry (one that could not be used) and without anything malformed."""
    return {"v": STATE_VERSION, "kept": [[sid, t] for sid, t in _entries(state)[0] if sid != session]}


def normalised(state: object) -> dict[str, Any]:
    """The state with anything malformed dropped (what a read of it would see)."""
    return {"v": STATE_VERSION, "kept": [[sid, t] for sid, t in _entries(state)[0]]}


__all__ = [
    "KEEP",
    "MAX_ENTRY_CHARS",
    "STATE_SECRET",
    "STORAGE_KEY",
    "Kept",
    "dropped",
    "kept_for",
    "normalised",
    "stored",
]
