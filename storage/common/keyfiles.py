"""The signing key's files in DATA_DIR (both backends keep the key there): find, create, migrate and check the
private key file and its public twin. What a key is and how it signs lives in receipts/keys.py (pure)."""

from __future__ import annotations

import os
import secrets
import shlex
import stat
from pathlib import Path

from receipts.keys import (
    ENV_VAR,
    KEYS_DIR_ENV,
    KEYS_DIR_SUFFIX,
    LEGACY_KEYS_DIRNAME,
    MAX_KEY_FILE_BYTES,
    PRIVATE_FILENAME,
    PUBLIC_FILENAME,
    KeyConfigError,
    PublicKey,
    SigningKey,
    _private_from_pem,
    format_public_key,
    log,
    parse_private_key,
)
from storage.common.fsmode import PRIVATE_DIR, open_private, private_dir
from storage.common.fsmode import write_all as _write_all


def keys_dir(data_dir: str | os.PathLike[str]) -> Path:
    """The folder holding ``signing.key``: ``$RECEIPT_KEYS_DIR``, else the sibling ``<DATA_DIR>.keys``.

    The sibling is named after the data directory's resolved path, so ``./data``
    and ``/abs/path/data`` agree, and a symlinked data directory keeps its key
    next to the real folder.
    """
    env_value = os.environ.get(KEYS_DIR_ENV)
    if env_value is not None:
        if not env_value.strip():
            raise KeyConfigError(source=KEYS_DIR_ENV, expected="a folder path", found="an empty value")
        return Path(env_value).expanduser()
    resolved = Path(data_dir).resolve()
    if not resolved.name:
        raise KeyConfigError(
            source=str(data_dir),
            expected="a data directory with a name (its keys go in <name>.keys beside it)",
            found="the file-system root",
            hint=f"set {KEYS_DIR_ENV} to a private folder for the keys",
        )
    return resolved.with_name(resolved.name + KEYS_DIR_SUFFIX)

def load_or_create(data_dir: Path) -> SigningKey:
    """The receipt signing key: from ``RECEIPT_SIGNING_KEY``, else the keys folder (created if absent)."""
    env_value = os.environ.get(ENV_VAR)
    if env_value is not None:
        env_key = parse_private_key(env_value, source=ENV_VAR)
        old_path = legacy_keys_dir(data_dir) / PRIVATE_FILENAME
        if os.path.lexists(old_path):
            log.warning("%s is set, but a private key is still inside the data directory at %s: remove it", ENV_VAR, old_path)
        return env_key
    kdir = keys_dir(data_dir)
    _ensure_dir(kdir)
    _check_private_dir(kdir)
    key_path = kdir / PRIVATE_FILENAME
    key = _migrate_legacy(Path(data_dir), kdir)
    if key is None:
        key = _read_private_file(key_path)
    if key is None:
        key = _create_private_file(kdir, key_path)
    _sync_public_file(kdir, key.public_key)
    return key

def load_existing(data_dir: str | os.PathLike[str]) -> SigningKey | None:
    """The signing key ``load_or_create`` would use, or None if there is none yet. Never writes anything.

    A key still in the old place (``DATA_DIR/keys/``) is read there, not moved.
    """
    env_value = os.environ.get(ENV_VAR)
    if env_value is not None:
        return parse_private_key(env_value, source=ENV_VAR)
    kdir = keys_dir(data_dir)
    if kdir.exists():
        _check_private_dir(kdir)
        key = _read_private_file(kdir / PRIVATE_FILENAME)
        if key is not None:
            return key
    legacy = legacy_keys_dir(data_dir)
    if os.path.lexists(legacy / PRIVATE_FILENAME):
        _check_private_dir(legacy)
        return _read_private_file(legacy / PRIVATE_FILENAME)
    return None

def new_key_note(data_dir: str | os.PathLike[str], key_id: str) -> str:
    """What a command that has just created the signing key says (on stderr): never made silently."""
    return (
        f"created a new receipt signing key {key_id} in {keys_dir(data_dir)} "
        f"(keep it private; `python -m receipts pubkey {data_dir}` prints its public key for --trust)"
    )

def legacy_keys_dir(data_dir: str | os.PathLike[str]) -> Path:
    """Where versions before issue 17 kept the key: inside the data directory."""
    return Path(data_dir) / LEGACY_KEYS_DIRNAME

