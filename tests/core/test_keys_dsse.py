"""Signing keys (receipts.keys) and DSSE envelopes (receipts.dsse)."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import multiprocessing
import os
import pickle
import stat
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from receipts.dsse import (
    BAD_SIGNATURE,
    UNKNOWN_KEY,
    VERIFIED,
    WRONG_PAYLOAD_TYPE,
    Envelope,
    MalformedEnvelope,
    SignatureCheck,
    has_trusted_signature,
    pae,
    parse_envelope,
    sign_envelope,
    verify_envelope,
)
from receipts.keys import (
    ENV_VAR,
    KeyConfigError,
    PublicKey,
    SigningKey,
    format_public_key,
    key_id,
    parse_private_key,
    parse_public_key,
)
from storage.common import keyfiles as keys_module_files
from storage.common.keyfiles import keys_dir, load_or_create

SEED = bytes(range(32))
SEED_KEY_ID = "ed25519:f7b5252a57c749b1"  # golden: pins the key-id definition
PAYLOAD_TYPE = "application/vnd.mre.receipt+json"
PAYLOAD = b'{"answer":"hello","session":"s1"}'
FAST = settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(autouse=True)
def _no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)


@pytest.fixture(scope="module")
def signer() -> SigningKey:
    return SigningKey.from_seed(SEED)


@pytest.fixture(scope="module")
def stranger() -> SigningKey:
    return SigningKey.from_seed(bytes(range(1, 33)))


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# --- key ids and keys ---------------------------------------------------------


class TestKeyId:
    def test_key_id_is_tagged_sha256_prefix_of_the_raw_public_key(self, signer: SigningKey) -> None:
        digest = hashlib.sha256(b"mre:v1:keyid\x00" + signer.public_raw).hexdigest()
        assert key_id(signer.public_raw) == "ed25519:" + digest[:16]

    def test_key_id_of_the_fixed_seed_matches_the_golden_value(self, signer: SigningKey) -> None:
        assert signer.key_id == SEED_KEY_ID
        assert signer.public_raw.hex() == "03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8"

    @pytest.mark.parametrize("raw", [b"", bytes(31), bytes(33)])
    def test_key_id_refuses_anything_but_32_bytes(self, raw: bytes) -> None:
        with pytest.raises(KeyConfigError, match="expected 32 raw public-key bytes"):
            key_id(raw)


class TestSigningKey:
    def test_signature_verifies_under_the_matching_public_key(self, signer: SigningKey) -> None:
        sig = signer.sign(b"data")
        assert len(sig) == 64
        assert signer.public_key.verify(sig, b"data") is True

    def test_signature_does_not_verify_over_other_data_or_another_key(
        self, signer: SigningKey, stranger: SigningKey
    ) -> None:
        sig = signer.sign(b"data")
        assert signer.public_key.verify(sig, b"datA") is False
        assert stranger.public_key.verify(sig, b"data") is False
        assert signer.public_key.verify(sig[:-1], b"data") is False

    def test_repr_names_the_key_id_and_not_the_secret(self, signer: SigningKey) -> None:
        assert SEED_KEY_ID in repr(signer)
        assert SEED.hex() not in repr(signer)

    def test_public_keys_with_the_same_bytes_are_equal(self, signer: SigningKey) -> None:
        assert PublicKey(signer.public_raw) == signer.public_key
        assert PublicKey(signer.public_raw).key_id == signer.key_id

    def test_key_config_error_survives_pickling_with_its_fields(self) -> None:
        err = KeyConfigError(source="s", expected="e", found="f", hint="h")
        back = pickle.loads(pickle.dumps(err))
        assert (type(back), back.source, back.expected, back.found, back.hint, str(back)) == (
            KeyConfigError,
            "s",
            "e",
            "f",
            "h",
            str(err),
        )


# --- key files -----------------------------------------------------------------


class TestLoadOrCreate:
    def test_key_file_is_created_0600_and_reloads_to_the_same_key_id(self, tmp_path: Path) -> None:
        first = load_or_create(tmp_path)
        key_file = keys_dir(tmp_path) / "signing.key"
        assert _mode(key_file) == 0o600
        assert _mode(keys_dir(tmp_path)) == 0o700
        assert key_file.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
        assert load_or_create(tmp_path).key_id == first.key_id

    def test_public_file_is_the_trust_format_of_the_same_key(self, tmp_path: Path) -> None:
        key = load_or_create(tmp_path)
        pub_text = (keys_dir(tmp_path) / "signing.pub").read_text()
        assert pub_text == format_public_key(key.public_key)
        assert parse_public_key(pub_text).key_id == key.key_id

    @pytest.mark.parametrize("umask", [0o000, 0o277])
    def test_key_file_mode_is_0600_whatever_the_umask(self, tmp_path: Path, umask: int) -> None:
        old = os.umask(umask)
        try:
            load_or_create(tmp_path)
        finally:
            os.umask(old)
        assert _mode(keys_dir(tmp_path) / "signing.key") == 0o600

    def test_creation_leaves_no_temp_files(self, tmp_path: Path) -> None:
        load_or_create(tmp_path)
        assert sorted(p.name for p in keys_dir(tmp_path).iterdir()) == ["signing.key", "signing.pub"]

    @pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o666])
    def test_key_file_readable_by_others_is_refused_not_fixed(self, tmp_path: Path, mode: int) -> None:
        load_or_create(tmp_path)
        key_file = keys_dir(tmp_path) / "signing.key"
        before = key_file.read_bytes()
        os.chmod(key_file, mode)
        with pytest.raises(KeyConfigError) as info:
            load_or_create(tmp_path)
        assert (info.value.expected, info.value.found) == ("mode 0600 or stricter", f"mode {mode:04o}")
        assert _mode(key_file) == mode
        assert key_file.read_bytes() == before

    def test_stricter_key_file_mode_is_accepted(self, tmp_path: Path) -> None:
        first = load_or_create(tmp_path)
        os.chmod(keys_dir(tmp_path) / "signing.key", 0o400)
        assert load_or_create(tmp_path).key_id == first.key_id

    def test_empty_key_file_is_refused_not_overwritten(self, tmp_path: Path) -> None:
        keys_dir(tmp_path).mkdir(mode=0o700)
        fd = os.open(keys_dir(tmp_path) / "signing.key", os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(fd)
        with pytest.raises(KeyConfigError, match="found an empty file"):
            load_or_create(tmp_path)
        assert (keys_dir(tmp_path) / "signing.key").read_bytes() == b""

    def test_symlinked_key_file_is_refused(self, tmp_path: Path) -> None:
        real = load_or_create(tmp_path / "real")
        keys_dir(tmp_path / "linked").mkdir(parents=True, mode=0o700)
        os.symlink(keys_dir(tmp_path / "real") / "signing.key", keys_dir(tmp_path / "linked") / "signing.key")
        with pytest.raises(KeyConfigError, match="regular key file"):
            load_or_create(tmp_path / "linked")
        assert real.key_id  # the real one is untouched and still loads
        assert load_or_create(tmp_path / "real").key_id == real.key_id

    def test_missing_or_tampered_public_file_is_rewritten_from_the_key(self, tmp_path: Path) -> None:
        key = load_or_create(tmp_path)
        pub_file = keys_dir(tmp_path) / "signing.pub"
        pub_file.write_text(format_public_key(SigningKey.generate().public_key))
        load_or_create(tmp_path)
        assert parse_public_key(pub_file.read_text()).key_id == key.key_id
        pub_file.unlink()
        load_or_create(tmp_path)
        assert parse_public_key(pub_file.read_text()).key_id == key.key_id

    def test_loser_of_the_creation_race_returns_the_winners_key(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        winner = load_or_create(tmp_path)
        real_read = keys_module_files._read_private_file
        calls: list[Path] = []

        def first_read_misses(path: Path) -> SigningKey | None:
            calls.append(path)  # as if the winner published right after our first look
            return None if len(calls) == 1 else real_read(path)

        monkeypatch.setattr(keys_module_files, "_read_private_file", first_read_misses)
        assert load_or_create(tmp_path).key_id == winner.key_id
        assert len(calls) == 2
        assert sorted(p.name for p in keys_dir(tmp_path).iterdir()) == ["signing.key", "signing.pub"]

    def test_threads_racing_on_empty_dirs_agree_on_one_key(self, tmp_path: Path) -> None:
        dirs = [tmp_path / f"d{i}" for i in range(10)]
        barrier = threading.Barrier(6)
        seen: dict[Path, set[str]] = {d: set() for d in dirs}
        errors: list[BaseException] = []

        def run() -> None:
            try:
                for d in dirs:
                    barrier.wait()
                    seen[d].add(load_or_create(d).key_id)
            except BaseException as exc:  # reported below; a thread cannot raise into the test
                errors.append(exc)
                barrier.abort()

        threads = [threading.Thread(target=run) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert errors == []
        assert all(len(ids) == 1 for ids in seen.values()), seen

    def test_two_spawned_processes_on_an_empty_dir_get_the_same_key_id(self, tmp_path: Path) -> None:
        ctx = multiprocessing.get_context("spawn")
        dirs = [str(tmp_path / f"d{i}") for i in range(8)]
        barrier = ctx.Barrier(2)
        results: Any = ctx.Queue()
        procs = [ctx.Process(target=_race_worker, args=(dirs, barrier, results)) for _ in range(2)]
        for p in procs:
            p.start()
        outcomes = [results.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(timeout=30)
        assert [status for status, _ in outcomes] == ["ok", "ok"], outcomes
        assert outcomes[0][1] == outcomes[1][1]
        assert [load_or_create(Path(d)).key_id for d in dirs] == outcomes[0][1]


def _race_worker(dirs: list[str], barrier: Any, results: Any) -> None:
    """Runs in a spawned process: load_or_create each dir right as the other process does."""
    try:
        ids = []
        for d in dirs:
            barrier.wait(timeout=30)
            ids.append(load_or_create(Path(d)).key_id)
        results.put(("ok", ids))
    except BaseException as exc:  # sent to the parent, which asserts on it
        results.put(("error", repr(exc)))


class TestEnvironmentKey:
    @pytest.mark.parametrize(
        "encode",
        [
            pytest.param(lambda k: SEED.hex(), id="hex"),
            pytest.param(lambda k: SEED.hex().upper(), id="HEX"),
            pytest.param(lambda k: base64.b64encode(SEED).decode(), id="base64"),
            pytest.param(lambda k: base64.urlsafe_b64encode(SEED).decode().rstrip("="), id="base64url-unpadded"),
            pytest.param(lambda k: k.to_pem().decode(), id="pem"),
            pytest.param(lambda k: k.to_pem().decode().replace("\n", "\\n"), id="pem-escaped-newlines"),
            pytest.param(lambda k: f"  {SEED.hex()}\n", id="hex-with-whitespace"),
        ],
    )
    def test_env_key_in_each_encoding_gives_the_same_key_and_writes_nothing(
        self,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        signer: SigningKey,
        encode: Callable[[SigningKey], str],
    ) -> None:
        monkeypatch.setenv(ENV_VAR, encode(signer))
        assert load_or_create(tmp_path / "data").key_id == SEED_KEY_ID
        assert list(tmp_path.iterdir()) == []

    def test_env_key_wins_over_a_key_file(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        file_key = load_or_create(tmp_path)
        monkeypatch.setenv(ENV_VAR, SEED.hex())
        assert load_or_create(tmp_path).key_id == SEED_KEY_ID != file_key.key_id

    @pytest.mark.parametrize(
        "secret",
        [
            pytest.param("not-a-key-but-a-secret-4f9a2c", id="garbage"),
            pytest.param(bytes(range(100, 131)).hex(), id="hex-31-bytes"),
            pytest.param(base64.b64encode(bytes(range(100, 133))).decode(), id="base64-33-bytes"),
            pytest.param(
                "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWdhcmJhZ2UtYm9keQ==\n-----END PRIVATE KEY-----", id="pem-garbage"
            ),
            pytest.param(
                ec.generate_private_key(ec.SECP256R1())
                .private_bytes(
                    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
                )
                .decode(),
                id="pem-not-ed25519",
            ),
            pytest.param(
                Ed25519PrivateKey.from_private_bytes(SEED)
                .private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.BestAvailableEncryption(b"pw"),
                )
                .decode(),
                id="pem-encrypted",
            ),
        ],
    )
    def test_unusable_env_key_raises_key_config_error_without_echoing_it(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, secret: str
    ) -> None:
        monkeypatch.setenv(ENV_VAR, secret)
        with pytest.raises(KeyConfigError) as info:
            load_or_create(tmp_path)
        rendered = "".join(traceback.format_exception(info.value)) + repr(info.value)
        assert str(info.value).startswith(ENV_VAR + ": expected ")
        for fragment in [secret.strip(), *secret.strip().splitlines()]:
            if len(fragment) >= 8 and not fragment.startswith("-----"):
                assert fragment not in rendered
        assert list(tmp_path.iterdir()) == []  # no silent fall-back to a generated key

    def test_set_but_empty_env_key_is_an_error_not_a_fallback(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv(ENV_VAR, "")
        with pytest.raises(KeyConfigError, match="found an empty value"):
            load_or_create(tmp_path)
        assert list(tmp_path.iterdir()) == []

    @FAST
    @given(st.text(max_size=200))
    def test_parse_private_key_raises_only_key_config_error(self, text: str) -> None:
        try:
            parse_private_key(text)
        except KeyConfigError:
            pass


# --- trust format ------------------------------------------------------------------


class TestTrustFormat:
    def test_format_then_parse_round_trips(self, signer: SigningKey) -> None:
        text = format_public_key(signer.public_key)
        assert json.loads(text) == {
            "type": "ed25519",
            "key_id": SEED_KEY_ID,
            "public_key": base64.b64encode(signer.public_raw).decode(),
        }
        assert parse_public_key(text) == signer.public_key

    def test_mismatching_key_id_is_refused_naming_expected_and_found(
        self, signer: SigningKey, stranger: SigningKey
    ) -> None:
        doc = json.loads(format_public_key(signer.public_key))
        doc["key_id"] = stranger.key_id
        with pytest.raises(KeyConfigError) as info:
            parse_public_key(json.dumps(doc))
        assert (info.value.expected, info.value.found) == (signer.key_id, repr(stranger.key_id))
        assert signer.key_id in str(info.value) and stranger.key_id in str(info.value)

    def test_key_id_may_be_omitted(self, signer: SigningKey) -> None:
        doc = json.loads(format_public_key(signer.public_key))
        del doc["key_id"]
        assert parse_public_key(json.dumps(doc)).key_id == signer.key_id

    def test_pem_subject_public_key_info_is_accepted(self, signer: SigningKey) -> None:
        pem = Ed25519PublicKey.from_public_bytes(signer.public_raw).public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        assert parse_public_key(pem.decode()) == signer.public_key

    def test_private_key_pem_is_refused_as_a_trust_anchor(self, signer: SigningKey) -> None:
        with pytest.raises(KeyConfigError, match="found a private key"):
            parse_public_key(signer.to_pem().decode())

    @pytest.mark.parametrize(
        "mutate",
        [
            pytest.param(lambda d: d.update(type="rsa"), id="wrong-type"),
            pytest.param(lambda d: d.pop("type"), id="no-type"),
            pytest.param(lambda d: d.update(public_key=d["public_key"][:-4]), id="short-key"),
            pytest.param(lambda d: d.update(public_key=d["public_key"].rstrip("=")), id="unpadded-key"),
            pytest.param(lambda d: d.update(public_key=42), id="key-not-a-string"),
            pytest.param(lambda d: d.update(expires="2020-01-01"), id="unknown-field"),
        ],
    )
    def test_malformed_trust_documents_are_refused(
        self, signer: SigningKey, mutate: Callable[[dict[str, Any]], object]
    ) -> None:
        doc = json.loads(format_public_key(signer.public_key))
        mutate(doc)
        with pytest.raises(KeyConfigError):
            parse_public_key(json.dumps(doc))

    @FAST
    @given(st.text(max_size=300))
    def test_parse_public_key_raises_only_key_config_error(self, text: str) -> None:
        try:
            parse_public_key(text)
        except KeyConfigError:
            pass


# --- DSSE -----------------------------------------------------------------------------


class TestPae:
    def test_pae_matches_the_spec_example(self) -> None:
        assert pae("http://example.com/HelloWorld", b"hello world") == (
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
        )

    def test_pae_lengths_count_utf8_bytes_not_characters(self) -> None:
        assert pae("é", b"") == b"DSSEv1 2 \xc3\xa9 0 "

    def test_pae_separates_type_from_payload(self) -> None:
        assert pae("a b", b"c") != pae("a", b"b c")


def _envelope(key: SigningKey, payload: bytes = PAYLOAD, payload_type: str = PAYLOAD_TYPE) -> dict[str, Any]:
    return sign_envelope(payload, payload_type, key)


def _checks(obj: object, trusted: list[PublicKey], expected_type: str = PAYLOAD_TYPE) -> list[SignatureCheck]:
    return verify_envelope(parse_envelope(obj), trusted, expected_type)


class TestSignVerify:
    def test_signed_envelope_round_trips_through_json_and_verifies(self, signer: SigningKey) -> None:
        obj = json.loads(json.dumps(_envelope(signer)))
        env = parse_envelope(obj)
        assert (env.payload, env.payload_type) == (PAYLOAD, PAYLOAD_TYPE)
        checks = verify_envelope(env, [signer.public_key], PAYLOAD_TYPE)
        assert [(c.outcome, c.passed, c.verified_by) for c in checks] == [(VERIFIED, True, signer.key_id)]
        assert has_trusted_signature(checks) is True

    def test_envelope_shape_is_standard_dsse_with_standard_base64(self, signer: SigningKey) -> None:
        obj = _envelope(signer)
        assert set(obj) == {"payloadType", "payload", "signatures"}
        assert base64.b64decode(obj["payload"], validate=True) == PAYLOAD
        assert [set(s) for s in obj["signatures"]] == [{"keyid", "sig"}]
        assert obj["signatures"][0]["keyid"] == signer.key_id
        assert parse_envelope(obj).to_dict() == obj

    def test_signature_is_over_pae_not_the_raw_payload(self, signer: SigningKey) -> None:
        sig = base64.b64decode(_envelope(signer)["signatures"][0]["sig"])
        assert signer.public_key.verify(sig, pae(PAYLOAD_TYPE, PAYLOAD)) is True
        assert signer.public_key.verify(sig, PAYLOAD) is False

    def test_check_has_no_truth_value(self, signer: SigningKey) -> None:
        (check,) = _checks(_envelope(signer), [signer.public_key])
        with pytest.raises(TypeError, match="no truth value"):
            bool(check)

    def test_no_trusted_keys_means_no_trusted_signature(self, signer: SigningKey) -> None:
        checks = _checks(_envelope(signer), [])
        assert [c.outcome for c in checks] == [UNKNOWN_KEY]
        assert has_trusted_signature(checks) is False

    def test_no_checks_is_not_a_trusted_signature(self) -> None:
        assert has_trusted_signature([]) is False

    def test_one_good_signature_among_bad_ones_is_enough_and_each_is_reported(
        self, signer: SigningKey, stranger: SigningKey
    ) -> None:
        obj = _envelope(signer)
        obj["signatures"] = _envelope(stranger)["signatures"] + obj["signatures"]
        checks = _checks(obj, [signer.public_key])
        assert [(c.index, c.outcome) for c in checks] == [(0, UNKNOWN_KEY), (1, VERIFIED)]
        assert has_trusted_signature(checks) is True

    def test_unset_keyid_tries_every_trusted_key(self, signer: SigningKey, stranger: SigningKey) -> None:
        obj = _envelope(signer)
        del obj["signatures"][0]["keyid"]
        (check,) = _checks(obj, [stranger.public_key, signer.public_key])
        assert (check.keyid, check.outcome, check.verified_by) == ("", VERIFIED, signer.key_id)

    def test_url_safe_base64_is_accepted(self, signer: SigningKey) -> None:
        payload = b"\xfb\xff\xfe" * 5  # standard base64 of this uses + and /
        obj = _envelope(signer, payload=payload)
        assert "+" in obj["payload"] or "/" in obj["payload"]
        obj["payload"] = base64.urlsafe_b64encode(payload).decode()
        (check,) = _checks(obj, [signer.public_key])
        assert check.outcome == VERIFIED

    def test_unknown_fields_are_ignored_as_the_spec_requires(self, signer: SigningKey) -> None:
        obj = _envelope(signer)
        obj["extension"] = {"x": 1}
        obj["signatures"][0]["cert"] = None
        (check,) = _checks(obj, [signer.public_key])
        assert check.outcome == VERIFIED


def _flip_payload_byte(obj: dict[str, Any]) -> None:
    raw = bytearray(base64.b64decode(obj["payload"]))
    raw[len(raw) // 2] ^= 0x01
    obj["payload"] = base64.b64encode(bytes(raw)).decode()


def _flip_sig_bit(obj: dict[str, Any]) -> None:
    raw = bytearray(base64.b64decode(obj["signatures"][0]["sig"]))
    raw[10] ^= 0x80
    obj["signatures"][0]["sig"] = base64.b64encode(bytes(raw)).decode()


def _truncate_sig(obj: dict[str, Any]) -> None:
    obj["signatures"][0]["sig"] = base64.b64encode(base64.b64decode(obj["signatures"][0]["sig"])[:-1]).decode()


def _attacks(signer: SigningKey, stranger: SigningKey) -> list[tuple[str, Callable[[dict[str, Any]], None], str, str]]:
    """(name, mutation of a valid envelope, expected payloadType at verify time, expected outcome)."""
    forged = b'{"answer":"goodbye","session":"s1"}'

    def replace_signatures(source: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
        return lambda obj: obj.update(payload=source["payload"], signatures=source["signatures"])

    def claim_trusted_keyid(obj: dict[str, Any]) -> None:
        replace_signatures(_envelope(stranger, payload=forged))(obj)
        obj["signatures"][0]["keyid"] = signer.key_id

    def other_payload_signature(obj: dict[str, Any]) -> None:
        obj["signatures"] = _envelope(signer, payload=forged)["signatures"]

    return [
        ("flipped-payload-byte", _flip_payload_byte, PAYLOAD_TYPE, BAD_SIGNATURE),
        ("changed-payloadType", lambda o: o.update(payloadType="text/plain"), PAYLOAD_TYPE, WRONG_PAYLOAD_TYPE),
        ("changed-payloadType-as-expected", lambda o: o.update(payloadType="text/plain"), "text/plain", BAD_SIGNATURE),
        (
            "payloadType-case-changed",
            lambda o: o.update(payloadType=PAYLOAD_TYPE.upper()),
            PAYLOAD_TYPE,
            WRONG_PAYLOAD_TYPE,
        ),
        ("flipped-sig-bit", _flip_sig_bit, PAYLOAD_TYPE, BAD_SIGNATURE),
        ("signature-from-another-payload", other_payload_signature, PAYLOAD_TYPE, BAD_SIGNATURE),
        ("signature-by-unknown-key", replace_signatures(_envelope(stranger)), PAYLOAD_TYPE, UNKNOWN_KEY),
        (
            "resigned-with-untrusted-key",
            replace_signatures(_envelope(stranger, payload=forged)),
            PAYLOAD_TYPE,
            UNKNOWN_KEY,
        ),
        ("resigned-with-untrusted-key-claiming-trusted-keyid", claim_trusted_keyid, PAYLOAD_TYPE, BAD_SIGNATURE),
        (
            "keyid-renamed",
            lambda o: o["signatures"][0].update(keyid="ed25519:0000000000000000"),
            PAYLOAD_TYPE,
            UNKNOWN_KEY,
        ),
    ]


class TestAttacks:
    def test_every_named_mutation_is_rejected_with_its_reason(self, signer: SigningKey, stranger: SigningKey) -> None:
        valid = _envelope(signer)
        slipped = []
        for name, mutate, expected_type, reason in _attacks(signer, stranger):
            obj = copy.deepcopy(valid)
            mutate(obj)
            checks = _checks(obj, [signer.public_key], expected_type)
            got = [c.outcome for c in checks]
            if has_trusted_signature(checks) or got != [reason] or any(c.passed for c in checks):
                slipped.append(f"{name}: expected [{reason!r}], got {got}")
        assert slipped == []

    def test_wrong_payload_type_row_names_expected_and_found(self, signer: SigningKey) -> None:
        obj = _envelope(signer, payload_type="text/plain")
        (check,) = _checks(obj, [signer.public_key], PAYLOAD_TYPE)
        assert (check.outcome, check.expected, check.found) == (WRONG_PAYLOAD_TYPE, PAYLOAD_TYPE, "text/plain")
        assert check.signature_valid is True and check.passed is False  # genuine, but not what we asked for

    def test_unknown_key_row_says_the_key_is_not_trusted(self, signer: SigningKey, stranger: SigningKey) -> None:
        (check,) = _checks(_envelope(stranger), [signer.public_key])
        assert (check.key_trusted, check.signature_valid, check.found) == (False, False, stranger.key_id)
        assert "unknown key" in check.message

    def test_stripped_signature_list_is_malformed(self, signer: SigningKey) -> None:
        obj = _envelope(signer)
        obj["signatures"] = []
        with pytest.raises(MalformedEnvelope) as info:
            parse_envelope(obj)
        assert (info.value.path, info.value.found) == ("$.signatures", "an empty array")

    def test_missing_signatures_field_is_malformed(self, signer: SigningKey) -> None:
        obj = _envelope(signer)
        del obj["signatures"]
        with pytest.raises(MalformedEnvelope, match=r"\$\.signatures"):
            parse_envelope(obj)


class TestParseEnvelope:
    @pytest.mark.parametrize(
        ("mutate", "path"),
        [
            pytest.param(lambda o: o.pop("payload"), "$.payload", id="no-payload"),
            pytest.param(lambda o: o.pop("payloadType"), "$.payloadType", id="no-payloadType"),
            pytest.param(lambda o: o.update(payloadType=7), "$.payloadType", id="payloadType-not-string"),
            pytest.param(lambda o: o.update(payloadType="\ud800"), "$.payloadType", id="payloadType-surrogate"),
            pytest.param(lambda o: o.update(payload=None), "$.payload", id="payload-null"),
            pytest.param(lambda o: o.update(payload="!!!!"), "$.payload", id="payload-bad-base64"),
            pytest.param(lambda o: o.update(payload="QR=="), "$.payload", id="payload-noncanonical-base64"),
            pytest.param(lambda o: o.update(payload="QQ"), "$.payload", id="payload-unpadded"),
            pytest.param(lambda o: o.update(payload="+-8="), "$.payload", id="payload-mixed-alphabets"),
            pytest.param(lambda o: o.update(payload=o["payload"] + "\n"), "$.payload", id="payload-trailing-newline"),
            pytest.param(lambda o: o.update(signatures={}), "$.signatures", id="signatures-not-list"),
            pytest.param(lambda o: o["signatures"].append("sig"), "$.signatures[1]", id="signature-not-object"),
            pytest.param(lambda o: o["signatures"][0].pop("sig"), "$.signatures[0].sig", id="no-sig"),
            pytest.param(lambda o: o["signatures"][0].update(keyid=None), "$.signatures[0].keyid", id="keyid-null"),
            pytest.param(lambda o: o["signatures"][0].update(sig="A" * 2000), "$.signatures[0].sig", id="huge-sig"),
            # issue 28 §7: a signature that is not 64 bytes of Ed25519 is malformed (it was a bad signature)
            pytest.param(_truncate_sig, "$.signatures[0].sig", id="truncated-sig"),
            pytest.param(lambda o: o["signatures"][0].update(sig=""), "$.signatures[0].sig", id="empty-sig"),
            pytest.param(lambda o: o.update(signatures=o["signatures"] * 17), "$.signatures", id="too-many-sigs"),
        ],
    )
    def test_structural_faults_raise_malformed_envelope_naming_the_field(
        self, signer: SigningKey, mutate: Callable[[dict[str, Any]], object], path: str
    ) -> None:
        obj = _envelope(signer)
        mutate(obj)
        with pytest.raises(MalformedEnvelope) as info:
            parse_envelope(obj)
        assert info.value.path == path
        assert str(info.value).startswith(f"envelope {path}: expected ")

    @pytest.mark.parametrize("obj", [None, [], "envelope", 3, True])
    def test_non_objects_are_malformed(self, obj: object) -> None:
        with pytest.raises(MalformedEnvelope, match="expected a JSON object"):
            parse_envelope(obj)

    def test_payload_over_the_cap_is_malformed_and_at_the_cap_is_accepted(self, signer: SigningKey) -> None:
        parse_envelope(_envelope(signer, payload=b"x" * 10), max_payload_bytes=10)
        with pytest.raises(MalformedEnvelope, match="at most 10 bytes"):
            parse_envelope(_envelope(signer, payload=b"x" * 11), max_payload_bytes=10)

    def test_parse_errors_and_key_errors_are_different_families(self) -> None:
        assert not issubclass(MalformedEnvelope, KeyConfigError)
        assert not issubclass(KeyConfigError, MalformedEnvelope)

    @FAST
    @given(
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
            lambda children: st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=8), children, max_size=4),
            max_leaves=20,
        )
    )
    def test_arbitrary_json_raises_only_malformed_envelope(self, obj: object) -> None:
        try:
            parse_envelope(obj)
        except MalformedEnvelope:
            pass

    @FAST
    @given(st.data())
    def test_near_envelopes_parse_or_raise_malformed_and_never_verify(self, data: st.DataObject) -> None:
        junk = st.none() | st.booleans() | st.integers() | st.text(max_size=10) | st.lists(st.integers(), max_size=2)
        b64ish = (
            st.binary(max_size=70).map(lambda b: base64.b64encode(b).decode())
            | st.binary(max_size=70).map(lambda b: base64.urlsafe_b64encode(b).decode())
            | st.text(alphabet="AQR+/-_=\n ", max_size=12)
        )
        text = st.text(max_size=20) | st.sampled_from(["\ud800", PAYLOAD_TYPE, "", SEED_KEY_ID])
        signature = st.fixed_dictionaries({}, optional={"sig": b64ish | junk, "keyid": text | junk})
        obj = data.draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "payload": b64ish | junk,
                    "payloadType": text | junk,
                    "signatures": st.lists(signature | junk, max_size=3) | junk,
                },
            )
        )
        try:
            env = parse_envelope(obj)
        except MalformedEnvelope:
            return
        assert isinstance(env, Envelope)
        checks = verify_envelope(env, [SigningKey.from_seed(SEED).public_key], PAYLOAD_TYPE)
        assert len(checks) == len(env.signatures) and not has_trusted_signature(checks)
