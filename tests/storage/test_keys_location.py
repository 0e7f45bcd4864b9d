"""Keys live apart from the data (issue 17 §5): handing an auditor the data does not hand over the key.

Default `<DATA_DIR>.keys` beside the data directory, or `$RECEIPT_KEYS_DIR`;
an old `DATA_DIR/keys/signing.key` is moved there with a message; a keys
folder others can use, or another user owns, is refused naming the fix.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from chat.engine import Engine
from chat.llm import LLM
from receipts.keys import KEYS_DIR_ENV, KeyConfigError, SigningKey, format_public_key
from storage.common.keyfiles import keys_dir, legacy_keys_dir, load_existing, load_or_create


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", KEYS_DIR_ENV):
        monkeypatch.delenv(name, raising=False)


def mode(p: Path) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


def plant_legacy_key(data: Path, key: SigningKey | None = None) -> SigningKey:
    """The layout before issue 17: DATA_DIR/keys/signing.key (0600) and signing.pub."""
    key = key or SigningKey.generate()
    legacy = legacy_keys_dir(data)
    legacy.mkdir(parents=True, mode=0o700)
    fd = os.open(legacy / "signing.key", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, key.to_pem())
    os.close(fd)
    (legacy / "signing.pub").write_text(format_public_key(key.public_key))
    return key


class TestWhereKeysLive:
    def test_the_default_is_a_sibling_named_after_the_resolved_data_directory(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.chdir(tmp_path)
        assert keys_dir("./data") == tmp_path.resolve() / "data.keys"
        assert keys_dir(tmp_path / "data") == tmp_path.resolve() / "data.keys"
        assert keys_dir("data/") == tmp_path.resolve() / "data.keys"

    def test_a_symlinked_data_directory_keeps_its_keys_beside_the_real_one(self, tmp_path: Path) -> None:
        (tmp_path / "real").mkdir()
        (tmp_path / "link").symlink_to(tmp_path / "real")
        assert keys_dir(tmp_path / "link") == tmp_path.resolve() / "real.keys"

    def test_receipt_keys_dir_wins(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv(KEYS_DIR_ENV, str(tmp_path / "vault"))
        assert keys_dir(tmp_path / "data") == tmp_path / "vault"
        key = load_or_create(tmp_path / "data")
        assert (tmp_path / "vault" / "signing.key").is_file() and not (tmp_path / "data.keys").exists()
        assert load_or_create(tmp_path / "other-data").key_id == key.key_id  # one folder, one key

    def test_an_empty_receipt_keys_dir_is_an_error_not_a_fallback(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv(KEYS_DIR_ENV, "  ")
        with pytest.raises(KeyConfigError, match=f"{KEYS_DIR_ENV}: expected a folder path, found an empty value"):
            load_or_create(tmp_path / "data")
        assert os.listdir(tmp_path) == []

    def test_the_root_folder_as_data_directory_asks_for_receipt_keys_dir(self) -> None:
        with pytest.raises(KeyConfigError, match=KEYS_DIR_ENV):
            keys_dir("/")

    def test_an_engine_keeps_no_private_key_inside_its_data_directory(self, tmp_path: Path) -> None:
        data = tmp_path / "data"
        engine = Engine(data, llm=LLM(api_key=""))
        engine.turn("alice", "hello there")
        assert not [p for p in data.rglob("*") if p.name.startswith("signing.")]
        assert (tmp_path / "data.keys" / "signing.key").is_file()
        assert mode(tmp_path / "data.keys") == 0o700 and mode(tmp_path / "data.keys" / "signing.key") == 0o600


class TestMovingAnOldKey:
    def test_an_old_key_is_moved_out_of_the_data_directory_with_a_message(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        data = tmp_path / "data"
        old = plant_legacy_key(data)
        with caplog.at_level(logging.WARNING, logger="receipts.keys"):
            key = load_or_create(data)
        assert key.key_id == old.key_id
        assert not legacy_keys_dir(data).exists()
        new = keys_dir(data)
        assert sorted(os.listdir(new)) == ["signing.key", "signing.pub"]
        assert mode(new / "signing.key") == 0o600 and mode(new) == 0o700
        (msg,) = [r.getMessage() for r in caplog.records if r.name == "receipts.keys"]
        assert "moved" in msg and str(legacy_keys_dir(data) / "signing.key") in msg and str(new) in msg
        caplog.clear()
        assert load_or_create(data).key_id == old.key_id  # and only once
        assert not [r for r in caplog.records if r.name == "receipts.keys"]

    def test_an_old_folder_holding_other_files_is_left_with_them(self, tmp_path: Path) -> None:
        data = tmp_path / "data"
        old = plant_legacy_key(data)
        (legacy_keys_dir(data) / "notes.txt").write_text("mine")
        assert load_or_create(data).key_id == old.key_id
        assert os.listdir(legacy_keys_dir(data)) == ["notes.txt"]

    def test_an_old_key_that_differs_from_the_new_one_is_refused_and_both_are_kept(self, tmp_path: Path) -> None:
        data = tmp_path / "data"
        data.mkdir()
        current = load_or_create(data)
        old = plant_legacy_key(data)
        with pytest.raises(KeyConfigError) as info:
            load_or_create(data)
        assert old.key_id in str(info.value) and current.key_id in str(info.value)
        assert (legacy_keys_dir(data) / "signing.key").is_file() and (keys_dir(data) / "signing.key").is_file()

    def test_the_same_key_in_both_places_just_removes_the_old_copy(self, tmp_path: Path) -> None:
        data = tmp_path / "data"
        data.mkdir()
        current = load_or_create(data)
        plant_legacy_key(data, current)
        assert load_or_create(data).key_id == current.key_id
        assert not legacy_keys_dir(data).exists()

    def test_an_old_key_readable_by_others_is_refused_not_moved(self, tmp_path: Path) -> None:
        data = tmp_path / "data"
        plant_legacy_key(data)
        os.chmod(legacy_keys_dir(data) / "signing.key", 0o644)
        with pytest.raises(KeyConfigError, match="mode 0644"):
            load_or_create(data)
        assert not (keys_dir(data) / "signing.key").exists()


class TestLooseKeysFolders:
    @pytest.mark.parametrize("bits", [0o750, 0o755, 0o705, 0o777])
    def test_a_keys_folder_others_can_use_is_refused_naming_the_chmod(self, tmp_path: Path, bits: int) -> None:
        data = tmp_path / "data"
        load_or_create(data)
        kdir = keys_dir(data)
        os.chmod(kdir, bits)
        with pytest.raises(KeyConfigError) as info:
            load_or_create(data)
        assert f"mode {bits:04o}" in str(info.value)
        assert f"chmod 700 {kdir} && chmod 600 {kdir / 'signing.key'}" in str(info.value)
        assert mode(kdir) == bits  # refused, not fixed
        with pytest.raises(KeyConfigError):
            load_existing(data)

    def test_a_fresh_receipt_keys_dir_made_by_hand_with_a_loose_mode_is_refused(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        (tmp_path / "vault").mkdir()
        os.chmod(tmp_path / "vault", 0o755)
        monkeypatch.setenv(KEYS_DIR_ENV, str(tmp_path / "vault"))
        with pytest.raises(KeyConfigError, match="chmod 700"):
            load_or_create(tmp_path / "data")
        assert os.listdir(tmp_path / "vault") == []

    def test_a_key_file_readable_by_others_names_the_chmod(self, tmp_path: Path) -> None:
        data = tmp_path / "data"
        load_or_create(data)
        key_file = keys_dir(data) / "signing.key"
        os.chmod(key_file, 0o640)
        with pytest.raises(KeyConfigError, match=r"chmod 600 .*signing\.key"):
            load_or_create(data)

    @pytest.mark.skipif(os.getuid() != 0, reason="changing a file's owner needs root")
    @pytest.mark.parametrize("what", ["folder", "key"])
    def test_a_keys_folder_or_key_owned_by_another_user_is_refused(self, tmp_path: Path, what: str) -> None:
        data = tmp_path / "data"
        load_or_create(data)
        target = keys_dir(data) if what == "folder" else keys_dir(data) / "signing.key"
        os.chown(target, 12345, -1)
        with pytest.raises(KeyConfigError, match="owned by uid 12345"):
            load_or_create(data)


def test_the_app_never_serves_the_keys_folder(tmp_path: Path) -> None:
    from webui.config import Config, launch_options

    blocked = launch_options(Config(tmp_path / "data", "127.0.0.1", 7860, None, 16, True))["blocked_paths"]
    assert str((tmp_path / "data").resolve()) in blocked and str(keys_dir(tmp_path / "data")) in blocked


def test_with_receipt_signing_key_a_key_left_inside_the_data_is_reported_not_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    plant_legacy_key(data)
    monkeypatch.setenv("RECEIPT_SIGNING_KEY", bytes(range(32)).hex())
    with caplog.at_level(logging.WARNING, logger="receipts.keys"):
        key = load_or_create(data)
    assert key.key_id == SigningKey.from_seed(bytes(range(32))).key_id
    (msg,) = [r.getMessage() for r in caplog.records if r.name == "receipts.keys"]
    assert str(legacy_keys_dir(data) / "signing.key") in msg
    assert (legacy_keys_dir(data) / "signing.key").is_file() and not keys_dir(data).exists()
