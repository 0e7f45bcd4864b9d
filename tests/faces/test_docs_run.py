"""The examples a newcomer copies run as written from an empty folder (issue 31): the README's command-line block, the
CLI guide's quick start, then the bundles guide's block on the session they made, each line in bash with the exit
status its comment names (`exit 3`; 0 otherwise). `mre` is `python -m cli` here (the checkout, not installed);
`rcpt_….json` stands for the receipt the last turn printed, as a reader would paste it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_BLOCK = re.compile(r"```bash\n(.*?)```", re.DOTALL)
_COMMENT = re.compile(r"\s{2,}#.*$")
_EXIT = re.compile(r"#.*\bexit (\d+)")
PLACEHOLDER = "./data/sessions/alice/receipts/rcpt_….json"


def block(doc: str, after: str) -> list[tuple[str, int]]:
    """The commands of the first bash block after the line `after` in `doc`, each with the exit status it expects."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    start = text.index(after)
    match = _BLOCK.search(text, start)
    assert match is not None, f"{doc}: no bash block after {after!r}"
    out = []
    for line in match.group(1).splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        expected = _EXIT.search(line)
        out.append((_COMMENT.sub("", line).strip(), int(expected.group(1)) if expected else 0))
    return out


def run_all(commands: list[tuple[str, int]], cwd: Path, receipt: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("GROQ_API_KEY", "DATA_DIR", "DATABASE_URL", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR")}
    env["PYTHONPATH"] = str(ROOT)
    prelude = f'mre() {{ "{sys.executable}" -m cli "$@"; }}; python() {{ "{sys.executable}" "$@"; }}; '
    for command, expected in commands:
        if PLACEHOLDER in command:
            assert receipt, f"{command}: no turn printed a receipt before it"
            command = command.replace(PLACEHOLDER, receipt[-1])
        r = subprocess.run(["bash", "-c", prelude + command], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == expected, f"{command}\nexit {r.returncode}\n{r.stdout}\n{r.stderr}"
        assert "Traceback" not in r.stderr, r.stderr
        last = r.stdout.strip().splitlines()[-1:] if r.stdout.strip() else []
        if last and last[0].startswith("receipt: "):
            receipt.append(last[0].removeprefix("receipt: "))


def test_the_readme_command_line_block_runs_in_an_empty_folder(tmp_path: Path) -> None:
    commands = block("README.md", "## Command line")
    assert len(commands) >= 4
    run_all(commands, tmp_path, [])
    assert (tmp_path / "data").is_dir() and (tmp_path / "pubkey.json").is_file()


def test_the_quick_start_and_the_bundle_example_run_in_an_empty_folder(tmp_path: Path) -> None:
    quick = block("docs/guides/cli.md", "## Quick start")
    bundles = block("docs/guides/bundles.md", "# Take your memory with you")
    assert len(quick) >= 6 and any(c.startswith("python -m bundle import") for c, _ in bundles)
    receipt: list[str] = []
    run_all(quick, tmp_path, receipt)
    run_all(bundles, tmp_path, receipt)
    assert (tmp_path / "other").is_dir() and not (tmp_path / "third").exists()  # the refused import left no folder
    assert (tmp_path / "alice.md").is_file()


@pytest.mark.parametrize("doc", ["README.md", "docs/guides/cli.md", "docs/guides/bundles.md"])
def test_every_data_directory_an_example_writes_is_the_default_or_created(doc: str) -> None:
    """What the runs above rely on, said for every writing command of these docs: ./data, or --create."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    for line in text.splitlines():
        m = re.match(r"\s*(?:python -m chat|mre chat turn|python -m bundle import|python -m ledger import) (\S+)", line)
        if m and not m.group(1).isupper() and m.group(1) not in ("propose", "answer"):
            assert m.group(1) in ("./data", "data") or "--create" in line, line
