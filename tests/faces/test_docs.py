"""The documentation keeps up with the code: a newcomer's README, guides that name every command, links that land.

README.md is short on purpose (issue 29: at most 200 lines; the reference lives in docs/guides/), so what it must keep
is checked here: the Hugging Face Space's front matter, the two set-up commands, the chat screenshot. Every `mre`
command click knows appears in the CLI guide, and every relative link in README.md, docs/ and bench/ names a file
that exists and, after a '#', a heading of it (anchors computed as GitHub computes them).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from cli.main import mre

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
CLI_GUIDE = ROOT / "docs" / "guides" / "cli.md"
DOCS = sorted([README, *(ROOT / "docs").rglob("*.md"), *(ROOT / "bench").glob("*.md")])

SET_UP = (
    "pip install -r requirements.txt && python app.py",
    "pip install -r requirements-dev.txt && python -m pytest",
)

_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)


def _prose(text: str) -> str:
    """The text outside fenced code blocks (a `# comment` in a bash block is not a heading, `](x)` there no link)."""
    return _FENCE.sub("", text)


def github_anchor(heading: str) -> str:
    """The fragment GitHub gives a heading: the rendered text lower-cased, punctuation dropped, spaces made hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading renders as its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every fragment a link into `path` may name: each heading's, with GitHub's -1, -2 … for repeats."""
    seen: dict[str, int] = {}
    out = set()
    for match in _HEADING.finditer(_prose(path.read_text(encoding="utf-8"))):
        base = github_anchor(match.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    out.update(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", path.read_text(encoding="utf-8")))
    return out


def relative_links(path: Path) -> Iterator[str]:
    for target in _LINK.findall(_prose(path.read_text(encoding="utf-8"))):
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: … are not ours to check
            yield target


def mre_commands(group: click.Group = mre, prefix: str = "mre") -> Iterator[str]:
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from mre_commands(command, f"{prefix} {name}")
        else:
            yield f"{prefix} {name}"


class TestGithubAnchor:
    @pytest.mark.parametrize(
        ("heading", "expected"),
        [
            ("Set-up (two commands)", "set-up-two-commands"),
            ("What a receipt proves, and what it doesn't", "what-a-receipt-proves-and-what-it-doesnt"),
            ("From `python -m` to `mre`", "from-python--m-to-mre"),
            ("Scaling out: PostgreSQL and several replicas", "scaling-out-postgresql-and-several-replicas"),
            ("§9 Receipts (format 2)", "9-receipts-format-2"),
        ],
    )
    def test_a_heading_gets_githubs_fragment(self, heading: str, expected: str) -> None:
        assert github_anchor(heading) == expected

    def test_a_repeated_heading_gets_a_numbered_fragment(self, tmp_path: Path) -> None:
        doc = tmp_path / "doc.md"
        doc.write_text("# Notes\n\n## Usage\n\n```bash\n# not a heading\n```\n\n## Usage\n", encoding="utf-8")
        assert anchors(doc) == {"notes", "usage", "usage-1"}


class TestReadme:
    def test_the_readme_is_at_most_200_lines(self) -> None:
        assert len(README.read_text(encoding="utf-8").splitlines()) <= 200

    def test_the_readme_keeps_the_two_set_up_commands_verbatim(self) -> None:
        blocks = re.findall(r"^```bash\n(.*?)^```", README.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)
        for command in SET_UP:
            assert any(command in block.splitlines() for block in blocks), command

    def test_the_readme_starts_with_the_spaces_front_matter(self) -> None:
        text = README.read_text(encoding="utf-8")
        assert text.startswith("---\n")
        front = text.split("\n---\n", 1)[0]
        for line in ("sdk: gradio", "app_file: app.py", 'python_version: "3.11"'):
            assert line in front.splitlines(), line

    def test_the_readme_shows_the_chat_screenshot(self) -> None:
        assert "](docs/screenshot-chat.png)" in README.read_text(encoding="utf-8")


class TestCliGuide:
    def test_there_are_commands_to_look_for(self) -> None:
        assert len(list(mre_commands())) >= 20  # a walk that found nothing would pass the next test vacuously

    @pytest.mark.parametrize("command", list(mre_commands()))
    def test_every_mre_command_is_in_the_cli_guide(self, command: str) -> None:
        guide = CLI_GUIDE.read_text(encoding="utf-8")
        assert re.search(rf"`{re.escape(command)}`", guide), f"docs/guides/cli.md does not name `{command}`"


class TestLinks:
    def test_there_are_links_to_check(self) -> None:
        assert sum(1 for doc in DOCS for _ in relative_links(doc)) >= 50

    @pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
    def test_every_relative_link_lands_on_a_file_and_heading(self, doc: Path) -> None:
        broken = []
        for target in relative_links(doc):
            path, _, fragment = target.partition("#")
            file = (doc.parent / path).resolve() if path else doc
            if not file.exists():
                broken.append(f"{target}: no such file")
            elif fragment and file.suffix == ".md" and fragment not in anchors(file):
                broken.append(f"{target}: no heading #{fragment} in {file.relative_to(ROOT)}")
        assert broken == [], f"{doc.relative_to(ROOT)}: {broken}"
