"""Streaming verification of one session's ledger (pure: bytes in, report out).

Every digest is recomputed from the stored fields; the stored digest is only
compared against, never trusted. The chain is re-walked from GENESIS and
sequence numbers must run 0, 1, 2, ... without a gap or repeat. An erased
line (docs/FORMAT.md §4.4) is verified from its stored commitment, and must be
listed by a later erasure record (§4.5): ledger/erasures.py carries what a walk
needs to know of that from line to line.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from ledger.canonical import CanonicalError, JSONSyntaxError, dumps_unchecked, loads_strict
from ledger.erasures import ErasureState, record_entries
from ledger.event import (
    ERASED_KEYS,
    FORMAT_VERSION,
    GENESIS,
    HEX64_RE,
    LINE_KEYS,
    MAX_META_BYTES,
    MAX_TEXT_BYTES,
    ROLES,
    TAG_CHAIN,
    TAG_CONTENT,
    TAG_EVENT,
    EventError,
    check_meta,
    needs_domain_walk,
    recompute_digest,
)
from ledger.jsonnames import json_type

# The kinds of break verification can name.
PARSE_ERROR = "parse_error"
TORN_TAIL = "torn_tail"
MALFORMED_EVENT = "malformed_event"
UNKNOWN_VERSION = "unknown_version"
WRONG_SESSION = "wrong_session"
SEQ_GAP = "seq_gap"
SEQ_REPEAT = "seq_repeat"
DIGEST_MISMATCH = "digest_mismatch"
CHAIN_MISMATCH = "chain_mismatch"
# The line is not exactly the canonical bytes of its fields plus "\n" (Event.to_line):
# whitespace, CRLF, key order, escapes, a float for an integer, a duplicate key, ...
NON_CANONICAL = "non_canonical"
# An erased line (FORMAT.md §4.4) that no later erasure record lists (at the end of the ledger).
ERASED_UNRECORDED = "erased_unrecorded"
# An erasure record (§4.5) of the wrong shape, or listing a seq that is not an erased line matching it.
BAD_ERASURE_RECORD = "bad_erasure_record"


@dataclass(frozen=True, slots=True)
class Break:
    """The first point where a session's ledger stops verifying."""

    line: int  # 1-based line number in events.jsonl
    seq: int | None  # the seq the line claims, when it could be read
    kind: str
    expected: str | None
    found: str | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "seq": self.seq,
            "kind": self.kind,
            "expected": self.expected,
            "found": self.found,
            "message": self.message,
        }


@dataclass(frozen=True, slots=True)
class SessionReport:
    """Outcome of verifying one session. Deliberately has no truth value: read `.ok`."""

    session: str
    ok: bool
    events: int  # events verified before the break (all of them when ok)
    head: str  # chain hash of the last verified event (GENESIS hex when none)
    brk: Break | None = None
    quarantined: tuple[str, ...] = field(default=())
    erased: tuple[int, ...] = field(default=())  # seqs of the erased lines among the verified events

    def with_quarantined(self, quarantined: tuple[str, ...]) -> SessionReport:
        return SessionReport(self.session, self.ok, self.events, self.head, self.brk, quarantined, self.erased)

    def __bool__(self) -> bool:
        raise TypeError("SessionReport has no truth value; read .ok")

    def to_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "ok": self.ok,
            "events": self.events,
            "head": self.head,
            "break": None if self.brk is None else self.brk.to_dict(),
            "quarantined": list(self.quarantined),
            "erased": list(self.erased),
        }


