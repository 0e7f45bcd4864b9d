"""One strict parser: everything read from outside is refused with one line naming where, or parsed soundly.

Issue 17 §3. `loads_strict` refuses duplicate keys at any depth, non-finite numbers, floats (unless the
caller allows them), integers out of ±(2^53-1) however long, lone surrogates and bad UTF-8, each with a
CanonicalError naming the JSON path, never another exception; its fast path never accepts what the
careful parser refuses (a property test). The envelope attack that passed the old length test is refused,
and hostile receipts and import files make the command lines exit 2 with one line, never a traceback.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli.prog_ledger import main as ledger_main
from ledger.canonical import MAX_SAFE_INT, CanonicalError, JSONSyntaxError, _loads_careful, loads_plain, loads_strict
from receipts.body import MalformedReceipt, parse_receipt
from receipts.keys import parse_public_key
from storage.files.ledger.store import Ledger
from storage.files.receipts.api import verify_bytes

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "tests" / "vectors"


def refusal(data: bytes | str, **kw: object) -> str:
    with pytest.raises(CanonicalError) as err:
        loads_strict(data, "doc", **kw)  # type: ignore[arg-type]
    message = str(err.value)
    assert "\n" not in message and message.startswith("doc")
    return message


class TestRefusedWithTheirPath:
    @pytest.mark.parametrize(
        ("data", "where", "what"),
        [
            (b'{"a": 1, "a": 2}', "$", "duplicate key 'a'"),
            (b'{"x": [{"k": {"b": 1, "b": 1}}]}', "$.x[0].k", "duplicate key 'b'"),
            (b'{"a":1e400}', "$.a", "not finite"),
            (b'[-1e400]', "$[0]", "not finite"),
            (b'{"a": [NaN]}', "$.a[0]", "NaN"),
            (b'{"a": Infinity}', "$.a", "Infinity"),
            (b'{"n": ' + b"1" * 5000 + b"}", "$.n", "5000 digits"),
            (b'{"n": -' + b"9" * 4400 + b"}", "$.n", "4400 digits"),
            (b'{"n": 9007199254740992}', "$.n", "outside"),
            (b'{"n": 18446744073709551616}', "$.n", "outside"),
            (b'{"f": 1.0}', "$.f", "not an integer"),
            (b'{"s": "a\\ud800b"}', "$.s", "lone surrogate"),
            (b'{"s": ["\\udfff"]}', "$.s[0]", "lone surrogate"),
            (b'{"\\ud800": 1}', "$", "lone surrogate"),
        ],
        ids=["dup", "dup-deep", "1e400", "-1e400", "nan", "infinity", "5000-digits", "neg-4400-digits", "2^53",
             "2^64", "float", "surrogate", "surrogate-in-list", "surrogate-key"],
    )
    def test_each_refusal_is_one_line_naming_the_json_path(self, data: bytes, where: str, what: str) -> None:
        message = refusal(data)
        assert f"doc: {where}: " in message and what in message

    def test_invalid_utf8_and_bad_syntax_are_a_syntax_error(self) -> None:
        for data in (b'{"a": "\xff"}', b'{"a": }', b"", b"\xef\xbb\xbf{}", b"[1] [2]"):
            with pytest.raises(JSONSyntaxError):
                loads_strict(data, "doc")

    def test_a_str_with_a_raw_lone_surrogate_is_refused(self) -> None:
        assert "lone surrogate" in refusal('{"a": "\ud800"}')

    def test_nesting_past_the_interpreter_is_one_line_not_a_recursion_error(self) -> None:
        refusal(b"[" * 100_000 + b"]" * 100_000)

    def test_max_depth_is_enforced_when_asked(self) -> None:
        deep = b'{"a":' * 5 + b"1" + b"}" * 5
        assert loads_strict(deep, "doc", max_depth=5) is not None
        assert "nesting deeper than 4" in refusal(deep, max_depth=4)

    def test_floats_are_parsed_only_when_the_caller_allows_them(self) -> None:
        assert "not an integer" in refusal(b"[1.5]")
        assert loads_strict(b"[1.5, 2e3]", "doc", allow_floats=True) == [1.5, 2000.0]
        # non-finite stays refused either way
        assert "not finite" in refusal(b"[1e999]", allow_floats=True)

    def test_valid_surrogate_pairs_escapes_and_the_safe_integer_range_are_accepted(self) -> None:
        data = b'{"e":"\\ud83d\\ude00","u":"\\u00e9","lo":-9007199254740991,"hi":9007199254740991,"z":-0}'
        assert loads_strict(data) == {"e": "😀", "u": "é", "lo": -MAX_SAFE_INT, "hi": MAX_SAFE_INT, "z": 0}


json_text = st.recursive(
    st.sampled_from(
        [b"0", b"-0", b"7", b"1.0", b"1e2", b"1E400", b"-1e400", b"9007199254740991", b"9007199254740992",
         b"18446744073709551616", b"1" * 30, b"true", b"null", b"NaN", b'"a"', b'"\\u0041"', b'"\\ud800"',
         b'"\\ud83d\\ude00"', b'"\xc3\xa9"', b'"\xff"', b'"2024-01-01T00:00:00.5Z"']
    ),
    lambda kids: st.lists(kids, max_size=4).map(lambda xs: b"[" + b",".join(xs) + b"]")
    | st.lists(st.tuples(st.sampled_from([b'"a"', b'"b"', b'"c"']), kids), max_size=4).map(
        lambda kv: b"{" + b",".join(k + b":" + v for k, v in kv) + b"}"
    )
    | st.tuples(kids, st.sampled_from([b" ", b"\r\n", b"\t"])).map(lambda t: t[0] + t[1]),
    max_leaves=12,
)


def verdict(parse: Callable[[bytes], object], data: bytes) -> tuple[str, object]:
    try:
        return "ok", repr(parse(data))  # repr: 1 and 1.0 are equal but not the same value
    except CanonicalError as exc:
        return type(exc).__name__, None


class TestFastPathIsSound:
    @settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(json_text, st.booleans(), st.sampled_from([None, 2, 3]))
    def test_the_fast_path_accepts_exactly_what_the_careful_parser_accepts(
        self, data: bytes, floats: bool, depth: int | None
    ) -> None:
        fast = verdict(lambda d: loads_strict(d, "doc", allow_floats=floats, max_depth=depth), data)
        careful = verdict(lambda d: _loads_careful(d, "doc", floats, depth), data)
        assert fast == careful

    @settings(max_examples=300, deadline=None)
    @given(st.binary(max_size=40))
    def test_arbitrary_bytes_raise_nothing_but_canonical_error(self, data: bytes) -> None:
        try:
            loads_strict(data, "doc")
        except CanonicalError:
            pass


spaced_text = st.recursive(
    st.sampled_from(
        [b"0", b"7", b"1.0", b"9007199254740992", b"null", b"true", b'"a"', b'":"', b'"x:y"', b'"\\u003a"', b'"\\u003A"',
         b'"\\u0041"', b'"\xc3\xa9:"', b'"\\ud800"']
    ),
    lambda kids: st.tuples(st.lists(kids, max_size=4), st.sampled_from([b",", b", ", b" ,\t"])).map(lambda t: b"[" + t[1].join(t[0]) + b"]")
    | st.tuples(
        st.lists(st.tuples(st.sampled_from([b'"a"', b'"b"', b'"a:"', b'":"', b'"\\u003a"']), kids), max_size=4),
        st.sampled_from([b":", b": ", b" : "]),
        st.sampled_from([b",", b", "]),
    ).map(lambda t: b"{" + t[2].join(k + t[1] + v for k, v in t[0]) + b"}"),
    max_leaves=12,
)


class TestPlainParseIsSound:
    """loads_plain (the import's hot loop) answers only with the careful parser's value, spaced lines included."""

    @settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(spaced_text)
    def test_whenever_the_plain_parse_answers_the_careful_parser_gives_the_same_value(self, data: bytes) -> None:
        fast = loads_plain(data)
        if fast is not None:
            assert verdict(lambda d: _loads_careful(d, "doc", False, None), data) == ("ok", repr(fast))

    @pytest.mark.parametrize(
        "data",
        [b'{"a": 1, "a": 2}', b'{"a": "x", "a": "::"}', b'{"a:": 1, "a:": 1}', b'[{"b": {"c": 1, "c": 1}}]',
         b'{"a": 1, "a": "\\u003a"}', b'{"a": 1, "a": "\\u003A"}', b'{"a": 1.5}', b'{"a": 9007199254740992}'],
    )
    def test_a_duplicate_key_a_float_or_an_unsafe_integer_is_left_to_the_careful_parser(self, data: bytes) -> None:
        assert loads_plain(data) is None
        with pytest.raises(CanonicalError):
            loads_strict(data, "doc")

    def test_a_line_as_json_dumps_writes_it_is_parsed_plainly(self) -> None:
        obj = {"role": "user", "text": "at 10:30: the cat", "meta": {"dia_id": "D1:3", "n": [1, {"k": "v"}]}}
        assert loads_plain(json.dumps(obj).encode()) == obj
        assert loads_plain(json.dumps(obj, indent=1).encode()) == obj


# -- the envelope attack -------------------------------------------------------
def envelope_with_two_payloads(raw: bytes, forged_body: bytes) -> bytes:
    """The signed envelope with a forged `payload` member first and the real one last.

    Float literals in an extra member (DSSE consumers ignore unknown fields) grow on
    re-serialisation (`1E2` -> `100.0`) by exactly what dropping the first payload saves,
    which fooled the old "same length" fast path.
    """
    env = json.loads(raw)
    forged = base64.b64encode(forged_body).decode()
    head = b'{"payload":"' + forged.encode() + b'",'
    middle = orjson.dumps({"payloadType": env["payloadType"], "signatures": env["signatures"]})[1:-1]
    dropped = len(b'"payload":"' + forged.encode() + b'",')
    n, odd = divmod(dropped, 2)
    pad = b',"pad":[' + b",".join([b"1E2"] * n + ([b"1E1"] if odd else [])) + b"]"
    data = head + middle + pad + b',"payload":"' + env["payload"].encode() + b'"}'
    assert len(orjson.dumps(orjson.loads(data))) == len(data)  # the old fast path's test passes
    return data


class TestEnvelopeAttack:
    def test_two_payload_keys_padded_with_floats_are_refused_as_malformed(self) -> None:
        pub = parse_public_key((VECTORS / "receipt_v1_pubkey.json").read_text())
        raw = (VECTORS / "receipt_v1.json").read_bytes()
        assert verify_bytes(raw, trusted=[pub]).verdict == "verified"
        data = envelope_with_two_payloads(raw, b'{"forged":true}')
        with pytest.raises(MalformedReceipt, match="duplicate key 'payload'"):
            verify_bytes(data, trusted=[pub])

    def test_a_duplicate_key_inside_the_signed_body_is_refused(self) -> None:
        raw = (VECTORS / "receipt_v1.json").read_bytes()
        env = json.loads(raw)
        body = base64.b64decode(env["payload"])
        twice = body[:-1] + b',"session":"mallory"}'
        env["payload"] = base64.b64encode(twice).decode()
        with pytest.raises(MalformedReceipt, match=r"payload: duplicate key 'session'"):
            parse_receipt(json.dumps(env).encode())

    def test_a_lone_surrogate_in_a_memory_text_is_malformed_naming_where(self) -> None:
        raw = (VECTORS / "receipt_v1.json").read_bytes()
        env = json.loads(raw)
        body = json.loads(base64.b64decode(env["payload"]))
        body["memories"][0]["event"]["text"] = "bad \ud800 text"
        env["payload"] = base64.b64encode(json.dumps(body).encode()).decode()
        with pytest.raises(MalformedReceipt, match=r"payload\.memories\[0\]\.event\.text: .*lone surrogate"):
            parse_receipt(json.dumps(env).encode())


# -- the command lines -----------------------------------------------------------
def _hostile_receipts(tmp: Path) -> dict[str, Path]:
    raw = (VECTORS / "receipt_v1.json").read_bytes()
    env = json.loads(raw)
    body = json.loads(base64.b64decode(env["payload"]))
    out = {}
    surrogate = dict(body)
    surrogate["response"] = dict(body["response"], event=dict(body["response"]["event"], text="answer \ud800"))
    long_int = base64.b64decode(env["payload"])[:-1] + b',"n":' + b"7" * 5000 + b"}"
    for name, payload in (
        ("surrogate", json.dumps(surrogate).encode()),
        ("long-int", long_int),
    ):
        path = tmp / f"{name}.json"
        path.write_text(json.dumps(dict(env, payload=base64.b64encode(payload).decode())))
        out[name] = path
    path = tmp / "long-int-envelope.json"
    path.write_bytes(raw.rstrip()[:-1] + b', "n": ' + b"1" * 5000 + b"}")
    out["long-int-envelope"] = path
    return out


class TestCommandLines:
    def test_receipts_verify_exits_2_with_one_line_on_a_surrogate_or_a_5000_digit_integer(self, tmp_path: Path) -> None:
        for name, path in _hostile_receipts(tmp_path).items():
            proc = subprocess.run(
                [sys.executable, "-m", "receipts", "verify", str(path), "--trust", str(VECTORS / "receipt_v1_pubkey.json")],
                capture_output=True, text=True, cwd=ROOT, timeout=60,
            )
            assert proc.returncode == 2, (name, proc.stdout, proc.stderr)
            lines = proc.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: ") and "malformed receipt" in lines[0], (name, lines)
            assert "Traceback" not in proc.stderr

    @pytest.mark.parametrize(
        ("line", "what"),
        [
            (b'{"role": "user", "text": "hi", "meta": {"n": ' + b"9" * 5000 + b"}}", "5000 digits"),
            (b'{"role": "user", "text": "hi \\ud800"}', "lone surrogate"),
            (b'{"role": "user", "text": "hi", "meta": {"x": 1e400}}', "not finite"),
            (b'{"role": "user", "text": "hi", "meta": {"x": 0.5}}', "not an integer"),
            (b'{"role": "user", "text": "hi", "text": "forged"}', "duplicate key 'text'"),
        ],
        ids=["5000-digits", "surrogate", "1e400", "float", "dup"],
    )
    def test_ledger_import_refuses_with_one_line_and_writes_nothing(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], line: bytes, what: str
    ) -> None:
        src = tmp_path / "in.jsonl"
        src.write_bytes(b'{"role": "user", "text": "fine"}\n' + line + b"\n")
        data = tmp_path / "data"
        assert ledger_main(["import", str(data), "s1", str(src), "--create"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "line 2" in err[0] and what in err[0] and "nothing was imported" in err[0], err
        assert not Ledger(data).exists("s1") or Ledger(data).head("s1")[0] == 0


class TestTrustFiles:
    def test_a_trust_file_with_two_public_keys_is_refused_not_read_last_wins(self, tmp_path: Path) -> None:
        from receipts.keys import KeyConfigError

        good = (VECTORS / "receipt_v1_pubkey.json").read_text().strip()
        assert parse_public_key(good).key_id.startswith("ed25519:")
        twice = good[:-1] + ', "public_key": "' + "A" * 43 + '="}'
        with pytest.raises(KeyConfigError, match="duplicate key 'public_key'"):
            parse_public_key(twice)
