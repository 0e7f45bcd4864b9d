from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT))


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.fail(f"shared test data missing: expected {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(autouse=True, scope="session")
def _verifier_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The verifier's own cache (storage.files.receipts.audit.cache_root) points at a temp folder, never at ~/.cache."""
    path = tmp_path_factory.mktemp("mre-cache")
    old = os.environ.get("MRE_CACHE_DIR")
    os.environ["MRE_CACHE_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("MRE_CACHE_DIR", None)
    else:
        os.environ["MRE_CACHE_DIR"] = old


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless chromium per browser-test module (tests/browser_support.launched_browser)."""
    from tests.browser_support import launched_browser

    with launched_browser() as b:
        yield b


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """One throwaway PostgreSQL cluster for the whole run (tests/pg_support.py); skips (fails under CI=true) without one."""
    from tests import pg_support

    yield from pg_support.server_or_skip()


@pytest.fixture
def pg_url(pg_server: Any) -> str:
    """The URL of a new, empty database on the run's server."""
    from tests import pg_support

    return pg_support.fresh_database(pg_server)


@pytest.fixture
def tmpdir_(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A system temporary folder of the test's own (tempfile caches the one it found first), and a cache root."""
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setenv("MRE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp
