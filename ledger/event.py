"""The event format, version 1: fields, hashes and the chain (pure functions).

Every byte that goes into a hash is defined here and in docs/FORMAT.md; the
two must agree, and tests/vectors/ pins them. Changing any of it is a format
version change, never a quiet edit.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

import orjson

from ledger.canonical import MAX_DEPTH, CanonicalError, check_domain, dumps_unchecked
from ledger.jsonnames import json_type

FORMAT_VERSION = 1
ROLES = ("user", "assistant", "system", "tool")
GENESIS = bytes(32)  # prev chain hash of the event at seq 0
TAG_CONTENT = b"mre:v1:content\x00"
TAG_EVENT = b"mre:v1:event\x00"
TAG_CHAIN = b"mre:v1:chain\x00"
SALT_BYTES = 32
MAX_TEXT_BYTES = 64 * 1024  # UTF-8 bytes of `text`
MAX_META_BYTES = 16 * 1024  # canonical bytes of `meta`
# A receipt body holds an event's meta at body.memories[i].event.meta, 4 levels down; the
# receipt body may nest MAX_DEPTH (36) levels, so meta may nest 32 (meta itself counts as
# one): every meta the ledger accepts can be cited by a receipt (docs/FORMAT.md §1).
META_NESTING_IN_RECEIPT = 4
MAX_META_DEPTH = MAX_DEPTH - META_NESTING_IN_RECEIPT
SESSION_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
EVENT_ID_RE = re.compile(r"evt_[0-9a-f]{32}")
HEX64_RE = re.compile(r"[0-9a-f]{64}")
TS_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")
LINE_KEYS = ("v", "session", "seq", "id", "role", "ts", "meta", "text", "salt", "digest", "prev", "chain")
# An erased line (docs/FORMAT.md §4.4): text, meta and salt removed, the content commitment stored instead.
ERASED_KEYS = ("v", "session", "seq", "id", "role", "ts", "commit", "digest", "prev", "chain")
ERASURE_VERSION = 1  # of the erasure record's meta["erasure"] object


class SessionMoved(RuntimeError):
    """A session held other events than expected when a deletion meant to remove exactly those: nothing was deleted."""


class EventError(ValueError):
    """An event (or its input) is not acceptable; the message says which field and why."""


def validate_session_id(session: object) -> str:
    if not isinstance(session, str) or not SESSION_ID_RE.fullmatch(session):
        raise EventError(
            f"session id {session!r}: must be 1-64 characters of letters, digits, '-' or '_'"
        )
    return session


def normalize_ts(ts: object) -> str:
    """ISO 8601 with a timezone -> 'YYYY-MM-DDTHH:MM:SS.ffffffZ' in UTC."""
    if not isinstance(ts, str):
        raise EventError(f"ts {ts!r}: must be an ISO 8601 string")
    try:
        parsed = datetime.fromisoformat(ts)
    except ValueError:
        raise EventError(f"ts {ts!r}: not an ISO 8601 timestamp") from None
    if parsed.tzinfo is None:
        raise EventError(f"ts {ts!r}: has no timezone (add 'Z' or an offset)")
    return format_ts(parsed)


def format_ts(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def now_ts() -> str:
    return format_ts(datetime.now(UTC))


# a digit followed by a fraction or exponent, or a run of 16 digits (the same as [0-9][.eE]|[0-9]{16}, faster)
_FLOATY = re.compile(rb"[0-9](?:[.eE]|[0-9]{15})")


def needs_domain_walk(meta_bytes: bytes) -> bool:
    """Whether meta serialised as `meta_bytes` (orjson, sorted keys) could be outside the domain.

    False proves it is inside, without a walk: only ASCII (so no non-ASCII key),
    no float-like or 16-digit number, and fewer `{`/`[` bytes than the depth
    limit (so no nesting past it). orjson never writes NaN or Infinity as such.
    """
    return (
        not meta_bytes.isascii()
        or _FLOATY.search(meta_bytes) is not None
        or meta_bytes.count(b"{") + meta_bytes.count(b"[") > MAX_META_DEPTH
    )


def check_meta(meta: dict[str, Any], path: str = "meta") -> None:
    """Raise CanonicalError unless meta is in the domain and nests at most MAX_META_DEPTH levels."""
    check_domain(meta, path, max_depth=MAX_META_DEPTH)


def check_content(text: object, meta: object, *, parsed_json: bool = False) -> None:
    """Validate the user-supplied part of an event (text and meta).

    `parsed_json=True` says meta came from a JSON parser, so it holds only JSON
    values: then the full domain walk runs only when the serialized meta could
    be outside the domain (:func:`needs_domain_walk`, a cheap byte scan).
    """
    if not isinstance(text, str):
        raise EventError(f"text: must be a string, found JSON {json_type(text)}")
    if not isinstance(meta, dict):
        raise EventError(f"meta: must be a JSON object, found JSON {json_type(meta)}")
    try:
        if parsed_json:
            meta_bytes = dumps_unchecked(meta, "meta")
            if needs_domain_walk(meta_bytes):
                check_meta(meta)
        else:
            check_meta(meta)
            meta_bytes = dumps_unchecked(meta, "meta")
    except CanonicalError as exc:
        raise EventError(str(exc)) from None
    check_sizes(text, meta_bytes)


def check_sizes(text: str, meta_bytes: bytes) -> None:
    """The size limits, the same at import, append and in both verifier paths."""
    if len(text) > MAX_TEXT_BYTES // 4:  # shorter texts cannot be over the limit in UTF-8
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            raise EventError("text: contains a lone surrogate (not valid Unicode)") from None
        if size > MAX_TEXT_BYTES:
            raise EventError(f"text: {size} bytes is over the limit of {MAX_TEXT_BYTES}")
    elif not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise EventError("text: contains a lone surrogate (not valid Unicode)") from None
    if len(meta_bytes) > MAX_META_BYTES:
        raise EventError(f"meta: {len(meta_bytes)} canonical bytes is over the limit of {MAX_META_BYTES}")


def content_commitment(salt: bytes, text: str, meta: dict[str, Any], meta_bytes: bytes | None = None) -> bytes:
    """sha256(TAG_CONTENT || salt || JCS({"meta": meta, "text": text})), raw 32 bytes.

    The digest commits to the text only through this salted value, so a later
    erasure can drop text, meta and salt, keep the commitment, and leave every
    digest and chain hash unchanged. (The bytes are assembled by hand: JCS of a
    two-member object whose keys sort "meta" < "text".)
    """
    if meta_bytes is None:
        meta_bytes = dumps_unchecked(meta)
    content = b'{"meta":' + meta_bytes + b',"text":' + dumps_unchecked(text) + b"}"
    return hashlib.sha256(TAG_CONTENT + salt + content).digest()


def event_digest(*, session: str, seq: int, event_id: str, role: str, ts: str, commit: bytes) -> bytes:
    """sha256(TAG_EVENT || JCS(hashed fields)), raw 32 bytes."""
    # keys already in JCS order, so no sorting pass is needed
    hashed = {
        "commit": commit.hex(),
        "id": event_id,
        "role": role,
        "seq": seq,
        "session": session,
        "ts": ts,
        "v": FORMAT_VERSION,
    }
    return hashlib.sha256(TAG_EVENT + orjson.dumps(hashed)).digest()


def chain_link(prev: bytes, digest: bytes) -> bytes:
    """sha256(TAG_CHAIN || prev (32 raw bytes) || digest (32 raw bytes))."""
    return hashlib.sha256(TAG_CHAIN + prev + digest).digest()


class Event(NamedTuple):
    """One ledger line, as stored (a NamedTuple: cheap to build a million of)."""

    session: str
    seq: int
    id: str
    role: str
    ts: str
    meta: dict[str, Any]
    text: str
    salt: str
    digest: str
    prev: str
    chain: str
    v: int = FORMAT_VERSION
    line: int | None = None  # 1-based line number when read from a file
    commit: str | None = None  # hex content commitment, stored only in an erased line (text "", meta {}, salt "")

    @property
    def erased(self) -> bool:
        """True for an event in erased form: its text, meta and salt are gone, only `commit` remains."""
        return self.commit is not None

    def to_dict(self) -> dict[str, Any]:
        if self.commit is not None:
            return {
                "v": self.v,
                "session": self.session,
                "seq": self.seq,
                "id": self.id,
                "role": self.role,
                "ts": self.ts,
                "commit": self.commit,
                "digest": self.digest,
                "prev": self.prev,
                "chain": self.chain,
            }
        return {
            "v": self.v,
            "session": self.session,
            "seq": self.seq,
            "id": self.id,
            "role": self.role,
            "ts": self.ts,
            "meta": self.meta,
            "text": self.text,
            "salt": self.salt,
            "digest": self.digest,
            "prev": self.prev,
            "chain": self.chain,
        }

    def to_line(self, meta_bytes: bytes | None = None) -> bytes:
        """The JSONL line (JCS of the fields, with its newline) written to events.jsonl.

        An erased event writes its erased form: the 10 keys of ERASED_KEYS.
        """
        if self.commit is not None:
            return orjson.dumps(
                {
                    "chain": self.chain,
                    "commit": self.commit,
                    "digest": self.digest,
                    "id": self.id,
                    "prev": self.prev,
                    "role": self.role,
                    "seq": self.seq,
                    "session": self.session,
                    "ts": self.ts,
                    "v": self.v,
                },
                option=orjson.OPT_APPEND_NEWLINE,
            )
        meta = orjson.Fragment(meta_bytes if meta_bytes is not None else dumps_unchecked(self.meta))
        # keys in sorted order; meta is pre-serialised with sorted keys
        ordered = {
            "chain": self.chain,
            "digest": self.digest,
            "id": self.id,
            "meta": meta,
            "prev": self.prev,
            "role": self.role,
            "salt": self.salt,
            "seq": self.seq,
            "session": self.session,
            "text": self.text,
            "ts": self.ts,
            "v": self.v,
        }
        return orjson.dumps(ordered, option=orjson.OPT_APPEND_NEWLINE)

    @property
    def leaf_data(self) -> bytes:
        """What the session's Merkle tree takes as this event's leaf: the raw digest."""
        return bytes.fromhex(self.digest)


def make_event(
    *,
    session: str,
    seq: int,
    prev: bytes,
    role: str,
    text: str,
    meta: dict[str, Any],
    ts: str,
    event_id: str,
    salt: bytes,
    validated: bool = False,
    meta_bytes: bytes | None = None,
) -> Event:
    """Build the next event of a chain. Pure: ids, salt and time come from the caller."""
    if not validated:
        validate_session_id(session)
        if role not in ROLES:
            raise EventError(f"role {role!r}: must be one of {', '.join(ROLES)}")
        check_content(text, meta)
        if not TS_RE.fullmatch(ts):
            raise EventError(f"ts {ts!r}: not in the normalized form YYYY-MM-DDTHH:MM:SS.ffffffZ")
        if len(salt) != SALT_BYTES:
            raise EventError(f"salt: must be {SALT_BYTES} bytes")
        if not EVENT_ID_RE.fullmatch(event_id):
            raise EventError(f"id {event_id!r}: must be 'evt_' and 32 lowercase hex digits")
    commit = content_commitment(salt, text, meta, meta_bytes)
    digest = event_digest(session=session, seq=seq, event_id=event_id, role=role, ts=ts, commit=commit)
    return Event(
        session=session,
        seq=seq,
        id=event_id,
        role=role,
        ts=ts,
        meta=meta,
        text=text,
        salt=salt.hex(),
        digest=digest.hex(),
        prev=prev.hex(),
        chain=chain_link(prev, digest).hex(),
    )


def recompute_digest(obj: dict[str, Any]) -> bytes:
    """Digest of a parsed stored line, from its fields (the stored digest is ignored).

    Raises EventError when a field is missing, mistyped or outside the domain.
    An erased line (it has `commit` instead of text, meta and salt) is
    recomputed from its stored commitment.
    """
    try:
        if "commit" in obj:
            stored = obj["commit"]
            if type(stored) is not str or not HEX64_RE.fullmatch(stored):
                raise EventError("commit is not 64 lowercase hex digits")
            return event_digest(
                session=obj["session"], seq=obj["seq"], event_id=obj["id"], role=obj["role"], ts=obj["ts"],
                commit=bytes.fromhex(stored),
            )
        salt = bytes.fromhex(obj["salt"])
        text = obj["text"]
        meta = obj["meta"]
        if len(salt) != SALT_BYTES or type(text) is not str or type(meta) is not dict:
            raise EventError("salt, text or meta has the wrong type or size")
        check_meta(meta)
        meta_bytes = dumps_unchecked(meta, "meta")
        check_sizes(text, meta_bytes)
        commit = content_commitment(salt, text, meta, meta_bytes)
        return event_digest(
            session=obj["session"], seq=obj["seq"], event_id=obj["id"], role=obj["role"], ts=obj["ts"], commit=commit
        )
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, EventError):
            raise
        raise EventError(f"cannot recompute digest: {exc}") from None


def event_from_dict(obj: dict[str, Any], line: int | None = None) -> Event:
    """An Event from a parsed stored line (either form)."""
    if "commit" in obj:
        return Event(
            session=obj["session"],
            seq=obj["seq"],
            id=obj["id"],
            role=obj["role"],
            ts=obj["ts"],
            meta={},
            text="",
            salt="",
            digest=obj["digest"],
            prev=obj["prev"],
            chain=obj["chain"],
            v=obj["v"],
            line=line,
            commit=obj["commit"],
        )
    return Event(
        session=obj["session"],
        seq=obj["seq"],
        id=obj["id"],
        role=obj["role"],
        ts=obj["ts"],
        meta=obj["meta"],
        text=obj["text"],
        salt=obj["salt"],
        digest=obj["digest"],
        prev=obj["prev"],
        chain=obj["chain"],
        v=obj["v"],
        line=line,
    )


# -- erasure (docs/FORMAT.md §4.4, §4.5) ------------------------------------------------------------


def erased_form(ev: Event) -> Event:
    """The erased copy of `ev`: text "", meta {}, salt "", and `commit` recomputed from them (pure).

    Digest, chain and every other field are unchanged. An event already erased is returned as is.
    """
    if ev.commit is not None:
        return ev
    commit = content_commitment(bytes.fromhex(ev.salt), ev.text, ev.meta)
    return ev._replace(text="", meta={}, salt="", commit=commit.hex())


def erasure_record_text(n: int) -> str:
    """The erasure record's text: a count, never the erased words."""
    return f"[erasure record: {n} event(s) erased]"


def erasure_record_meta(erased: Sequence[Event], reason: str | None) -> dict[str, Any]:
    """meta of the erasure record listing `erased` (events in erased form, in seq order)."""
    return {
        "erasure": {
            "v": ERASURE_VERSION,
            "erased": [{"seq": e.seq, "id": e.id, "digest": e.digest, "commit": e.commit} for e in erased],
            "reason": reason,
        }
    }


def is_erasure_record(ev: Event) -> bool:
    """Whether `ev` is an erasure record (role system, meta["erasure"] an object; the verifier checks the rest)."""
    return ev.commit is None and ev.role == "system" and type(ev.meta.get("erasure")) is dict
