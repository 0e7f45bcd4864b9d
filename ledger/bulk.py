"""Events encoded in bulk: every line's bytes built up to its chain hash, then the chain, in order.

An event's line is JCS of its 12 fields (docs/FORMAT.md §3). All of it but `prev` and
`chain` depends only on the message, its seq, id, salt and ts: parse, validate, content
commitment, digest, the line's bytes. So a block of messages is encoded with those two
fields left as placeholders (`encode_lines`, `encode_messages`: pure), which can run in
other processes (ledger/bulkpool.py); `chain` then walks the blocks in order, computing
each chain hash from the previous one and the digest and writing both into the line.

The bytes are the ones `make_event(...).to_line()` writes (ledger/event.py, the
reference): assembled by hand from values whose JSON spelling is fixed (validated role,
session, ts, id; hex; integers) and orjson's spelling of text and meta, the same bytes
orjson writes inside a whole line. tests/storage/test_bulk_import.py holds them equal.
"""

from __future__ import annotations

import hashlib
import os
import sys
from array import array
from binascii import hexlify
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import orjson

from ledger.canonical import MAX_SAFE_INT, plain_value, vouched
from ledger.event import (
    FORMAT_VERSION,
    MAX_META_BYTES,
    MAX_META_DEPTH,
    MAX_TEXT_BYTES,
    ROLES,
    SALT_BYTES,
    TAG_CHAIN,
    TAG_CONTENT,
    TAG_EVENT,
    check_sizes,
)
from ledger.messages import UTF8_BOM, ImportError_, Message, import_message, parse_import_line, record_problem

ID_BYTES = SALT_BYTES + 16  # random bytes per event: its salt, then the 16 bytes of its id
HOLE = b"0" * 64  # where prev and chain go, until `chain` writes them
CHAIN_AT = len(b'{"chain":"')  # a line's chain hash starts here
assert FORMAT_VERSION == 1  # the templates below spell "v":1
_DIGEST_INPUT = TAG_EVENT + b'{"commit":"%s","id":"evt_%s","role":"%s","seq":%d,"session":"%s","ts":"%s","v":1}'
_LINE = (
    b'{"chain":"' + HOLE + b'","digest":"%s","id":"evt_%s","meta":%s,"prev":"' + HOLE
    + b'","role":"%s","salt":"%s","seq":%d,"session":"%s","text":%s,"ts":"%s","v":1}\n'
)
_PREV_AT = len(_LINE.split(b"%s,")[0] % (HOLE, b"0" * 32)) + len(b',"prev":"')  # from the line's start, less len(meta)
_ROLE_BYTES = {r: r.encode() for r in ROLES}
_ASCII_TEXT_MAX = MAX_TEXT_BYTES // 4  # check_sizes: an ASCII text this long or shorter is within the limit
_CONTENT = b'{"meta":%s,"role":"%s","text":%s}\n'  # one message as ledger/imports.py's content hash reads it
_CONTENT_TS = b'{"meta":%s,"role":"%s","text":%s,"ts":"%s"}\n'
_PLAIN_ROLES = frozenset(r for r in ROLES if r != "system")
_IMPORT_KEYS = frozenset({"role", "text", "meta", "ts"})
_sha256 = hashlib.sha256
_dumps = orjson.dumps
_loads = orjson.loads
_DecodeError = orjson.JSONDecodeError
_SORT = orjson.OPT_SORT_KEYS

# The salt source: os.urandom, read in one call per block (a test may put a seeded stream here).
random_bytes: Callable[[int], bytes] = os.urandom


def random_ids(n: int) -> bytes:
    """Salts and ids for `n` events: ID_BYTES each, the salt first."""
    return random_bytes(n * ID_BYTES)


