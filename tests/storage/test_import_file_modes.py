"""An imported session is private like everything else the project writes (issue 28 §6): under umask 022, every file
under DATA_DIR/imported (the ledger, the checkpoint, the receipts, the certificates, origin.json, the bundle's keys,
the index) is 0600 and every folder 0700, whichever way the bundle came in — `python -m bundle import`, the library
call on both backends, the app's Import tab, MCP import_bundle — and the app's start-up warning about loose modes
stays silent afterwards."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from bundle import import_bundle
from chat.engine import Engine
from chat.llm import LLM
from cli.prog_bundle import main
from storage.common.fsmode import private_dir
from storage.stores import Stores, file_stores, pg_stores
from webui.bundle_ui import BundleUI
from webui.config import loose_modes_message
from webui.mcp_tools import make_tools
from webui.service import Service
from webui.sessions import new_session_key

from ..services.test_bundle import Source, build_source
from .test_file_modes import wrong_modes

WORLD_READABLE_UMASK = 0o022


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Source:
    return build_source(tmp_path_factory.mktemp("import-modes-source"))


@pytest.fixture
def umask022() -> Iterator[None]:
    old = os.umask(WORLD_READABLE_UMASK)
    try:
        yield
    finally:
        os.umask(old)


def private_data_dir(path: Path) -> Path:
    """A data directory as the app makes it (private), holding `sessions/` and nothing else."""
    private_dir(path / "sessions")
    return path


def assert_imported_private(data: Path) -> None:
    root = data / "imported"
    files = [p for p in root.rglob("*") if p.is_file()]
    assert any(p.name == "events.jsonl" for p in files), "nothing was imported: the check would be empty"
    assert wrong_modes(root) == []
    assert loose_modes_message(data) is None


@pytest.fixture(params=["file", pytest.param("pg", marks=pytest.mark.pg)])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    data = private_data_dir(tmp_path / "data")
    opened = file_stores(data) if request.param == "file" else pg_stores(request.getfixturevalue("pg_url"), data)
    try:
        yield opened
    finally:
        if opened.kind == "files":
            opened.index.close()
            opened.ledger.close()


def test_an_imported_session_is_0600_in_0700_under_umask_022_on_both_backends(
    source: Source, stores: Stores, umask022: None
) -> None:
    done = import_bundle(stores.data_dir, source.bundle, trusted=source.trusted, stores=stores)
    assert not done.duplicate
    root = stores.data_dir / "imported"
    if stores.kind == "files":
        names = {p.name for p in root.rglob("*")}
        assert {"events.jsonl", "checkpoint.json", "origin.json", "bundle-keys", "erasures", "receipts"} <= names
        assert_imported_private(stores.data_dir)
    else:  # on PostgreSQL only the staging folder is written there (and removed): what is left is private too
        assert wrong_modes(root) == [] and loose_modes_message(stores.data_dir) is None


def test_bundle_import_on_the_command_line_writes_private_files_under_umask_022(
    source: Source, tmp_path: Path, umask022: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    data = private_data_dir(tmp_path / "data")
    assert main(["import", str(data), str(source.bundle), "--trust", str(source.pub)]) == 0
    assert_imported_private(data)


@pytest.fixture
def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Service:
    for name in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return Service(Engine(tmp_path / "data", llm=LLM(api_key="")))


def talked(service: Service) -> str:
    key = new_session_key()
    service.turn(key, "the spare key is under the blue pot", 8)
    return key


def test_the_import_tab_writes_private_files_under_umask_022(service: Service, umask022: None) -> None:
    bui = BundleUI(service)
    key = talked(service)
    _status, button = bui.export_bundle(key, lambda *a, **k: None)
    path = button.value["path"] if isinstance(button.value, dict) else button.value
    result, *_rest = bui.import_bundle(str(path), False, key)
    assert "Imported" in result
    assert_imported_private(service.data_dir)


def test_mcp_import_bundle_writes_private_files_under_umask_022(service: Service, umask022: None) -> None:
    tools = {fn.__name__: fn for fn in make_tools(service)}
    key = talked(service)
    data = json.loads(tools["export_session"](key))["bundle_base64"]
    assert base64.b64decode(data)[:2] == b"PK"
    out = json.loads(tools["import_bundle"](key, data))
    assert out["imported"], out
    assert_imported_private(service.data_dir)
