"""C2SP signed notes and checkpoints (receipts/note.py; docs/FORMAT.md §22): encode, sign, parse, verify.

Go's golang.org/x/mod/sumdb/note reads the same bytes: tests/core/test_tlog_go.py checks that with Go itself.
"""

from __future__ import annotations

import base64
import copy
import hashlib

import pytest

from receipts import note as N
from receipts.body import sign_checkpoint
from receipts.keys import SigningKey
from receipts.report import FAIL, NOT_VERIFIABLE, PASS, Rows

KEY = SigningKey.from_seed(hashlib.sha256(b"test note key").digest())
OTHER = SigningKey.from_seed(hashlib.sha256(b"another key").digest())
TS = "2026-01-02T03:04:05.000000Z"


def _cp(key: SigningKey = KEY, size: int = 5, session: str = "alice") -> dict[str, object]:
    return sign_checkpoint(session=session, tree_size=size, root=bytes(range(32)), chain_head="ab" * 32, issued_at=TS, key=key)


def _accepted(raw: bytes, v: N.NoteVerifier) -> bool:
    try:
        note = N.parse_note(raw)
        N.parse_checkpoint_text(note.text)
    except N.MalformedNote:
        return False
    return N.signed_by(note, v) is True


class TestKeys:
    def test_key_hash_is_the_first_four_bytes_of_sha256_of_name_newline_type_and_key(self) -> None:
        name = "example.com/foo"
        expected = hashlib.sha256(name.encode() + b"\n\x01" + KEY.public_raw).digest()[:4]
        assert N.key_hash(name, KEY.public_raw) == int.from_bytes(expected, "big")

    def test_the_spec_example_verifier_key_parses(self) -> None:
        v = N.parse_vkey("example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k")
        assert v.name == "example.com/foo" and v.key_hash == 0x530D903A

    def test_the_spec_example_note_verifies_under_the_spec_example_key(self) -> None:
        v = N.parse_vkey("example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k")
        raw = (
            "This is an example message.\n\n— example.com/foo "
            "Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n"
        )
        assert N.signed_by(N.parse_note(raw), v) is True

    def test_a_verifier_key_round_trips(self) -> None:
        v = N.verifier(KEY.public_key)
        assert N.parse_vkey(v.vkey()) == v
        assert v.name == KEY.key_id.removeprefix("ed25519:") + "/mre"

    @pytest.mark.parametrize(
        "line",
        ["", "name", "name+0000+AQ==", "na me+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k",
         "example.com/foo+530d903b+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k",  # hash does not match
         "example.com/foo+530d903a+AukyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k",  # not type 0x01
         "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U"],  # short key
    )
    def test_a_malformed_verifier_key_is_refused(self, line: str) -> None:
        with pytest.raises(N.MalformedNote):
            N.parse_vkey(line)


class TestCheckpointNote:
    def test_the_checkpoint_note_is_origin_size_root_and_chain_head(self) -> None:
        cp = _cp()
        text = N.checkpoint_text(cp).encode()
        hexid = KEY.key_id.removeprefix("ed25519:")
        root = base64.b64encode(bytes(range(32))).decode()
        assert text == f"{hexid}/mre/alice\n5\n{root}\nmre-chain-head {'ab' * 32}\n"

    def test_a_signed_checkpoint_note_parses_back_to_the_same_tree_head(self) -> None:
        raw = N.sign_checkpoint_note(_cp(), KEY)
        note = N.parse_note(raw)
        cp = N.parse_checkpoint_text(note.text)
        assert (cp.size, cp.root, cp.chain_head) == (5, bytes(range(32)), "ab" * 32)
        assert N.signed_by(note, N.verifier(KEY.public_key)) is True
        assert note.encode() == raw

    def test_the_note_is_deterministic(self) -> None:
        assert N.sign_checkpoint_note(_cp(), KEY) == N.sign_checkpoint_note(_cp(), KEY)

    def test_a_key_never_signs_a_note_over_a_checkpoint_another_key_signed(self) -> None:
        with pytest.raises(N.NotSigned):
            N.sign_checkpoint_note(_cp(OTHER), KEY)

    def test_a_key_never_signs_a_note_over_a_checkpoint_whose_signature_is_bad(self) -> None:
        cp = copy.deepcopy(_cp())
        cp["body"]["tree_size"] = 6  # type: ignore[index]
        with pytest.raises(N.NotSigned):
            N.sign_checkpoint_note(cp, KEY)

    @pytest.mark.parametrize(
        "text",
        ["o\n5\n", "o\n05\n" + base64.b64encode(bytes(32)).decode() + "\n", "o\n5\nAAAA\n", "o\n5\n" + base64.b64encode(bytes(32)).decode(),
         "\n5\n" + base64.b64encode(bytes(32)).decode() + "\n", "o\n-1\n" + base64.b64encode(bytes(32)).decode() + "\n"],
    )
    def test_a_malformed_checkpoint_body_is_refused(self, text: str) -> None:
        with pytest.raises(N.MalformedNote):
            N.parse_checkpoint_text(text)


