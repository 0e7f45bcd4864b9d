"""Witness cosignatures and policies (receipts/cosignature.py; c2sp.org/tlog-cosignature, tlog-policy): the bytes the
spec fixes, a cosigned checkpoint that verifies only as signed, and policies that say exactly what they say."""

from __future__ import annotations

import base64
import hashlib

import pytest

from receipts.cosignature import (
    HEADER,
    check_cosigned,
    cosign,
    cosigned_by,
    key_hash,
    message,
    parse_policy,
    parse_witness_vkey,
    with_cosignatures,
    witness_key,
)
from receipts.keys import SigningKey
from receipts.note import MalformedNote, Note, parse_note, sign_note, verifier

LOG = SigningKey.from_seed(bytes(range(32)))
W1 = SigningKey.from_seed(bytes([1]) * 32)
W2 = SigningKey.from_seed(bytes([2]) * 32)
W3 = SigningKey.from_seed(bytes([3]) * 32)
TEXT = f"{verifier(LOG.public_key).name}/s1\n5\n{base64.b64encode(bytes(32)).decode()}\nmre-chain-head {'ab' * 32}\n"
T = 1_700_000_000


def logged() -> Note:
    return parse_note(sign_note(TEXT, LOG))


def cosigned(*keys: tuple[SigningKey, str]) -> Note:
    n = logged()
    return with_cosignatures(n, [cosign(n.text, k, name, T + i) for i, (k, name) in enumerate(keys)])


def policy_text(quorum: str = "q", group: str = "group q 2 a b c") -> str:
    w = [witness_key(k.public_key, f"w{i}.example/w") for i, k in enumerate((W1, W2, W3), 1)]
    return "\n".join(
        [
            "# a comment",
            f"log {verifier(LOG.public_key).vkey()}",
            f"witness a {w[0].vkey()} http://127.0.0.1:1/w",
            f"  witness\tb {w[1].vkey()}",
            f"witness c {w[2].vkey()}",
            "",
            group,
            f"quorum {quorum}",
        ]
    )


class TestTheSpecBytes:
    def test_the_key_hash_is_sha256_of_name_newline_0x04_key(self) -> None:
        raw = W1.public_raw
        assert key_hash("w.example", raw) == int.from_bytes(hashlib.sha256(b"w.example\n\x04" + raw).digest()[:4], "big")

    def test_the_signed_message_is_the_header_the_time_line_then_the_note_text(self) -> None:
        assert message(TEXT, 1679315147) == b"cosignature/v1\ntime 1679315147\n" + TEXT.encode()
        assert HEADER == "cosignature/v1\n"

    def test_a_cosignature_line_is_key_hash_then_a_big_endian_timestamp_then_64_signature_bytes(self) -> None:
        line = cosign(TEXT, W1, "w.example", T)
        raw = base64.b64decode(line.line().split(" ")[2])
        assert raw[:4] == key_hash("w.example", W1.public_raw).to_bytes(4, "big")
        assert int.from_bytes(raw[4:12], "big") == T
        assert W1.public_key.verify(raw[12:], message(TEXT, T))
        assert len(raw) == 4 + 8 + 64

    def test_a_witness_vkey_round_trips_and_a_log_key_is_not_one(self) -> None:
        w = witness_key(W1.public_key, "w.example")
        assert parse_witness_vkey(w.vkey()) == w
        with pytest.raises(MalformedNote):
            parse_witness_vkey(verifier(W1.public_key).vkey())  # type 0x01: a log's key


class TestACosignatureVerifiesOnlyAsSigned:
    def test_each_witness_is_found_by_its_own_line(self) -> None:
        n = cosigned((W1, "w1.example/w"), (W2, "w2.example/w"))
        got = cosigned_by(n, witness_key(W1.public_key, "w1.example/w"))
        assert got and got.timestamp == T
        assert cosigned_by(n, witness_key(W3.public_key, "w3.example/w")) is None

    def test_a_cosignature_of_another_text_does_not_verify(self) -> None:
        n = logged()
        other = TEXT.replace("\n5\n", "\n6\n")
        forged = with_cosignatures(n, [cosign(other, W1, "w1.example/w", T)])
        assert cosigned_by(forged, witness_key(W1.public_key, "w1.example/w")) is False

    def test_flipping_any_byte_of_a_cosigned_note_loses_the_cosignature_or_the_note(self) -> None:
        """Every byte of the note (text, log signature line, cosignature line), each XOR 0x01: the note no longer
        parses, or the policy's verdict is no longer verified."""
        pol = parse_policy(policy_text(quorum="a", group=""))
        raw = cosigned((W1, "w1.example/w")).encode().encode()
        assert check_cosigned(raw, pol).verdict == "verified"
        kept = 0
        for i in range(len(raw)):
            flipped = raw[:i] + bytes([raw[i] ^ 1]) + raw[i + 1 :]
            try:
                verdict = check_cosigned(flipped, pol).verdict
            except (MalformedNote, UnicodeDecodeError):
                continue
            kept += verdict == "verified"
        assert kept == 0