class ChainWalker:
    """Checks lines one at a time, carrying the running chain state.

    Start it at genesis, or at a known-good (next_seq, head) to continue a
    verification incrementally.
    """

    __slots__ = ("session", "next_seq", "head", "line_no", "last_digest", "erasures")

    def __init__(
        self,
        session: str,
        next_seq: int = 0,
        head: bytes = GENESIS,
        line_no: int = 0,
        erasures: ErasureState | None = None,
    ) -> None:
        self.session = session
        self.next_seq = next_seq
        self.head = head
        self.line_no = line_no
        self.last_digest = b""  # recomputed digest of the last line that verified
        # what the prefix before next_seq holds of erasure; without it, entries naming that prefix are unchecked
        self.erasures = erasures if erasures is not None else ErasureState(unknown_before=next_seq)

    def step(self, raw: bytes, *, last: bool = False) -> Break | None:
        """Verify one line (without its newline). `last` marks a line that had no newline.

        The common case goes through the fast path (_fast_ok, which accepts only what the
        careful walk accepts); anything else — an erased line, an erasure record, a break —
        through the careful walk, which defines the semantics and names the break.
        """
        if not last:
            fast = _fast_ok(raw, self.session, self.next_seq, self.head)
            if fast is not None:
                self.line_no += 1
                self.head, self.last_digest = fast
                self.next_seq += 1
                return None
        return self.careful_step(raw, last=last)

    def careful_step(self, raw: bytes, *, last: bool = False) -> Break | None:
        """`step` without the fast path."""
        self.line_no += 1
        line = self.line_no
        refused: CanonicalError | None = None
        obj: Any = None
        try:
            obj = loads_strict(raw, f"line {line}")
        except JSONSyntaxError as exc:
            kind = TORN_TAIL if last else PARSE_ERROR
            return Break(line, None, kind, None, None, str(exc))
        except CanonicalError as exc:
            refused = exc
        if last:
            return Break(
                line, _seq_of(obj), TORN_TAIL, "a newline", "end of file", f"line {line}: has no trailing newline"
            )
        if refused is not None:
            return Break(line, _seq_guess(raw), NON_CANONICAL, "canonical JSON", "JSON outside it", f"{refused}")
        if type(obj) is not dict:
            found = f"JSON {json_type(obj)}"
            return Break(line, None, MALFORMED_EVENT, "a JSON object", found, f"line {line}: not an object ({found})")
        seq = _seq_of(obj)
        brk = _canonical_problem(raw, obj, line, seq)
        if brk is not None:
            return brk
        version = obj.get("v")
        if version != FORMAT_VERSION or type(version) is not int:
            return Break(
                line, seq, UNKNOWN_VERSION, str(FORMAT_VERSION), repr(version), f"line {line}: format version {version!r} is unknown"
            )
        problem = _shape_problem(obj)
        if problem is not None:
            return Break(line, seq, MALFORMED_EVENT, None, None, f"line {line}: {problem}")
        if obj["session"] != self.session:
            return Break(
                line, seq, WRONG_SESSION, self.session, obj["session"], f"line {line}: belongs to session {obj['session']!r}"
            )
        if seq != self.next_seq:
            kind = SEQ_REPEAT if seq is not None and seq < self.next_seq else SEQ_GAP
            return Break(
                line, seq, kind, str(self.next_seq), str(seq), f"line {line}: seq {seq}, expected {self.next_seq}"
            )
        try:
            digest = recompute_digest(obj)
        except EventError as exc:
            return Break(line, seq, MALFORMED_EVENT, None, None, f"line {line}: {exc}")
        if digest.hex() != obj["digest"]:
            return Break(
                line, seq, DIGEST_MISMATCH, digest.hex(), obj["digest"], f"line {line} (seq {seq}): digest does not match its fields"
            )
        if obj["prev"] != self.head.hex():
            return Break(
                line, seq, CHAIN_MISMATCH, self.head.hex(), obj["prev"], f"line {line} (seq {seq}): prev is not the previous chain hash"
            )
        chain = hashlib.sha256(TAG_CHAIN + self.head + digest).digest()
        if chain.hex() != obj["chain"]:
            return Break(
                line, seq, CHAIN_MISMATCH, chain.hex(), obj["chain"], f"line {line} (seq {seq}): chain hash does not link"
            )
        if "commit" in obj:
            self.erasures.saw_erased(seq, obj)
        elif obj["role"] == "system" and "erasure" in obj["meta"]:
            entries = record_entries(seq, obj)
            problem = entries if isinstance(entries, str) else self.erasures.saw_record(seq, entries)
            if problem is not None:
                return Break(line, seq, BAD_ERASURE_RECORD, None, None, f"line {line} (seq {seq}): erasure record: {problem}")
        self.head = chain
        self.last_digest = digest
        self.next_seq += 1
        return None


def _canonical_problem(raw: bytes, obj: dict[str, Any], line: int, seq: int | None) -> Break | None:
    """NON_CANONICAL unless `raw` is byte for byte the canonical serialisation of `obj`."""
    try:
        canon = dumps_unchecked(obj, f"line {line}")
    except CanonicalError as exc:  # e.g. nesting past orjson's limit: far outside the format
        return Break(line, seq, MALFORMED_EVENT, None, None, str(exc))
    if canon == raw:
        return None
    at = next((i for i, (a, b) in enumerate(zip(canon, raw, strict=False)) if a != b), min(len(canon), len(raw)))
    return Break(
        line,
        seq,
        NON_CANONICAL,
        f"sha256 {hashlib.sha256(canon).hexdigest()} ({len(canon)} bytes)",
        f"sha256 {hashlib.sha256(raw).hexdigest()} ({len(raw)} bytes)",
        f"line {line}: not the canonical serialisation of its fields (first difference at byte {at}:"
        f" expected {canon[at : at + 12]!r}, found {raw[at : at + 12]!r})",
    )


