"""A ledger line is exactly the canonical bytes of its fields plus "\\n"; every verifier path agrees.

Issue 17 §3. CRLF, whitespace, `\\u` escapes of printable characters, a duplicate key, key order, a float
for an integer... each is the named break `non_canonical` in the fast path (verify_stream), the careful
path (ChainWalker.step, which the writer uses) and the parallel verifier, and appends are refused after
it. A property test runs both paths over generated lines and requires the same verdict on every one.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.corrupted import LedgerCorrupted
from ledger.event import GENESIS, TAG_CHAIN, TAG_CONTENT, TAG_EVENT, make_event
from ledger.verify import NON_CANONICAL, ChainWalker, SessionReport, split_lines, verify_stream
from storage.files.ledger.parallel import verify_file_parallel
from storage.files.ledger.store import Ledger

SESSION = "lines"
TS = "2026-01-02T03:04:05.000000Z"


def event_line(seq: int, prev: bytes, text: str = "hello", meta: dict[str, object] | None = None) -> tuple[bytes, bytes]:
    """A canonical line (without newline) and its chain hash."""
    ev = make_event(
        session=SESSION, seq=seq, prev=prev, role="user", text=text, meta=meta if meta is not None else {"i": seq},
        ts=TS, event_id="evt_" + f"{seq:032x}", salt=bytes([seq % 256]) * 32,
    )
    return ev.to_line()[:-1], bytes.fromhex(ev.chain)


def chain_of(lines: int) -> list[bytes]:
    out, prev = [], GENESIS
    for i in range(lines):
        line, prev = event_line(i, prev, text=f"turn {i}: café ☕ \"quoted\" \\ back")
        out.append(line)
    return out


def careful(data: bytes) -> SessionReport:
    """The careful path alone: ChainWalker.step on every line (what the writer runs)."""
    walker = ChainWalker(SESSION)
    for raw, torn in split_lines([data]):
        brk = walker.step(raw, last=torn)
        if brk is not None:
            return SessionReport(SESSION, False, walker.next_seq, walker.head.hex(), brk)
    return SessionReport(SESSION, True, walker.next_seq, walker.head.hex())


def summary(r: SessionReport) -> tuple[object, ...]:
    b = r.brk
    return (r.ok, r.events, r.head) + (() if b is None else (b.line, b.seq, b.kind))


def rehashed(obj: dict[str, object], prev: bytes, meta_json: bytes, text_json: bytes) -> dict[str, object]:
    """Digest and chain recomputed over the given JSON of meta and text (a forger's best effort)."""
    content = b'{"meta":' + meta_json + b',"text":' + text_json + b"}"
    commit = hashlib.sha256(TAG_CONTENT + bytes.fromhex(str(obj["salt"])) + content).hexdigest()
    hashed = {k: obj[k] for k in ("id", "role", "seq", "session", "ts", "v")}
    digest = hashlib.sha256(TAG_EVENT + orjson.dumps({"commit": commit, **hashed}, option=orjson.OPT_SORT_KEYS)).digest()
    return {**obj, "digest": digest.hex(), "prev": prev.hex(), "chain": hashlib.sha256(TAG_CHAIN + prev + digest).hexdigest()}


def variants(line: bytes) -> dict[str, bytes]:
    """Lines with the same fields (so the same digest and chain) in non-canonical bytes."""
    obj = orjson.loads(line)
    sorted_ = orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
    assert sorted_ == line
    pretty = orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2).replace(b"\n", b"")
    return {
        "CRLF": line + b"\r",
        "space after a colon": line.replace(b'"seq":', b'"seq": ', 1),
        "leading space": b" " + line,
        "indented, on one line": pretty,
        "keys in insertion order": orjson.dumps({k: obj[k] for k in reversed(list(obj))}),
        "a \\u escape of a printable character": line.replace(b"turn", b"\\u0074urn", 1),
        "an escaped solidus": line.replace(b'"role":"user"', b'"role":"us\\/er"'.replace(b"\\/", b"")).replace(
            b"back", b"b\\u0061ck", 1
        ),
        "a duplicate key (same value)": line[:-1] + b',"v":1}',
        "a duplicate key (last wins)": line.replace(b'"role":"user"', b'"role":"system","role":"user"', 1),
        "seq written 1.0": line.replace(b'"seq":1,', b'"seq":1.0,', 1),
        "v written 1e0": line.replace(b'"v":1}', b'"v":1e0}', 1),
        "meta integer written 1.0": line.replace(b'"meta":{"i":1}', b'"meta":{"i":1.0}', 1),
        "meta integer written -0": line.replace(b'"meta":{"i":1}', b'"meta":{"i":1,"z":-0}', 1),
    }


