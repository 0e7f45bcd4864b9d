"""The file backend's half of the O(1) control state (issue 15): the session's system lines found by a byte search of
its log, and the cached state kept beside it (control-state.json). control.revocation folds what this finds; this
module parses no line beyond the ones it is asked to check and knows nothing of what a control record means.

Every control event's line holds its text verbatim: canonical JSON (docs/FORMAT.md §1) writes the top-level field as
`"text":"[control record: revoke]"` (restore, supersede alike: ledger.controls.CONTROL_TEXTS, SUPERSEDE_TEXT), with
nothing to escape. A user's text holding these bytes is escaped (`\\"text\\":…`); an erased line has no text. An
erasure record's line holds `"text":"[erasure record: ` (ledger.event.erasure_record_text) the same way. A match
elsewhere (a meta value) is a line the caller parses for nothing.

control-state.json is derived data, a hint like tail.json (tailrecord.py): written atomically (temp file, rename),
never fsynced; control.state_file says what it holds and when it is trusted.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

import orjson

from ledger.controls import CONTROL_TEXTS
from ledger.event import erasure_record_text
from ledger.supersessions import SUPERSEDE_TEXT
from storage.common.fsmode import open_private, write_all
from storage.contract import LineMark, SystemLines
from storage.files.ledger import tailrecord

NEEDLE = b'"text":"[control record: '
ERASURE_NEEDLE = b'"text":"[erasure record: '
assert all(('"text":"' + t).encode().startswith(NEEDLE) for t in (*CONTROL_TEXTS.values(), SUPERSEDE_TEXT))
assert ('"text":"' + erasure_record_text(1)).encode().startswith(ERASURE_NEEDLE)
READ_SIZE = 1 << 22

STATE_FILE = "control-state.json"
MAX_STATE_BYTES = 256 << 20  # a cached state this big is not one control.state_file wrote: derive it again


class _Reader(Protocol):
    def read(self, n: int, /) -> bytes: ...
    def seek(self, offset: int, /) -> int: ...


def scan(
    f: _Reader, offset: int, first: int, count: int, needles: tuple[bytes, ...]
) -> tuple[list[tuple[int, bytes]], tuple[int, bytes] | None]:
    """Lines first..count-1 of a log read from `f`, positioned at byte `offset`, the start of line `first` (no parse).

    Returns the lines holding one of `needles` as (seq, line without its newline), in order — every control event
    among them — and (byte offset, bytes) of line count-1, or None when the file ends before it."""
    out: list[tuple[int, bytes]] = []
    seq, pos, buf = first, offset, b""  # seq: the line buf starts with; pos: buf's offset in the file
    while True:
        block = f.read(READ_SIZE)
        if not block:
            return out, None
        buf = buf + block if buf else block
        end = buf.rfind(b"\n") + 1  # whole lines only: a line across reads is searched once it is whole
        if end == 0:
            continue
        at = 0
        for i in sorted({i for needle in needles for i in _finds(buf, needle, end)}):
            ls = buf.rfind(b"\n", 0, i) + 1
            if ls < at:
                continue  # a second match in a line already taken
            line = seq + buf.count(b"\n", at, ls)
            if line >= count:
                break
            le = buf.index(b"\n", i)
            out.append((line, buf[ls:le]))
            seq, at = line + 1, le + 1
            if seq == count:  # that match was the last line
                return out, (pos + ls, out[-1][1])
        n = buf.count(b"\n", at, end)
        if seq + n >= count:
            p = at
            for _ in range(count - 1 - seq):
                p = buf.index(b"\n", p) + 1
            return out, (pos + p, buf[p : buf.index(b"\n", p)])
        seq, pos = seq + n, pos + end
        if end < len(buf):  # the cut line is read again with the next block: no copy of each block to join it
            f.seek(pos)
        buf = b""


def _finds(buf: bytes, needle: bytes, end: int) -> list[int]:
    out = []
    i = buf.find(needle, 0, end)
    while i >= 0:
        out.append(i)
        i = buf.find(needle, i + 1, end)
    return out


def candidates(path: Path, count: int) -> list[int]:
    """The seqs among the first `count` lines of the log at `path` that may be control events, by a byte search."""
    with open(path, "rb") as f:
        return [seq for seq, _ in scan(f, 0, 0, count, (NEEDLE,))[0]]


def chain_of(raw: bytes, seq: int) -> str | None:
    """The chain hash line `raw` states, when it claims `seq`; else None (no other check: the caller's fold parses)."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(obj) is not dict or obj.get("seq") != seq or type(obj.get("chain")) is not str:
        return None
    return str(obj["chain"])


def system_lines(log: Path, count: int, head: str, after: LineMark | None) -> SystemLines | None:
    """The lines among the first `count` of the log at `log` after `after` (from the first line when None) that may be
    system records: control records only from the first line (nothing folded yet can be erased), control and erasure
    records after a mark. None when the log is not the one the marks describe: the line of after.seq (at its span,
    else found by bisection: an erasure shortened a line before it) does not end the chain on after.chain, or line
    count-1 does not end it on `head`. OSError from opening or reading the log."""
    with open(log, "rb") as f:
        if after is None:
            lines, last = scan(f, 0, 0, count, (NEEDLE,))
        else:
            raw = tailrecord.line_at(f.fileno(), after.start, after.end)
            if raw is None:
                span = _find_line(f.fileno(), after.seq)
                if span is None:
                    return None
                after = after._replace(start=span[0], end=span[1])
                raw = tailrecord.line_at(f.fileno(), after.start, after.end)
            if raw is None or chain_of(raw, after.seq) != after.chain:
                return None
            if after.seq == count - 1:
                return SystemLines([], after) if after.chain == head else None
            f.seek(after.end)
            lines, last = scan(f, after.end, after.seq + 1, count, (NEEDLE, ERASURE_NEEDLE))
    if last is None or chain_of(last[1], count - 1) != head:
        return None
    return SystemLines(lines, LineMark(count - 1, head, last[0], last[0] + len(last[1]) + 1))


def _find_line(fd: int, seq: int) -> tuple[int, int] | None:
    """(start, end) of the line of `seq` in the log open at `fd`, by bisection (O(log n) lines parsed), or None."""
    size = os.fstat(fd).st_size
    back = min(size, tailrecord.MAX_LINE_BYTES)
    end_bytes = os.pread(fd, min(back, 1 << 16), size - min(back, 1 << 16))
    if not end_bytes.endswith(b"\n"):
        return None  # a torn tail: the ledger's own open deals with it
    i = end_bytes.rfind(b"\n", 0, len(end_bytes) - 1)
    if i < 0 and len(end_bytes) < size:
        return None  # a last line longer than the read: leave it to the full derivation
    last = size - len(end_bytes) + i + 1
    try:
        last_seq = orjson.loads(end_bytes[i + 1 :]).get("seq")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    if type(last_seq) is not int:
        return None
    return tailrecord.find_line(fd, seq, size, last, last_seq + 1)


def state_path(session_dir: Path) -> Path:
    return session_dir / STATE_FILE


def load_state(session_dir: Path) -> bytes | None:
    """The bytes of the session's control-state.json, or None (no file, unreadable, too big to be one)."""
    try:
        with open(state_path(session_dir), "rb") as f:
            data = f.read(MAX_STATE_BYTES + 1)
    except OSError:
        return None
    return None if len(data) > MAX_STATE_BYTES else data


def save_state(session_dir: Path, data: bytes) -> None:
    """Replace control-state.json atomically (a temp file of this call's own, rename); not fsynced: a hint."""
    path = state_path(session_dir)
    tmp = path.with_name(f".{STATE_FILE}.{os.urandom(8).hex()}.tmp")
    fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW)
    try:
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