def _seq_guess(raw: bytes) -> int | None:
    """The seq a refused line claims, as a lenient parser reads it (only to report where)."""
    try:
        return _seq_of(json.loads(raw, parse_int=lambda s: int(s) if len(s) < 20 else None))
    except (ValueError, RecursionError):
        return None


def _seq_of(obj: Any) -> int | None:
    if type(obj) is dict:
        seq = obj.get("seq")
        if type(seq) is int:
            return seq
    return None


_KEYSET = frozenset(LINE_KEYS)
_ERASED_KEYSET = frozenset(ERASED_KEYS)


def _shape_problem(obj: dict[str, Any]) -> str | None:
    keys = obj.keys()
    erased = keys == _ERASED_KEYSET
    if keys != _KEYSET and not erased:
        # name the difference from the form the line is closer to
        form, keyset = (ERASED_KEYS, _ERASED_KEYSET) if "commit" in obj else (LINE_KEYS, _KEYSET)
        missing = [k for k in form if k not in obj]
        extra = [k for k in obj if k not in keyset]
        what = "an erased line of format v1" if "commit" in obj else "format v1"
        return f"fields differ from {what} (missing {missing}, unexpected {extra})"
    seq = obj["seq"]
    if type(seq) is not int or seq < 0:
        return f"seq {seq!r} is not a non-negative integer"
    if obj["role"] not in ROLES:
        return f"role {obj['role']!r} is not one of {', '.join(ROLES)}"
    for key in ("digest", "prev", "chain", "commit" if erased else "salt"):
        value = obj[key]
        if type(value) is not str or not HEX64_RE.fullmatch(value):
            return f"{key} is not 64 lowercase hex digits"
    if type(obj["id"]) is not str or type(obj["ts"]) is not str or type(obj["session"]) is not str:
        return "id, ts and session must be strings"
    return None


def read_chunks(f: Any, limit: int | None = None, size: int = 1 << 20) -> Iterator[bytes]:
    """Read an open binary file in `size` pieces from where it stands, at most `limit` bytes in all."""
    left = limit
    while left is None or left > 0:
        chunk = f.read(size if left is None else min(size, left))
        if not chunk:
            return
        if left is not None:
            left -= len(chunk)
        yield chunk


def split_lines(chunks: Iterable[bytes]) -> Iterable[tuple[bytes, bool]]:
    """Yield (line without newline, had_no_newline) from a byte stream, in constant memory."""
    rest = b""
    for chunk in chunks:
        if rest:
            chunk = rest + chunk
        parts = chunk.split(b"\n")
        rest = parts.pop()
        for part in parts:
            yield part, False
    if rest:
        yield rest, True


_SORTED = orjson.OPT_SORT_KEYS
_SMALL_TEXT = MAX_TEXT_BYTES // 4  # a str of at most this many characters is within the limit in UTF-8