class TestNonCanonicalLinesAreANamedBreak:
    def test_the_written_lines_are_canonical_and_verify_on_both_paths(self) -> None:
        data = b"".join(x + b"\n" for x in chain_of(4))
        assert summary(verify_stream(SESSION, [data])) == summary(careful(data))
        assert careful(data).ok and careful(data).events == 4

    def test_every_variant_is_non_canonical_on_both_paths_at_its_line(self) -> None:
        lines = chain_of(4)
        missed = []
        for name, bad in variants(lines[1]).items():
            data = b"".join(x + b"\n" for x in [lines[0], bad, *lines[2:]])
            fast, slow = verify_stream(SESSION, [data]), careful(data)
            if summary(fast) != summary(slow):
                missed.append(f"{name}: fast {summary(fast)} vs careful {summary(slow)}")
            elif fast.brk is None or fast.brk.kind != NON_CANONICAL or fast.brk.line != 2:
                missed.append(f"{name}: {summary(fast)}")
        assert missed == []

    def test_the_break_says_what_differs(self) -> None:
        lines = chain_of(2)
        bad = lines[1].replace(b'"seq":', b'"seq": ', 1)
        brk = careful(lines[0] + b"\n" + bad + b"\n").brk
        assert brk is not None and brk.kind == NON_CANONICAL
        assert brk.expected == f"sha256 {hashlib.sha256(lines[1]).hexdigest()} ({len(lines[1])} bytes)"
        assert brk.found is not None and hashlib.sha256(bad).hexdigest() in brk.found
        assert f"first difference at byte {bad.index(b' ')}" in brk.message and "\n" not in brk.message

    def test_a_duplicate_key_names_it(self) -> None:
        lines = chain_of(2)
        bad = lines[1].replace(b'"role":"user"', b'"role":"system","role":"user"', 1)
        brk = careful(lines[0] + b"\n" + bad + b"\n").brk
        assert brk is not None and brk.kind == NON_CANONICAL and "duplicate key 'role'" in brk.message

    def test_a_non_canonical_line_in_a_ledger_breaks_verify_and_refuses_appends(self, tmp_path: Path) -> None:
        led = Ledger(tmp_path)
        for i in range(3):
            led.append(SESSION, "user", f"message {i}")
        log = led.log_path(SESSION)
        lines = log.read_bytes().split(b"\n")
        lines[1] = lines[1].replace(b'"seq":1,', b'"seq":1.0,', 1)
        log.write_bytes(b"\n".join(lines))
        report = Ledger(tmp_path).verify(SESSION)
        assert not report.ok and report.brk is not None and report.brk.kind == NON_CANONICAL and report.brk.line == 2
        with pytest.raises(LedgerCorrupted, match="non_canonical"):
            Ledger(tmp_path).append(SESSION, "user", "after")
        assert log.read_bytes() == b"\n".join(lines)  # nothing was written

    def test_the_parallel_verifier_defers_to_the_serial_walk_on_a_non_canonical_line(self, tmp_path: Path) -> None:
        lines = chain_of(400)
        path = tmp_path / "events.jsonl"
        path.write_bytes(b"".join(x + b"\n" for x in lines))
        assert verify_file_parallel(path, SESSION, workers=2, min_bytes=1) == (400, verify_stream(SESSION, [path.read_bytes()]).head)
        lines[300] = lines[300].replace(b'"seq":300,', b'"seq": 300,', 1)
        path.write_bytes(b"".join(x + b"\n" for x in lines))
        assert verify_file_parallel(path, SESSION, workers=2, min_bytes=1) is None


# -- the property test: the fast and the careful path agree on every generated line ----------------
_ints = st.one_of(
    st.integers(-(2**53) + 1, 2**53 - 1),
    st.integers(2**53, 2**70),
    st.integers(-(2**70), -(2**53)),
    st.sampled_from([2**64, 2**64 - 1, -(2**63) - 1]),
)
_scalars_json = st.one_of(
    _ints.map(lambda n: str(n).encode()),
    st.sampled_from([b"1" * 5000, b"-" + b"9" * 5000, b"1.0", b"1.5", b"1e2", b"1E400", b"-0", b"-0.0", b"true", b"null", b'"\\ud800"', b'"\\u0041"', b'"a\\/b"']),
    st.text(max_size=8).map(lambda s: orjson.dumps(s) if all(not 0xD800 <= ord(c) <= 0xDFFF for c in s) else b'"x"'),
)
_keys = st.sampled_from([b'"a"', b'"b"', b'"k"', b'"\xc3\xa9"'])


def _obj(items: list[tuple[bytes, bytes]]) -> bytes:
    return b"{" + b",".join(k + b":" + v for k, v in items) + b"}"