def _migrate_legacy(data_dir: Path, kdir: Path) -> SigningKey | None:
    """Move ``DATA_DIR/keys/signing.key`` into ``kdir``; the moved key, or None if there was none.

    Published like a new key (temp file, fsync, exclusive link), so a crash
    leaves the key in the old place, the new one, or both, never neither. Two
    different keys in the two places are refused: which one signs is the
    operator's decision.
    """
    legacy = legacy_keys_dir(data_dir)
    old_path = legacy / PRIVATE_FILENAME
    if not os.path.lexists(old_path) or legacy.resolve() == kdir.resolve():
        return None
    old = _read_private_file(old_path)
    if old is None:
        return None
    new_path = kdir / PRIVATE_FILENAME
    current = _read_private_file(new_path)
    if current is None:
        current = _publish_private_file(kdir, new_path, old)
    if current.key_id != old.key_id:
        raise KeyConfigError(
            source=str(old_path),
            expected=f"no key, or the same key as {new_path} ({current.key_id})",
            found=f"a different key ({old.key_id})",
            hint=f"keep the one that signed your receipts in {new_path} and remove {legacy}",
        )
    for name in (PRIVATE_FILENAME, PUBLIC_FILENAME):
        try:
            (legacy / name).unlink(missing_ok=True)
        except OSError as exc:
            log.warning("could not remove the old key file %s (%s): remove it yourself", legacy / name, exc.strerror)
    try:
        legacy.rmdir()
    except OSError:
        pass  # not empty (something else lives there) or already gone: leave it
    _fsync_dir(data_dir)
    log.warning(
        "moved the receipt signing key %s from %s to %s: keys are kept apart from the data directory, "
        "so handing over the data does not hand over the key",
        old.key_id,
        old_path,
        new_path,
    )
    return current

def _ensure_dir(kdir: Path) -> None:
    if kdir.is_dir():
        return
    private_dir(kdir.parent)
    try:
        kdir.mkdir(mode=PRIVATE_DIR)
    except FileExistsError:
        return
    os.chmod(kdir, PRIVATE_DIR)  # exact mode whatever the umask (0o277 would leave it unwritable)
    _fsync_dir(kdir.parent)

def _fix_hint(kdir: Path) -> str:
    folder = shlex.quote(str(kdir))
    key = shlex.quote(str(kdir / PRIVATE_FILENAME))
    return f"fix it with `chmod 700 {folder} && chmod 600 {key}` (and rotate the key if others may have read it)"

def _check_private_dir(kdir: Path) -> None:
    """Refuse a keys folder that is not a folder, that others can use, or that another user owns."""
    try:
        st = os.stat(kdir)
    except OSError as exc:
        raise KeyConfigError(
            source=str(kdir), expected="a readable keys folder", found=f"cannot stat it ({exc.strerror})"
        ) from None
    if not stat.S_ISDIR(st.st_mode):
        raise KeyConfigError(source=str(kdir), expected="a keys folder", found="another kind of file")
    _check_owner_and_mode(kdir, st, "mode 0700 or stricter", kdir)

def _check_owner_and_mode(path: Path, st: os.stat_result, expected_mode: str, kdir: Path) -> None:
    if st.st_uid != os.getuid():
        raise KeyConfigError(
            source=str(path),
            expected=f"owned by you (uid {os.getuid()})",
            found=f"owned by uid {st.st_uid}",
            hint=f"another user controls this key: use a keys folder of your own ({KEYS_DIR_ENV})",
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        raise KeyConfigError(source=str(path), expected=expected_mode, found=f"mode {mode:04o}", hint=_fix_hint(kdir))

def _read_private_file(path: Path) -> SigningKey | None:
    """The key in ``path``, or None if there is no such file. Refuses lax modes, other owners and non-files."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise KeyConfigError(
            source=str(path), expected="a regular key file", found=f"cannot open ({exc.strerror})"
        ) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise KeyConfigError(source=str(path), expected="a regular file", found="another kind of file")
        _check_owner_and_mode(path, st, "mode 0600 or stricter", path.parent)
        data = os.read(fd, MAX_KEY_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_KEY_FILE_BYTES:
        raise KeyConfigError(source=str(path), expected="a small PEM file", found=f"over {MAX_KEY_FILE_BYTES} bytes")
    return _private_from_pem(data, str(path))

def _create_private_file(kdir: Path, key_path: Path) -> SigningKey:
    """Publish a fresh key at ``key_path`` atomically; if another process won, return its key."""
    return _publish_private_file(kdir, key_path, SigningKey.generate())

def _publish_private_file(kdir: Path, key_path: Path, key: SigningKey) -> SigningKey:
    """Publish ``key`` at ``key_path`` atomically and exclusively; if the name exists, return the key already there."""
    tmp = kdir / f".{PRIVATE_FILENAME}.tmp-{os.getpid()}-{secrets.token_hex(8)}"
    fd = open_private(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW)
    try:
        try:
            _write_all(fd, key.to_pem())
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, key_path)  # atomic and exclusive: fails if the name exists
        except FileExistsError:
            winner = _read_private_file(key_path)
            if winner is None:
                raise KeyConfigError(
                    source=str(key_path), expected="the key another process created", found="it vanished"
                ) from None
            return winner
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_dir(kdir)
    return key

def _sync_public_file(kdir: Path, pub: PublicKey) -> None:
    """Make ``signing.pub`` hold the trust-format text of ``pub`` (it is derived data)."""
    path = kdir / PUBLIC_FILENAME
    text = format_public_key(pub).encode("ascii")
    try:
        if path.read_bytes() == text:
            return
    except FileNotFoundError:
        pass
    tmp = kdir / f".{PUBLIC_FILENAME}.tmp-{os.getpid()}-{secrets.token_hex(8)}"
    fd = open_private(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW)
    try:
        try:
            _write_all(fd, text)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)  # racers write identical bytes, so last-writer-wins is fine
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_dir(kdir)

def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