@dataclass(slots=True)
class Block:
    """A block of events encoded up to their chain hash (prev and chain are HOLE in `data`).

    `starts[i]` is where event i's line begins in `data`; its prev goes at `prevs[i]`,
    its chain at starts[i] + CHAIN_AT; `digests` holds the 32 raw bytes of each digest.
    For an import, `lines` counts the input lines read (blank ones too), `first_text` is the
    number of the first non-blank one (0: none) and `blank_from` the first of the blank lines
    that end the block (0: none); `error` is the first bad line's (number, message).
    """

    seq: int  # of the first event
    data: bytearray = field(default_factory=bytearray)
    starts: array[int] = field(default_factory=lambda: array("Q"))
    prevs: array[int] = field(default_factory=lambda: array("Q"))
    digests: bytearray = field(default_factory=bytearray)
    content: bytearray | None = None  # imports.content_hash's input for these events, when asked
    lines: int = 0
    first_text: int = 0
    blank_from: int = 0
    error: tuple[int, str] | None = None
    heads: bytearray = field(default_factory=bytearray)  # filled by `chain`: the raw chain hash after each event, 32 bytes each

    def head(self, i: int) -> bytes:
        """The chain hash after event i (once chained)."""
        return bytes(self.heads[32 * i : 32 * i + 32])

    def marks(self) -> array[int]:
        """The first 8 bytes of each chain hash as a big-endian integer (the writer's marks), computed in C."""
        words = array("Q")
        words.frombytes(self.heads)
        out = words[::4]
        if sys.byteorder == "little":
            out.byteswap()
        return out

    @property
    def count(self) -> int:
        return len(self.starts)


def _append(
    block: Block, session: bytes, seq: int, role: str, text_json: bytes, meta_bytes: bytes, ts: bytes, ids: bytes, at: int
) -> None:
    """Encode one event (its fields already validated; the text as orjson spells it) at the end of `block`."""
    salt = ids[at : at + SALT_BYTES]
    id_hex = hexlify(ids[at + SALT_BYTES : at + ID_BYTES])
    commit = _sha256(b"".join((TAG_CONTENT, salt, b'{"meta":', meta_bytes, b',"text":', text_json, b"}"))).digest()
    role_b = _ROLE_BYTES[role]
    digest = _sha256(_DIGEST_INPUT % (hexlify(commit), id_hex, role_b, seq, session, ts)).digest()
    data = block.data
    start = len(data)
    block.starts.append(start)
    block.prevs.append(start + _PREV_AT + len(meta_bytes))
    block.digests += digest
    data += _LINE % (hexlify(digest), id_hex, meta_bytes, role_b, hexlify(salt), seq, session, text_json, ts)


def encode_messages(session: str, seq: int, messages: Sequence[Message], now: str, ids: bytes) -> Block:
    """Messages already validated (validate_message), as the events at seq, seq+1, ...; ts None is `now`."""
    block = Block(seq)
    s = session.encode()
    for i, m in enumerate(messages):
        meta_bytes = _dumps(m.meta, option=_SORT)
        _append(block, s, seq + i, m.role, _dumps(m.text), meta_bytes, (m.ts or now).encode(), ids, i * ID_BYTES)
    return block


def encode_lines(
    session: str,
    lines: Sequence[bytes],
    first: int,
    *,
    seq0: int,
    now: str,
    latest: str,
    allow_system: bool,
    ids: bytes,
    content: bool,
) -> Block:
    """Lines `first`, `first`+1, ... of an import file (1-based), each message as the event at seq0 + its line - 1.

    The rules are parse_import's (ledger/messages.py): a line that is not plainly acceptable is
    handed to it, and its ImportError_ becomes `error` (the block stops there). A blank line
    followed by a message in the block is that error too; one before the block is the
    caller's to see (`first_text`). Lines after blank ones are numbered as if they were
    messages: a file where they are is refused anyway.
    """
    block = Block(seq0 + first - 1)
    if content:
        block.content = bytearray()
    s = session.encode()
    blank = 0
    n = first - 1
    k = 0  # events so far: the k-th takes the k-th id
    for raw in lines:
        n += 1
        if n == 1 and raw.startswith(UTF8_BOM):
            raw = raw[len(UTF8_BOM) :]
        stripped = raw.strip()
        if not stripped:
            blank = blank or n
            continue
        if blank:
            block.error = (blank, "empty line (blank lines are accepted only at the end of the file)")
            break
        block.first_text = block.first_text or n
        try:
            role, _text, ts, meta_bytes, text_json = _message(stripped, n, allow_system, latest)
        except ImportError_ as exc:
            block.error = (exc.line, str(exc).removeprefix(f"line {exc.line}: "))
            break
        _append(block, s, seq0 + n - 1, role, text_json, meta_bytes, (ts or now).encode(), ids, k * ID_BYTES)
        k += 1
        if content:
            assert block.content is not None
            if ts is None:
                block.content += _CONTENT % (meta_bytes, _ROLE_BYTES[role], text_json)
            else:
                block.content += _CONTENT_TS % (meta_bytes, _ROLE_BYTES[role], text_json, ts.encode())
    block.lines = n - first + 1
    block.blank_from = blank
    return block


