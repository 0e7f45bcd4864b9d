"""Reviewer finding (issue 28 item 6, "everything the project writes is 0600 in 0700, whatever the umask"): under
umask 022 `python -m bundle export` (and bundle.export_session) writes the bundle — the whole ledger, every receipt,
in plain text, stored — 0644, world-readable, while `python -m bundle markdown` writes its Markdown 0600."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.prog_bundle import main

from .test_bundle import SESSION, Source, build_source


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Source:
    return build_source(tmp_path_factory.mktemp("review5-export-mode"))


@pytest.fixture
def umask022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.usefixtures("umask022")
def test_the_markdown_export_is_0600_under_umask_022(source: Source, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    out = tmp_path / "s.md"
    assert main(["markdown", str(source.data), SESSION, str(out)]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


@pytest.mark.usefixtures("umask022")
def test_the_bundle_export_is_0600_under_umask_022(source: Source, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    out = tmp_path / "b.mrebundle"
    assert main(["export", str(source.data), SESSION, str(out)]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600, f"{stat.S_IMODE(out.stat().st_mode):04o}"


@pytest.mark.usefixtures("umask022")
def test_the_apps_bundle_export_is_0600_under_umask_022(tmp_path: Path) -> None:
    from chat.engine import Engine
    from chat.llm import LLM
    from webui import bundles as bd
    from webui.service import Service
    from webui.sessions import new_session_key

    eng = Engine(tmp_path / "data", llm=LLM(api_key=""))
    svc = Service(eng)
    try:
        key = new_session_key()
        svc.remember(key, "I live in Lisbon")
        done = bd.export_bundle(svc, key)
        assert stat.S_IMODE(done.path.stat().st_mode) == 0o600, f"{stat.S_IMODE(done.path.stat().st_mode):04o}"
    finally:
        eng.close()
        svc.downloads.close()