def _fast_ok(raw: bytes, session: str, next_seq: int, head: bytes) -> tuple[bytes, bytes] | None:
    """The common case, fast: return (chain hash, digest) if the line verifies, else None.

    Returning None never means "broken" by itself: the caller then runs the
    careful ChainWalker.step, which defines the semantics and names the break.
    Soundness (this accepts only what step accepts): orjson's sorted, compact
    re-serialisation equal to the raw bytes proves the line has no whitespace,
    no duplicate key (orjson keeps one: the output would be shorter), no
    non-canonical escape and sorted keys, and that loads_strict would build the
    same value once every top-level field has its type and meta passes the
    domain scan (ledger.event.needs_domain_walk: no float, no long integer, no
    non-ASCII key, no nesting past the limit); the sizes are the same limits.
    """
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(obj) is not dict or obj.keys() != _KEYSET:
        return None
    seq = obj["seq"]
    text = obj["text"]
    meta = obj["meta"]
    salt = obj["salt"]
    event_id = obj["id"]
    ts = obj["ts"]
    role = obj["role"]
    if (
        type(seq) is not int
        or seq != next_seq
        or type(obj["v"]) is not int
        or obj["v"] != FORMAT_VERSION
        or obj["session"] != session
        or type(text) is not str
        or type(meta) is not dict
        or type(event_id) is not str
        or type(ts) is not str
        or role not in ROLES
        or type(salt) is not str
        or (role == "system" and "erasure" in meta)  # an erasure record: step checks what it lists
    ):
        return None
    try:
        salt_raw = bytes.fromhex(salt)
        if len(salt_raw) != 32 or salt_raw.hex() != salt:  # 64 lowercase hex digits, as step requires
            return None
        if orjson.dumps(obj, option=_SORTED) != raw:
            return None
        meta_bytes = orjson.dumps(meta, option=_SORTED)
        if len(meta_bytes) > MAX_META_BYTES or (len(text) > _SMALL_TEXT and len(text.encode("utf-8")) > MAX_TEXT_BYTES):
            return None
        if needs_domain_walk(meta_bytes):
            check_meta(meta)
        content = b'{"meta":' + meta_bytes + b',"text":' + orjson.dumps(text) + b"}"
    except (TypeError, ValueError):
        return None
    commit = hashlib.sha256(TAG_CONTENT + salt_raw + content).hexdigest()
    hashed = {"commit": commit, "id": event_id, "role": role, "seq": seq, "session": session, "ts": ts, "v": FORMAT_VERSION}
    digest = hashlib.sha256(TAG_EVENT + orjson.dumps(hashed)).digest()
    if digest.hex() != obj["digest"] or obj["prev"] != head.hex():
        return None
    chain = hashlib.sha256(TAG_CHAIN + head + digest).digest()
    if chain.hex() != obj["chain"]:
        return None
    return chain, digest


def verify_stream(
    session: str,
    chunks: Iterable[bytes],
    *,
    walker: ChainWalker | None = None,
    on_event: Callable[[int, bytes, int], None] | None = None,
    final: bool = True,
) -> SessionReport:
    """Verify a session from its bytes; stop at the first break.

    `walker` continues from a known-good state (incremental verification);
    `on_event(seq, recomputed digest, line length incl. newline)` is called
    for every line that verified, in order. `final` says the bytes run to the
    end of the ledger: an erased line no record listed is then the break
    ERASED_UNRECORDED, and the report stops before it (events = its seq, head =
    its prev), although `on_event` was called for the lines after it.
    """
    walker = walker if walker is not None else ChainWalker(session)
    for raw, torn in split_lines(chunks):
        if not torn:
            fast = _fast_ok(raw, session, walker.next_seq, walker.head)
            if fast is not None:
                if on_event is not None:
                    on_event(walker.next_seq, fast[1], len(raw) + 1)
                walker.head = fast[0]
                walker.next_seq += 1
                walker.line_no += 1
                continue
        brk = walker.careful_step(raw, last=torn)  # the fast path was tried above
        if brk is not None:
            return SessionReport(session, False, walker.next_seq, walker.head.hex(), brk, erased=walker.erasures.seqs())
        if on_event is not None:
            on_event(walker.next_seq - 1, walker.last_digest, len(raw) + 1)
    return finish(walker, final=final)


def erased_words(seqs: tuple[int, ...] | list[int]) -> str:
    """'2 events erased (seqs 3, 7)': what a report says of the erased lines it verified (pure)."""
    shown = ", ".join(str(s) for s in seqs[:20]) + (f", … {len(seqs) - 20} more" if len(seqs) > 20 else "")
    return f"{len(seqs)} event{'' if len(seqs) == 1 else 's'} erased (seq{'' if len(seqs) == 1 else 's'} {shown})"


def finish(walker: ChainWalker, *, final: bool = True) -> SessionReport:
    """The report of a walk that reached the end of its bytes without a break (see verify_stream's `final`)."""
    pending = walker.erasures.first_unrecorded() if final else None
    if pending is not None:
        seq = pending.seq
        brk = Break(
            seq + 1,
            seq,
            ERASED_UNRECORDED,
            f"an erasure record after line {seq + 1} listing seq {seq}",
            "none",
            f"line {seq + 1} (seq {seq}): in erased form, but no later erasure record lists it",
        )
        return SessionReport(walker.session, False, seq, pending.prev, brk, erased=walker.erasures.seqs(seq))
    return SessionReport(walker.session, True, walker.next_seq, walker.head.hex(), erased=walker.erasures.seqs())