def _message(stripped: bytes, n: int, allow_system: bool, latest: str) -> tuple[str, str, str | None, bytes, bytes]:
    """Line `n`'s (role, text, ts, meta's canonical bytes, the text's JSON): the plain case here, anything else by
    import_message.

    The line is parsed once, by orjson, and kept when the checks below can vouch for its value (what loads_strict
    would return: no float, no integer out of range, no duplicate key); else the strict parser alone parses it
    (one decoder per thread, ledger/canonical.py). For the plain message the checks are fused with validation
    and with the encoding the event needs anyway: the duplicate-key test is loads_plain's colon count
    (canonical.vouched) taken from the members' own JSON, `meta`'s sorted bytes and the text's, not from a
    second serialisation of the whole line (a compact output's colons are its members' plus those in its
    strings, and orjson spells a string the same inside a line as alone), and only `meta` is walked.
    """
    try:
        obj = _loads(stripped)
    except _DecodeError:
        obj = None
    else:
        if type(obj) is dict and obj.keys() <= _IMPORT_KEYS and "ts" not in obj:
            role, text, meta = obj.get("role"), obj.get("text"), obj.get("meta", {})
            if type(role) is str and type(text) is str and type(meta) is dict:
                meta_bytes = _dumps(meta, option=_SORT)
                text_json = _dumps(text)
                flat = True  # meta holds no container (its depth is 1)
                for v in meta.values():
                    t = type(v)
                    if t is not str and (t is not int or not -MAX_SAFE_INT <= v <= MAX_SAFE_INT):
                        flat = False
                        break
                if (flat or plain_value(meta)) and b"\\u003" not in stripped and stripped.count(b":") == (
                    len(obj) + (0 if role in _ROLE_BYTES else role.count(":")) + text_json.count(b":") + meta_bytes.count(b":")
                ):
                    if (
                        (role in _PLAIN_ROLES and text[:1] != "[")  # record_problem: only a "[" text or a system role can be a record
                        or ((role in _PLAIN_ROLES or (allow_system and role == "system" and "erasure" not in meta)) and record_problem(role, text, meta) is None)
                    ) and (
                        # in the domain without a walk: ASCII only (so every key is), and fewer containers
                        # than the depth limit (floats and integers out of range are refused above)
                        meta_bytes.isascii() and (flat or meta_bytes.count(b"{") + meta_bytes.count(b"[") <= MAX_META_DEPTH)
                        and text and not text.isspace()  # text.strip() is not empty, without the copy
                    ):
                        if len(text) <= _ASCII_TEXT_MAX and len(meta_bytes) <= MAX_META_BYTES and text.isascii():
                            return role, text, None, meta_bytes, text_json  # check_sizes, decided without encoding
                        try:
                            check_sizes(text, meta_bytes)
                        except ValueError:
                            pass
                        else:
                            return role, text, None, meta_bytes, text_json
                    plain = True
                else:
                    plain = False
            else:
                plain = vouched(stripped, obj)
        else:
            plain = vouched(stripped, obj)
        if not plain:
            obj = None
    if obj is None:
        obj = parse_import_line(stripped, n, plain_tried=True)
    m = import_message(obj, n, allow_system=allow_system, latest=latest)
    return m.role, m.text, m.ts, _dumps(m.meta, option=_SORT), _dumps(m.text)


def chain(block: Block, prev: bytes) -> bytes:
    """Write each event's prev and chain hash into the block, from `prev` (the chain head before it); the new head."""
    data = block.data
    digests = bytes(block.digests)
    heads = block.heads
    heads.clear()
    prev_hex = hexlify(prev)
    tag = TAG_CHAIN
    at = 0
    for start, prev_at in zip(block.starts, block.prevs, strict=True):
        prev = _sha256(tag + prev + digests[at : at + 32]).digest()
        at += 32
        data[prev_at : prev_at + 64] = prev_hex
        prev_hex = hexlify(prev)
        start += CHAIN_AT
        data[start : start + 64] = prev_hex
        heads += prev
    return prev


__all__ = ["CHAIN_AT", "HOLE", "ID_BYTES", "Block", "chain", "encode_lines", "encode_messages", "random_ids"]