class TestAttacks:
    def test_every_byte_flipped_of_a_signed_checkpoint_is_refused(self) -> None:
        """Every byte (all of them, no sampling), each with its lowest bit flipped: no mutant is accepted."""
        raw = N.sign_checkpoint_note(_cp(), KEY).encode("utf-8")
        v = N.verifier(KEY.public_key)
        assert _accepted(raw, v)
        slipped = [i for i in range(len(raw)) if _accepted(raw[:i] + bytes([raw[i] ^ 1]) + raw[i + 1 :], v)]
        assert slipped == []

    def test_another_keys_signature_under_our_name_and_hash_is_invalid_not_ignored(self) -> None:
        text = N.checkpoint_text(_cp()).encode()
        v = N.verifier(KEY.public_key)
        forged = N.Note(text, (N.NoteSignature(v.name, v.key_hash, OTHER.sign(text.encode())),)).encode()
        assert N.signed_by(N.parse_note(forged), v) is False

    def test_another_keys_signature_under_our_name_is_an_unknown_key(self) -> None:
        raw = N.sign_note(N.checkpoint_text(_cp()).encode(), OTHER, name=N.key_name(KEY.key_id))
        assert N.signed_by(N.parse_note(raw), N.verifier(KEY.public_key)) is None

    def test_a_signature_of_an_unknown_key_is_ignored_and_ours_still_counts(self) -> None:
        ours = N.sign_checkpoint_note(_cp(), KEY)
        theirs = N.sign_note(N.checkpoint_text(_cp()).encode(), OTHER, name="witness.example")
        both = ours + theirs.split("\n\n", 1)[1]
        note = N.parse_note(both)
        assert len(note.signatures) == 2 and N.signed_by(note, N.verifier(KEY.public_key)) is True

    @pytest.mark.parametrize(
        "raw",
        [b"", b"text\n", b"text\n\n", b"text\n\nno dash\n", b"text\n\n\xe2\x80\x94 name AAAA\n", b"t\x01xt\n\n\xe2\x80\x94 n AAAAAAA=\n", b"\xff\n\n",
         "text\n\n— name QUJDREVG".encode()],  # no final newline
    )
    def test_a_malformed_note_is_refused(self, raw: bytes) -> None:
        with pytest.raises(N.MalformedNote):
            N.parse_note(raw)

    def test_more_signatures_than_the_limit_are_refused(self) -> None:
        line = N.sign_note("x\n", KEY).split("\n\n", 1)[1]
        with pytest.raises(N.MalformedNote):
            N.parse_note("x\n\n" + line * (N.MAX_SIGNATURES + 1))


class TestRows:
    def test_the_signature_row_passes_for_a_trusted_key(self) -> None:
        r = Rows()
        signer = N.note_signature_rows(r, N.parse_note(N.sign_checkpoint_note(_cp(), KEY)), [N.verifier(OTHER.public_key), N.verifier(KEY.public_key)])
        assert signer == N.verifier(KEY.public_key) and r.rows[0].status == PASS

    def test_the_signature_row_fails_when_no_trusted_key_signed(self) -> None:
        r = Rows()
        assert N.note_signature_rows(r, N.parse_note(N.sign_checkpoint_note(_cp(), KEY)), [N.verifier(OTHER.public_key)]) is None
        assert r.rows[0].status == FAIL and r.rows[0].expected and r.rows[0].found

    def test_the_signature_row_is_not_verifiable_without_a_key(self) -> None:
        r = Rows()
        N.note_signature_rows(r, N.parse_note(N.sign_checkpoint_note(_cp(), KEY)), [])
        assert r.rows[0].status == NOT_VERIFIABLE
