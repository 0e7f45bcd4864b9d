"""The project installs (`pip install -e .`): every package is in the distribution, `mre` and every
`python -m ledger|receipts|retrieval|chat|control|bundle` answer from outside the checkout, and each `python -m`
entry point is a thin shim onto cli/ (issue 29: only the faces print).

Before issue 29 the project was not installable: outside the repository root `python -m chat` was
"No module named chat". The subprocesses here run with the checkout on PYTHONPATH (what an editable install
puts on sys.path) and their working directory elsewhere, so nothing may depend on the current folder.
"""

from __future__ import annotations

import ast
import fnmatch
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ("ledger", "receipts", "retrieval", "chat", "control", "bundle")
NOT_INSTALLED = {"tests", "bench", "docs", "data"}  # folders of the checkout that are not the library


def _pyproject() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _outside_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "GROQ_API_KEY", "PYTHONPATH")}
    env["PYTHONPATH"] = str(ROOT)
    return env


def test_every_package_of_the_checkout_is_in_the_distribution() -> None:
    """A package that `[tool.setuptools.packages.find]` does not include is missing from an installed copy:
    its imports work from the checkout and fail everywhere else."""
    tool = _pyproject()["tool"]
    assert isinstance(tool, dict)
    include = tool["setuptools"]["packages"]["find"]["include"]
    packages = sorted(p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name not in NOT_INSTALLED)
    assert "cli" in packages
    missing = [name for name in packages if not any(fnmatch.fnmatch(name, pattern) for pattern in include)]
    assert missing == [], f"pyproject.toml [tool.setuptools.packages.find] include lacks {missing}"
    assert "app" in tool["setuptools"]["py-modules"]  # `python app.py` from a checkout; importable once installed


@pytest.mark.parametrize("program", PROGRAMS)
def test_python_m_answers_outside_the_checkout(program: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", program, "--help"],
        cwd=tmp_path,
        env=_outside_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.startswith("usage: "), done.stdout[:200]


def test_the_mre_script_answers_outside_the_checkout(tmp_path: Path) -> None:
    """What the console script pip writes for `[project.scripts] mre` does: import the named function, exit with it."""
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    module, _, attr = project["scripts"]["mre"].partition(":")
    script = f"import sys; from {module} import {attr}; sys.argv[0] = 'mre'; sys.exit({attr}())"
    done = subprocess.run(
        [sys.executable, "-c", script, "--help"],
        cwd=tmp_path,
        env=_outside_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.startswith("Usage: mre "), done.stdout[:200]
    for group in ("chat", "search", "ledger", "receipt", "control", "bundle", "db"):
        assert f"\n  {group} " in done.stdout, group


@pytest.mark.parametrize("program", PROGRAMS)
def test_each_python_m_entry_point_is_a_shim_onto_cli(program: str) -> None:
    """`X/__main__.py` imports `main` from cli/ and exits with it, nothing else: the program lives in cli/."""
    source = (ROOT / program / "__main__.py").read_text()
    body = [
        node
        for node in ast.parse(source).body
        if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
    ]
    assert len(body) == 2, source
    imported, run = body
    assert isinstance(imported, ast.ImportFrom) and imported.module is not None, source
    assert imported.module.startswith("cli.") and [a.name for a in imported.names] == ["main"], source
    assert ast.unparse(run) == "raise SystemExit(main())", source