class TestPolicies:
    def test_two_of_three_needs_two(self) -> None:
        pol = parse_policy(policy_text())
        one = check_cosigned(cosigned((W1, "w1.example/w")).encode(), pol)
        two = check_cosigned(cosigned((W1, "w1.example/w"), (W3, "w3.example/w")).encode(), pol)
        assert one.verdict == "failed" and one.status_of("witness.quorum") == "fail"
        assert two.verdict == "verified" and two.status_of("witness.quorum") == "pass"
        assert two.status_of("witness.b") == "not_verifiable"  # b did not cosign: only the quorum row judges that

    def test_quorum_none_needs_only_the_log(self) -> None:
        text = f"log {verifier(LOG.public_key).vkey()}\nquorum none\n"
        assert check_cosigned(logged().encode(), parse_policy(text)).verdict == "verified"

    def test_a_note_signed_by_another_log_fails(self) -> None:
        other = SigningKey.from_seed(bytes([9]) * 32)
        text = f"log {verifier(other.public_key).vkey()}\nquorum none\n"
        assert check_cosigned(logged().encode(), parse_policy(text)).status_of("note.signature") == "fail"

    def test_any_and_all_thresholds(self) -> None:
        anyp = parse_policy(policy_text(group="group q any a b c"))
        allp = parse_policy(policy_text(group="group q all a b c"))
        n = cosigned((W2, "w2.example/w"))
        assert anyp.satisfied("q", {"b"}) and not allp.satisfied("q", {"a", "b"})
        assert check_cosigned(n.encode(), anyp).status_of("witness.quorum") == "pass"

    def test_groups_of_groups(self) -> None:
        text = policy_text(group="group x 1 a\ngroup y any b c\ngroup xy all x y")
        pol = parse_policy(text.replace("quorum q", "quorum xy"))
        assert pol.satisfied("xy", {"a", "c"}) and not pol.satisfied("xy", {"b", "c"})

    @pytest.mark.parametrize(
        ("edit", "said"),
        [
            (lambda t: t.replace("quorum q", ""), "no quorum line"),
            (lambda t: t + "\nquorum a", "second quorum"),
            (lambda t: t.replace("group q 2 a b c", "group q 4 a b c"), "threshold 4"),
            (lambda t: t.replace("group q 2 a b c", "group q 2 a b z"), "member 'z'"),
            (lambda t: t.replace("group q 2 a b c", "group q two a b c"), "threshold 'two'"),
            (lambda t: t.replace("quorum q", "quorum nobody"), "quorum 'nobody'"),
            (lambda t: t + "\nfrobnicate x", "unknown keyword"),
            (lambda t: t.replace("witness c", "witness a"), "defined twice"),
            (lambda t: t.replace("group q", "group a"), "defined twice"),
            (lambda t: t + f"\nwitness d {witness_key(W1.public_key, 'other.example').vkey()}", "listed twice"),
            (lambda t: t.replace("log ", "log x"), "line 2"),
        ],
    )
    def test_a_malformed_policy_is_refused_naming_the_line(self, edit: object, said: str) -> None:
        with pytest.raises(MalformedNote, match=said):
            parse_policy(edit(policy_text()))  # type: ignore[operator]

    def test_a_huge_or_non_utf8_policy_is_refused(self) -> None:
        with pytest.raises(MalformedNote, match="limit"):
            parse_policy(b"#" * (64 * 1024 + 1))
        with pytest.raises(MalformedNote, match="UTF-8"):
            parse_policy(b"quorum none\n\xff")
