"""Trust is explicit (issue 17 §5): a key that comes with a data directory is never trusted.

Whoever hands over a data directory chose everything in it, its public key
included: a fabricated directory (own key, own ledger, own receipt) is at most
*self-consistent*, never VERIFIED, until the verifier is given a key it trusts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chat.engine import Engine
from chat.llm import LLM
from receipts.keys import SigningKey, format_public_key
from receipts.verify import NOT_VERIFIABLE, PASS, SELF_CONSISTENT, Report
from storage.common.keyfiles import keys_dir, legacy_keys_dir, load_existing, load_or_create
from storage.files.receipts.api import data_dir_key, verify_bytes

ROOT = Path(__file__).resolve().parents[2]
SIGNATURE_ROWS = ("envelope.signature", "checkpoint.signature")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GROQ_API_KEY", "GROQ_MODEL", "GROQ_BASE_URL", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR"):
        monkeypatch.delenv(name, raising=False)


def fabricate(data: Path, *, key: SigningKey | None = None) -> tuple[Engine, Path]:
    """What a forger can make with no secret of ours: a data directory, a key, a ledger and a receipt."""
    engine = Engine(data, llm=LLM(api_key=""), key=key)
    engine.remember("alice", "I never said I owe Mallory a thousand euros")
    turn = engine.turn("alice", "Do I owe Mallory money?", k=4)
    return engine, turn.receipt_path


def rows(report: Report) -> dict[str, tuple[str, str]]:
    return {c.name: (c.status, c.message) for c in report.checks}


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k not in ("RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "receipts", *args], capture_output=True, text=True, cwd=ROOT, timeout=60, env=full_env
    )


class TestAFabricatedDataDirectory:
    def test_is_not_verified_without_a_trusted_key(self, tmp_path: Path) -> None:
        engine, receipt = fabricate(tmp_path / "forged")
        report = verify_bytes(receipt.read_bytes(), data_dir=tmp_path / "forged")
        assert report.verdict == "unverified" and not report.failed
        r = rows(report)
        for name in SIGNATURE_ROWS:
            status, message = r[name]
            assert status == NOT_VERIFIABLE
            assert SELF_CONSISTENT in message and "checks against it" in message and engine.key.key_id in message
        # everything else about the forgery is self-consistent: that is exactly why the key matters
        assert all(s == PASS for n, (s, _) in r.items() if n not in SIGNATURE_ROWS)

    def test_is_verified_once_its_key_is_given_as_trusted(self, tmp_path: Path) -> None:
        engine, receipt = fabricate(tmp_path / "forged")
        report = verify_bytes(receipt.read_bytes(), trusted=[engine.key.public_key], data_dir=tmp_path / "forged")
        assert report.verdict == "verified"
        assert all(c.status == PASS for c in report.checks)

    def test_is_not_verified_when_its_key_sits_in_the_old_place_inside_the_data(self, tmp_path: Path) -> None:
        data = tmp_path / "forged"
        engine, receipt = fabricate(data)
        legacy = legacy_keys_dir(data)
        legacy.mkdir(mode=0o700)
        shutil.move(str(keys_dir(data) / "signing.pub"), legacy / "signing.pub")
        shutil.rmtree(keys_dir(data))
        report = verify_bytes(receipt.read_bytes(), data_dir=data)
        assert report.verdict == "unverified"
        assert all(SELF_CONSISTENT in rows(report)[n][1] for n in SIGNATURE_ROWS)

    def test_a_signature_that_does_not_match_the_directorys_own_key_is_said_so(self, tmp_path: Path) -> None:
        data = tmp_path / "forged"
        _engine, receipt = fabricate(data)
        other = SigningKey.generate()
        (keys_dir(data) / "signing.pub").write_text(format_public_key(other.public_key))
        report = verify_bytes(receipt.read_bytes(), data_dir=data)
        assert report.verdict == "unverified"
        for name in SIGNATURE_ROWS:
            status, message = rows(report)[name]
            assert status == NOT_VERIFIABLE and "does NOT check against it" in message and other.key_id in message

    def test_with_no_key_anywhere_the_rows_just_ask_for_a_trusted_key(self, tmp_path: Path) -> None:
        data = tmp_path / "forged"
        _engine, receipt = fabricate(data)
        shutil.rmtree(keys_dir(data))
        report = verify_bytes(receipt.read_bytes(), data_dir=data)
        assert report.verdict == "unverified"
        for name in SIGNATURE_ROWS:
            status, message = rows(report)[name]
            assert status == NOT_VERIFIABLE and "--trust" in message and SELF_CONSISTENT not in message

    def test_an_unreadable_public_key_file_is_no_key_not_a_crash(self, tmp_path: Path) -> None:
        data = tmp_path / "forged"
        _engine, receipt = fabricate(data)
        (keys_dir(data) / "signing.pub").write_text("{not json")
        report = verify_bytes(receipt.read_bytes(), data_dir=data)
        assert report.verdict == "unverified"

    def test_the_cli_says_unverified_without_trust_and_verified_with_it(self, tmp_path: Path) -> None:
        data = tmp_path / "forged"
        _engine, receipt = fabricate(data)
        plain = cli("verify", str(receipt), "--data", str(data))
        assert plain.returncode == 3, plain.stdout + plain.stderr  # UNVERIFIED: nothing failed, no trusted key
        assert "verdict: UNVERIFIED" in plain.stdout and SELF_CONSISTENT in plain.stdout
        pub = tmp_path / "their.pub"
        got = cli("pubkey", str(data))
        assert got.returncode == 0, got.stderr
        pub.write_text(got.stdout)
        trusted = cli("verify", str(receipt), "--data", str(data), "--trust", str(pub))
        assert trusted.returncode == 0 and "verdict: VERIFIED" in trusted.stdout, trusted.stdout + trusted.stderr

    def test_a_trusted_key_that_is_not_the_forgers_fails_the_signatures(self, tmp_path: Path) -> None:
        data = tmp_path / "forged"
        _engine, receipt = fabricate(data)
        ours = SigningKey.generate()
        report = verify_bytes(receipt.read_bytes(), trusted=[ours.public_key], data_dir=data)
        assert report.verdict == "failed"
        assert {n: rows(report)[n][0] for n in SIGNATURE_ROWS} == {n: "fail" for n in SIGNATURE_ROWS}


class TestDataDirKey:
    def test_reads_the_keys_folder_and_never_creates_one(self, tmp_path: Path) -> None:
        data = tmp_path / "data"
        data.mkdir()
        assert data_dir_key(data) is None
        assert not keys_dir(data).exists() and sorted(os.listdir(tmp_path)) == ["data"]
        key = load_or_create(data)
        found = data_dir_key(data)
        assert found is not None and found.key_id == key.key_id


class TestPubkeyCommand:
    def test_with_no_key_it_exits_2_with_one_line_and_creates_nothing(self, tmp_path: Path) -> None:
        data = tmp_path / "data"
        data.mkdir()
        out = cli("pubkey", str(data))
        assert out.returncode == 2 and out.stdout == ""
        assert out.stderr.count("\n") == 1 and out.stderr.startswith("error: ") and "no signing key" in out.stderr
        assert sorted(os.listdir(tmp_path)) == ["data"] and os.listdir(data) == []

    def test_it_prints_the_existing_key(self, tmp_path: Path) -> None:
        data = tmp_path / "data"
        data.mkdir()
        key = load_or_create(data)
        out = cli("pubkey", str(data))
        assert out.returncode == 0 and out.stdout == format_public_key(key.public_key)

    def test_it_prints_a_key_in_the_old_place_without_moving_it(self, tmp_path: Path) -> None:
        data = tmp_path / "data"
        legacy = legacy_keys_dir(data)
        legacy.mkdir(parents=True, mode=0o700)
        key = SigningKey.generate()
        fd = os.open(legacy / "signing.key", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, key.to_pem())
        os.close(fd)
        out = cli("pubkey", str(data))
        assert out.returncode == 0 and out.stdout == format_public_key(key.public_key)
        assert (legacy / "signing.key").is_file() and not keys_dir(data).exists()

    def test_with_receipt_signing_key_it_prints_that_keys_public_key(self, tmp_path: Path) -> None:
        data = tmp_path / "data"
        data.mkdir()
        seed = bytes(range(32))
        out = cli("pubkey", str(data), env={"RECEIPT_SIGNING_KEY": seed.hex()})
        assert out.returncode == 0
        assert out.stdout == format_public_key(SigningKey.from_seed(seed).public_key)
        assert sorted(os.listdir(tmp_path)) == ["data"]

    def test_load_existing_never_creates(self, tmp_path: Path) -> None:
        data = tmp_path / "data"
        assert load_existing(data) is None
        assert os.listdir(tmp_path) == []
        key = load_or_create(data)
        existing = load_existing(data)
        assert existing is not None and existing.key_id == key.key_id


def test_the_apps_verify_still_trusts_the_apps_own_key_only(tmp_path: Path) -> None:
    """webui.service passes the engine's public key as trusted: the one key the app itself holds."""
    from webui.service import Service

    service = Service(Engine(tmp_path / "data", llm=LLM(api_key="")))
    try:
        forged_engine, receipt = fabricate(tmp_path / "forged")
        report, _mode = service.verify(receipt.read_bytes(), None)
        assert report.verdict == "failed"  # another key's receipt is not this app's
        assert rows(report)["envelope.signature"][0] == "fail"
        assert json.loads(receipt.read_text())["signatures"][0]["keyid"] == forged_engine.key.key_id
        _engine, own = fabricate(tmp_path / "data", key=service.engine.key)
        assert service.verify(own.read_bytes(), None)[0].verdict == "verified"
    finally:
        service.downloads.close()