_json = st.recursive(
    _scalars_json,
    lambda kids: st.lists(kids, max_size=3).map(lambda xs: b"[" + b",".join(xs) + b"]")
    | st.lists(st.tuples(_keys, kids), max_size=3).map(_obj),
    max_leaves=8,
)


@st.composite
def meta_json(draw: st.DrawFn) -> bytes:
    inner = draw(_json)
    if draw(st.booleans()):  # a chain of objects nested 28-40 deep, around the limit of 32
        depth = draw(st.integers(28, 40))
        leaf = draw(st.sampled_from([b"1", b"[]", b"{}", inner]))
        return b'{"a":' * (depth - 1) + b'{"z":' + leaf + b"}" + b"}" * (depth - 1)
    return _obj([(b'"m"', inner)]) if draw(st.booleans()) else _obj(draw(st.lists(st.tuples(_keys, _json), max_size=3)))


_text_json = st.one_of(
    st.text(max_size=20).map(lambda s: orjson.dumps(s) if all(not 0xD800 <= ord(c) <= 0xDFFF for c in s) else b'"s"'),
    st.sampled_from([b'"lone \\ud800 surrogate"', b'"\\u0068i"', b'"\\ud83d\\ude00"', b'"tab\\u0009"', b'"nl\\n"']),
)


@st.composite
def generated_ledger(draw: st.DrawFn) -> bytes:
    first, prev = event_line(0, GENESIS)
    template = orjson.loads(event_line(1, prev)[0])
    meta, text = draw(meta_json()), draw(_text_json)
    obj = rehashed(template, prev, meta, text)
    if draw(st.booleans()):  # hash the canonical form instead, when there is one
        try:
            m, t = orjson.loads(meta), orjson.loads(text)
            obj = rehashed(template, prev, orjson.dumps(m, option=orjson.OPT_SORT_KEYS), orjson.dumps(t))
        except (orjson.JSONDecodeError, TypeError):
            pass
    fields = {k: orjson.dumps(v) for k, v in obj.items() if k not in ("meta", "text")}
    fields["meta"], fields["text"] = meta, text
    keys = sorted(fields)
    if draw(st.booleans()):
        keys = draw(st.permutations(keys))
    items = [(b'"' + k.encode() + b'"', fields[k]) for k in keys]
    if draw(st.booleans()):  # a duplicate key
        k = draw(st.sampled_from(keys))
        items.insert(draw(st.integers(0, len(items))), (b'"' + k.encode() + b'"', fields[k]))
    sep = draw(st.sampled_from([b",", b",", b",", b", "]))
    line = b"{" + sep.join(k + b":" + v for k, v in items) + b"}"
    line = draw(st.sampled_from([line, line, line + b"\r", b" " + line, line.replace(b'"seq":1', b'"seq":1.0')]))
    tail = draw(st.sampled_from([b"\n", b"\n", b""]))
    return first + b"\n" + line + tail


class TestFastAndCarefulAgree:
    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.large_base_example])
    @given(generated_ledger())
    def test_fast_and_careful_paths_give_the_same_verdict_on_every_generated_line(self, data: bytes) -> None:
        assert summary(verify_stream(SESSION, [data])) == summary(careful(data))

    def test_the_generator_reaches_both_verdicts(self) -> None:
        ok = event_line(1, event_line(0, GENESIS)[1], meta={"a": {"b": [1, 2]}})
        first = event_line(0, GENESIS)[0]
        assert careful(first + b"\n" + ok[0] + b"\n").ok
        assert verify_stream(SESSION, [first + b"\n" + ok[0] + b"\n"]).ok


class TestHostileLinesThroughTheCli:
    @pytest.mark.parametrize(
        "edit",
        [
            lambda line: line.replace(b'"meta":{"i":1}', b'"meta":{"i":' + b"7" * 5000 + b"}", 1),
            lambda line: line.replace(b'"text":"turn', b'"text":"\\ud800turn', 1),
            lambda line: line.replace(b'"meta":{"i":1}', b'"meta":{"i":1e400}', 1),
        ],
        ids=["5000-digit-integer", "lone-surrogate", "1e400"],
    )
    def test_ledger_verify_names_the_line_and_exits_1_without_a_traceback(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: object
    ) -> None:
        from cli.prog_ledger import main

        lines = chain_of(3)
        lines[1] = edit(lines[1])  # type: ignore[operator]
        sdir = tmp_path / "sessions" / SESSION
        sdir.mkdir(parents=True)
        (sdir / "events.jsonl").write_bytes(b"".join(x + b"\n" for x in lines))
        assert main(["verify", str(tmp_path), SESSION]) == 1
        out = capsys.readouterr()
        assert f"BROKEN  {SESSION}: line 2, seq 1, {NON_CANONICAL}" in out.out and "Traceback" not in out.err
