"""`mre` (cli/) is the `python -m` programs under one name: every subcommand of every program has an `mre` twin
with the same arguments, which calls the same implementation function with the same argparse.Namespace, and so
prints the same output, the same one-line errors and the same exit codes.

The twins are found by introspecting the argparse parsers (each program's build_parser()): a subcommand or a flag
added to one side only fails here.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import pytest

from chat.engine import Engine
from cli import prog_bundle as bundle_cli
from cli import prog_chat as chat_cli
from cli import prog_control as control_cli
from cli import prog_ledger as ledger_cli
from cli import prog_receipts as receipts_cli
from cli import prog_retrieval as retrieval_cli
from cli.main import main as mre_main
from cli.main import mre
from receipts.keys import format_public_key

ROOT = Path(__file__).resolve().parents[2]
MAINS: dict[str, Callable[[list[str]], int]] = {
    "ledger": ledger_cli.main,
    "receipts": receipts_cli.main,
    "retrieval": retrieval_cli.main,
    "control": control_cli.main,
    "chat": chat_cli.main,
    "bundle": bundle_cli.main,
}
# `python -m PROGRAM SUBCOMMAND` -> `mre GROUP COMMAND` (docs/guides/cli.md "From `python -m` to `mre`" shows the same table).
TWINS: dict[tuple[str, str | None], tuple[str, str]] = {
    ("ledger", "import"): ("ledger", "import"),
    ("ledger", "list"): ("ledger", "list"),
    ("ledger", "verify"): ("ledger", "verify"),
    ("ledger", "repair"): ("ledger", "repair"),
    ("ledger", "export"): ("db", "export"),
    ("ledger", "migrate"): ("db", "migrate"),
    ("receipts", "verify"): ("receipt", "verify"),
    ("receipts", "show"): ("receipt", "show"),
    ("receipts", "pubkey"): ("receipt", "pubkey"),
    ("receipts", "checkpoint"): ("receipt", "checkpoint"),
    ("receipts", "tlog-proof"): ("receipt", "tlog-proof"),
    ("receipts", "verify-proof"): ("receipt", "verify-proof"),
    ("receipts", "cosign"): ("receipt", "cosign"),
    ("receipts", "verify-note"): ("receipt", "verify-note"),
    ("receipts", "replay"): ("receipt", "replay"),
    ("retrieval", "search"): ("search", "query"),
    ("retrieval", "rebuild"): ("search", "rebuild"),
    ("control", "forget"): ("control", "forget"),
    ("control", "revoke"): ("control", "revoke"),
    ("control", "restore"): ("control", "restore"),
    ("control", "supersede"): ("control", "supersede"),
    ("control", "history"): ("control", "history"),
    ("control", "suggestions"): ("control", "suggestions"),
    ("control", "ask-first"): ("control", "ask-first"),
    ("chat", None): ("chat", "turn"),  # `python -m chat DATA_DIR SESSION MESSAGE`: the one-turn form
    ("chat", "propose"): ("chat", "propose"),
    ("chat", "answer"): ("chat", "answer"),
    ("bundle", "export"): ("bundle", "export"),
    ("bundle", "verify"): ("bundle", "verify"),
    ("bundle", "import"): ("bundle", "import"),
    ("bundle", "markdown"): ("bundle", "markdown"),
    ("bundle", "list"): ("bundle", "list"),
}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_mre_reads_each_command_with_its_twins_parser() -> None:
    """cli/twins.py names the argparse parser each mre command reads its arguments with: the twin of this table."""
    from cli import twins

    assert sorted(twins.TWINS) == sorted(TWINS.values())
    for (program, sub), (group, command) in TWINS.items():
        made = twins.twin_parser(group, command)
        assert argparse_signature(made) == argparse_signature(COMMANDS[(program, sub)]), (group, command)
        assert made.prog == COMMANDS[(program, sub)].prog


def argparse_commands() -> dict[tuple[str, str | None], argparse.ArgumentParser]:
    """Every subcommand of every `python -m` program, from the parsers the programs build."""
    found: dict[tuple[str, str | None], argparse.ArgumentParser] = {}
    for program, module in (("ledger", ledger_cli), ("receipts", receipts_cli), ("retrieval", retrieval_cli), ("control", control_cli), ("bundle", bundle_cli)):
        for name, sub in _subparsers(module.build_parser()).items():
            found[(program, name)] = sub
    found[("chat", None)] = chat_cli.build_parser()
    for step, build in chat_cli.PARSERS.items():
        found[("chat", step)] = build()
    return found


def mre_commands() -> dict[tuple[str, str], click.Command]:
    found = {}
    for gname, group in mre.commands.items():
        assert isinstance(group, click.Group), gname
        for cname, command in group.commands.items():
            found[(gname, cname)] = command
    return found


COMMANDS = argparse_commands()


def _arg_shape(nargs: Any) -> str:
    return {None: "1", "?": "?", "*": "*"}[nargs]


def argparse_signature(parser: argparse.ArgumentParser) -> dict[str, Any]:
    """Positionals (dest and shape, in order); each option string -> (dest, takes a value, repeatable)."""
    positionals = [(a.dest, _arg_shape(a.nargs)) for a in parser._actions if not a.option_strings]
    options = {}
    for a in parser._actions:
        if a.option_strings and not isinstance(a, argparse._HelpAction):
            for opt in a.option_strings:
                options[opt] = (a.dest, a.nargs != 0, isinstance(a, argparse._AppendAction))
    return {"positionals": positionals, "options": options}


def click_signature(command: click.Command) -> dict[str, Any]:
    positionals = []
    options = {}
    for p in command.params:
        if isinstance(p, click.Argument):
            shape = "*" if p.nargs == -1 else ("1" if p.required else "?")
            positionals.append((p.name, shape))
        elif isinstance(p, click.Option) and p.name != "help":
            for opt in p.opts + p.secondary_opts:
                options[opt] = (p.name, not p.is_flag, p.multiple)
    return {"positionals": positionals, "options": options}


class TestEveryCommandHasATwin:
    def test_every_python_m_subcommand_is_in_the_table(self) -> None:
        assert sorted(COMMANDS, key=str) == sorted(TWINS, key=str)

    def test_every_mre_command_is_the_twin_of_exactly_one_subcommand(self) -> None:
        assert sorted(mre_commands()) == sorted(TWINS.values())
        assert len(set(TWINS.values())) == len(TWINS)

    @pytest.mark.parametrize("spelling", list(TWINS), ids=[f"{p} {c or '(turn)'}" for p, c in TWINS])
    def test_the_twin_takes_the_same_positionals_and_flags(self, spelling: tuple[str, str | None]) -> None:
        group, name = TWINS[spelling]
        assert click_signature(mre_commands()[(group, name)]) == argparse_signature(COMMANDS[spelling])


def _shortest_prefix(opt: str, parser: argparse.ArgumentParser) -> str:
    """The shortest prefix argparse reads as `opt` (allow_abbrev): it starts no other long option."""
    longs = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    for end in range(3, len(opt)):
        if [o for o in longs if o.startswith(opt[:end])] == [opt]:
            return opt[:end]
    return opt


def _sample_argv(parser: argparse.ArgumentParser, *, everything: bool, abbreviate: bool = False) -> list[str]:
    """Arguments the parser accepts: every positional, and with `everything` every option (a repeatable one twice),
    with `abbreviate` each long option as its shortest unique prefix."""
    argv: list[str] = []
    for i, a in enumerate(x for x in parser._actions if not x.option_strings):
        if a.nargs == "*":
            argv += [f"p{i}a", f"p{i}b"] if everything else []
        elif a.nargs == "?":
            argv += [f"p{i}"] if everything else []
        else:
            argv.append(f"p{i}")
    for a in parser._actions:  # every option with `everything`, else the required ones (cosign --policy)
        if not a.option_strings or isinstance(a, argparse._HelpAction) or not (everything or a.required):
            continue
        opt = a.option_strings[-1]
        if abbreviate and opt.startswith("--"):
            opt = _shortest_prefix(opt, parser)
        if a.nargs == 0:
            argv.append(opt)
        else:
            value = "7" if a.type in (int, float) else f"v-{a.dest}"
            argv += [opt, value] * (2 if isinstance(a, argparse._AppendAction) else 1)
    return argv


def _python_argv(spelling: tuple[str, str | None], rest: list[str]) -> list[str]:
    return rest if spelling[1] is None else [spelling[1], *rest]


@pytest.mark.parametrize("variant", ["every option", "defaults", "prefixes"])
@pytest.mark.parametrize("spelling", list(TWINS), ids=[f"{p} {c or '(turn)'}" for p, c in TWINS])
def test_the_twin_calls_the_same_function_with_the_same_namespace(
    spelling: tuple[str, str | None], variant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    parser = COMMANDS[spelling]
    rest = _sample_argv(parser, everything=variant != "defaults", abbreviate=variant == "prefixes")
    expected = parser.parse_args(rest)
    func = expected.func
    if spelling[0] != "chat":  # the program's subparsers set it (dest="command"); chat's steps are parsers of their own
        expected.command = spelling[1]
    seen: list[argparse.Namespace] = []

    def instead(args: argparse.Namespace) -> int:
        seen.append(args)
        return 0

    monkeypatch.setattr(sys.modules[func.__module__], func.__name__, instead)
    assert mre_main([*TWINS[spelling], *rest]) == 0
    (got,) = seen
    assert {k: v for k, v in vars(got).items() if k != "func"} == {k: v for k, v in vars(expected).items() if k != "func"}


# --- the same output on real invocations -------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A data directory the engine wrote (two remembered facts, one turn), its receipt, the public key, a kept
    checkpoint and an exported bundle."""
    root = tmp_path_factory.mktemp("mre")
    saved = {k: os.environ.pop(k, None) for k in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR", "DATABASE_URL")}
    try:
        engine = Engine(root / "data")
        engine.remember("alice", "a red kayak for Sunday")
        engine.remember("alice", "my sister lives in Lyon")
        turn = engine.turn("alice", "what boat do I have?", k=2)
        engine.index.close()
    finally:
        os.environ.update({k: v for k, v in saved.items() if v is not None})
    (root / "pub.json").write_text(format_public_key(engine.key.public_key))
    (root / "queries.txt").write_text("kayak\nsister\n")
    (root / "import.jsonl").write_text('{"role": "user", "text": "the train leaves at nine", "ts": "2026-01-02T03:04:05Z"}\n')
    assert receipts_cli.main(["checkpoint", str(root / "data"), "alice"]) == 0
    assert bundle_cli.main(["export", str(root / "data"), "alice", str(root / "alice.mre.zip")]) == 0
    return {"root": root, "data": root / "data", "receipt": turn.receipt_path, "pub": root / "pub.json", "bundle": root / "alice.mre.zip"}


def _fill(argv: list[str], made: dict[str, Path]) -> list[str]:
    return [a.format(**{k: str(v) for k, v in made.items()}) for a in argv]


def both(capsys: pytest.CaptureFixture[str], python_m: list[str], twin: list[str]) -> tuple[tuple[int, str, str], tuple[int, str, str]]:
    """(exit status, stdout, stderr) of `python -m X ...` and of `mre ...`, each run in this process."""
    capsys.readouterr()
    code = MAINS[python_m[0]](python_m[1:])
    a = (code, *capsys.readouterr())
    code = mre_main(twin)
    b = (code, *capsys.readouterr())
    return a, b


def twin_argv(python_m: list[str]) -> list[str]:
    program, *rest = python_m
    if program == "chat" and (not rest or rest[0] not in chat_cli.STEPS):
        return [*TWINS[("chat", None)], *rest]
    return [*TWINS[(program, rest[0])], *rest[1:]]


READING = [
    ["ledger", "list", "{data}"],
    ["ledger", "list", "{data}", "--json"],
    ["ledger", "verify", "{data}"],
    ["ledger", "verify", "{data}", "alice", "--json"],
    ["ledger", "verify", "{data}", "alice", "--since", "{root}/kept.json", "--trust", "{pub}", "--full"],  # --full: no cache
    ["ledger", "repair", "{data}", "alice"],
    ["receipts", "verify", "{receipt}"],
    ["receipts", "verify", "{receipt}", "--trust", "{pub}", "--data", "{data}"],
    ["receipts", "verify", "{receipt}", "--trust", "{pub}", "--json", "--rows"],
    ["receipts", "verify", "{receipt}", "--verbose"],
    ["receipts", "show", "{receipt}"],
    ["receipts", "show", "{receipt}", "--json"],
    ["receipts", "pubkey", "{data}"],
    ["receipts", "checkpoint", "{data}", "alice"],
    ["receipts", "pubkey", "{data}", "--vkey"],
    ["receipts", "checkpoint", "{data}", "alice", "--note"],
    ["receipts", "tlog-proof", "{receipt}", "3"],
    ["receipts", "replay", "{receipt}", "--data", "{data}", "--trust", "{pub}"],
    ["receipts", "replay", "{receipt}", "--data", "{data}", "--trust", "{pub}", "--json"],  # the answer: seq 3 after two remembered facts and the question
    ["retrieval", "search", "{data}", "alice", "kayak"],
    ["retrieval", "search", "{data}", "alice", "sister", "--json", "-k", "2", "--explain"],
    ["retrieval", "search", "{data}", "alice", "--queries", "{root}/queries.txt", "--history", "--include-revoked"],
    ["retrieval", "search", "{data}", "alice", "-1"],  # a negative number is a positional, as argparse reads it
    ["retrieval", "search", "{data}", "alice", "-3 kayaks"],  # so is an argument with a space inside
    ["retrieval", "search", "{data}", "alice", "kayak", "-k=2"],  # argparse reads -k=2 as -k 2
    ["retrieval", "search", "{data}", "alice", "kayak", "--js"],  # a unique prefix of --json
    ["retrieval", "search", "{data}", "alice", "kayak", "--as-of", "2"],
    ["retrieval", "search", "{data}", "alice", "sister", "--as-of", "{root}/kept.json", "--json"],
    ["control", "history", "{data}", "alice", "0"],
    ["control", "history", "{data}", "alice", "0", "--json"],
    ["control", "suggestions", "{data}", "alice", "--json"],
    ["bundle", "verify", "{bundle}"],
    ["bundle", "verify", "{bundle}", "--trust", "{pub}", "--json"],
]


@pytest.mark.parametrize("python_m", READING, ids=[" ".join(a[:2] + a[3:]) for a in READING])
def test_a_reading_command_prints_the_same(made: dict[str, Path], python_m: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    kept = made["root"] / "kept.json"
    if not kept.exists():
        assert receipts_cli.main(["checkpoint", str(made["data"]), "alice"]) == 0
        kept.write_text(capsys.readouterr().out)
    argv = _fill(python_m, made)
    a, b = both(capsys, argv, twin_argv(argv))
    assert a == b
    assert a[1]  # it printed something: the comparison is not of two empty outputs


@pytest.fixture
def two_copies(made: dict[str, Path], tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """Two copies of the data directory (and of its signing key, kept beside it) for commands that change it."""
    a, b = tmp_path / "a" / "data", tmp_path / "b" / "data"
    for copy in (a, b):
        shutil.copytree(made["data"], copy)
        shutil.copytree(made["root"] / "data.keys", copy.parent / "data.keys")
    yield a, b


def _same_after(a: tuple[int, str, str], b: tuple[int, str, str], da: Path, db: Path) -> None:
    """Equal once each names its own copy the same way; timings and times of day aside."""

    def norm(r: tuple[int, str, str], d: Path) -> tuple[int, str, str]:
        def s(text: str) -> str:
            text = text.replace(str(d), "DATA")
            text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z?", "TIME", text)
            text = re.sub(r"rcpt_[0-9a-f]{16,}", "RCPT", text)
            text = re.sub(r"ct1\.[A-Za-z0-9_.-]+", "TOKEN", text)  # a one-time token is random
            text = re.sub(r"head [0-9a-f]{16}", "head HEAD", text)  # a new event's id is random, so its chain hash
            return re.sub(r"in \d+\.\ds", "in Ns", text)

        return (r[0], s(r[1]), s(r[2]))

    assert norm(a, da) == norm(b, db)


WRITING = [
    ["control", "revoke", "{data}", "alice", "0", "--reason", "not now"],
    ["control", "supersede", "{data}", "alice", "1", "0"],
    ["control", "forget", "{data}", "alice", "1", "--json"],
    ["retrieval", "rebuild", "{data}"],
    ["ledger", "import", "{data}", "bob", "{root}/import.jsonl"],
    ["chat", "{data}", "alice", "where does my sister live?", "-k", "2"],
    ["chat", "{data}", "alice", "-5", "-k=2"],  # a negative-number message, and -k=2
    ["control", "revoke", "{data}", "alice", "0", "--reason=-typo"],  # a value starting with '-', attached by '='
    ["chat", "propose", "{data}", "alice", "where does my sister live?"],
    ["bundle", "markdown", "{data}", "alice", "{data}/../alice.md"],
]


@pytest.mark.parametrize("python_m", WRITING, ids=[" ".join(a[:2] + a[3:5]) for a in WRITING])
def test_a_writing_command_does_and_prints_the_same(
    made: dict[str, Path], two_copies: tuple[Path, Path], python_m: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    da, db = two_copies
    argv_a = _fill(python_m, {**made, "data": da})
    argv_b = twin_argv(_fill(python_m, {**made, "data": db}))
    capsys.readouterr()
    a = (MAINS[argv_a[0]](argv_a[1:]), *capsys.readouterr())
    b = (mre_main(argv_b), *capsys.readouterr())
    assert a[0] == 0, a
    _same_after(a, b, da, db)
    if python_m[:2] != ["chat", "propose"]:  # propose appends nothing; the others leave the same ledgers behind
        for session in ("alice", "bob"):
            la, lb = da / "sessions" / session / "events.jsonl", db / "sessions" / session / "events.jsonl"
            assert la.exists() == lb.exists()
            if la.exists():
                assert len(la.read_bytes().splitlines()) == len(lb.read_bytes().splitlines())


def test_ask_me_first_answers_the_same_in_both_spellings(two_copies: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    results = []
    for data, run in zip(two_copies, (chat_cli.main, lambda argv: mre_main(["chat", *argv])), strict=True):
        capsys.readouterr()
        assert run(["propose", str(data), "alice", "where does my sister live?"]) == 0
        token = capsys.readouterr().out.splitlines()[-1].removeprefix("token: ")
        code = run(["answer", str(data), token, "1", "--session", "alice"])
        results.append((code, *capsys.readouterr()))
    _same_after(results[0], results[1], *two_copies)
    assert results[0][0] == 0 and "receipt: " in results[0][1]


def test_bundle_export_and_import_do_the_same(made: dict[str, Path], two_copies: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    da, db = two_copies
    for data, run in ((da, bundle_cli.main), (db, lambda argv: mre_main(["bundle", *argv]))):
        capsys.readouterr()
        assert run(["export", str(data), "alice", str(data.parent / "out.zip")]) == 0
        out = capsys.readouterr().out
        assert run(["import", str(data), str(made["bundle"]), "--trust", str(made["pub"]), "--as", "alice-copy"]) == 0
        assert run(["list", str(data)]) == 0
        out += capsys.readouterr().out
        (data.parent / "said.txt").write_text(out.replace(str(data.parent), "HERE"))
    said_a, said_b = (d.parent / "said.txt" for d in two_copies)
    # the export's bytes carry the time it was made, the list when it was imported: everything else is the same
    strip = re.compile(r"sha256 [0-9a-f]{64}  [\d,]+ bytes|\d{4}-\d\d-\d\dT[\d:.]+Z")
    assert strip.sub("", said_a.read_text()) == strip.sub("", said_b.read_text())
    assert "imported session alice as alice-copy" in said_a.read_text()


# --- errors: one line, the same exit status, never a traceback -----------------------------------------------------

BAD = [
    ["ledger", "list", "{root}/missing"],
    ["ledger", "verify", "", "alice"],
    ["ledger", "verify", "{data}", "no/such"],
    ["ledger", "import", "{data}", "alice", "{root}"],
    ["ledger", "repair", "{data}", "nobody"],
    ["receipts", "verify", "{root}"],
    ["receipts", "verify", "{receipt}", "--trust", "{root}/missing.json"],
    ["receipts", "show", "{root}/queries.txt"],
    ["receipts", "checkpoint", "{data}", "nobody"],
    ["receipts", "checkpoint", "{data}", "nobody", "--note"],
    ["receipts", "tlog-proof", "{receipt}", "x"],
    ["receipts", "tlog-proof", "{root}", "0"],
    ["receipts", "tlog-proof", "{root}/queries.txt", "0"],
    ["receipts", "verify-proof", "{root}/queries.txt", "{receipt}"],
    ["retrieval", "search", "{data}", "alice", "x", "-k", "99"],
    ["retrieval", "search", "{data}", "alice"],
    ["retrieval", "rebuild", ""],
    ["control", "revoke", "{root}", "alice", "0"],
    ["control", "forget", "{data}", "alice"],
    ["control", "history", "{data}", "alice", "999"],
    ["chat", "", "alice", "hello?"],
    ["chat", "answer", "{data}", "ct1.not-a-token"],
    ["bundle", "verify", "{root}/queries.txt"],
    ["bundle", "export", "{root}/missing", "alice", "{root}/x.zip"],
    ["ledger", "export", "postgresql://mre:s3cr3t-Pa55@/x?host={root}/nosock&port=1", "alice"],  # a password: refused, never tried
    ["ledger", "export", "postgresql:///x?host={root}/nosock&password=s3cr3t-Pa55", "alice"],
    ["ledger", "export", "alice"],  # no URL argument and no DATABASE_URL
]


@pytest.mark.parametrize("python_m", BAD, ids=[f"{' '.join(a[:2])} [{i}]" for i, a in enumerate(BAD)])
def test_bad_input_is_the_same_one_line_and_exit_status(made: dict[str, Path], python_m: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    argv = _fill(python_m, made)
    a, b = both(capsys, argv, twin_argv(argv))
    assert a == b
    code, out, err = b
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err
    assert "s3cr3t-Pa55" not in err


USAGE = [
    ["ledger", "verify"],  # a missing argument
    ["ledger", "verify", "{data}", "--bogus"],  # an unknown option
    ["retrieval", "search", "{data}", "alice", "x", "-k", "many"],  # not an integer
    ["control", "revoke", "{data}", "alice"],
    ["chat", "answer", "{data}"],
    ["bundle", "verify"],
    ["ledger", "import", "{data}", "alice", "{root}/import.jsonl", "--allow"],  # an ambiguous prefix
    ["control", "revoke", "{data}", "alice", "0", "--reason", "-typo"],  # an option where its value was expected
    ["control", "revoke", "{data}", "alice", "0", "--reason", "--json"],
    ["retrieval", "search", "{data}", "alice", "kayak", "-k"],  # an option missing its value
    ["ledger", "verify", "{data}", "--json", "alice", "bob"],  # argparse: sessions after an option are not taken
]


@pytest.mark.parametrize("python_m", USAGE, ids=[" ".join(a) for a in USAGE])
def test_arguments_neither_can_parse_exit_2_and_mre_says_so_in_one_line(
    made: dict[str, Path], python_m: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = _fill(python_m, made)
    capsys.readouterr()
    try:  # argparse's own exit, after the usage and an `error:` line (retrieval returns 2 itself)
        code: Any = MAINS[argv[0]](argv[1:])
    except SystemExit as exc:
        code = exc.code
    old_err = capsys.readouterr().err
    assert code == 2 and "error: " in old_err and "Traceback" not in old_err
    assert mre_main(twin_argv(argv)) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("error: mre ") and "--help` shows the usage" in err


def test_a_database_url_option_is_the_variable_for_that_command_only(made: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`mre --database-url URL ...` is `DATABASE_URL=URL python -m ...` (here a URL that is not PostgreSQL's, refused
    in one line before any connection), and the variable is as it was afterwards."""
    capsys.readouterr()
    assert mre_main(["--database-url", "mysql://db/x", "ledger", "list", str(made["data"])]) == 2
    via_option = capsys.readouterr()
    assert "DATABASE_URL" not in os.environ
    assert mre_main(["--database-url", "mysql://db/x", "ledger", "list"]) == 2  # refused before it ran
    assert "DATABASE_URL" not in os.environ
    capsys.readouterr()
    monkeypatch.setenv("DATABASE_URL", "mysql://db/x")
    assert ledger_cli.main(["list", str(made["data"])]) == 2
    via_variable = capsys.readouterr()
    assert via_option == via_variable
    assert via_option.err.count("\n") == 1


# --- help and installation ------------------------------------------------------------------------------------------


def _commands_listed(help_text: str) -> list[str]:
    """The lines of a help's "Commands:" list (up to the blank line before an epilog)."""
    return help_text.split("Commands:\n", 1)[1].split("\n\n", 1)[0].splitlines()


def test_mre_help_lists_every_group_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert mre_main(["--help"]) == 0
    listed = _commands_listed(capsys.readouterr().out)
    names = [line.split()[0] for line in listed]
    assert names == ["chat", "search", "ledger", "receipt", "control", "bundle", "db"]
    assert all(not line.rstrip().endswith("...") for line in listed)  # no summary cut short


def test_mre_alone_shows_the_help_on_stderr_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert mre_main([]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "Commands:" in err and "Traceback" not in err


@pytest.mark.parametrize("group", ["chat", "search", "ledger", "receipt", "control", "bundle", "db"])
def test_a_group_help_lists_its_commands(group: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert mre_main([group, "--help"]) == 0
    listed = _commands_listed(capsys.readouterr().out)
    names = [line.split()[0] for line in listed]
    assert sorted(names) == sorted(c for g, c in TWINS.values() if g == group)
    assert all(not line.rstrip().endswith("...") for line in listed)


def test_the_installed_script_is_this_main() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    module, _, attr = project["scripts"]["mre"].partition(":")
    assert (module, attr) == ("cli.main", "main")
    assert "click" in {re.split(r"[<>=\[;]", line)[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()}


def test_mre_in_its_own_process_is_one_line_and_no_traceback(tmp_path: Path) -> None:
    """From a checkout (`python -m cli`, what the `mre` script runs): a refused data directory, exit 2."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "GROQ_API_KEY")}
    done = subprocess.run(
        [sys.executable, "-m", "cli", "ledger", "verify", str(tmp_path / "missing")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"error: {tmp_path / 'missing'}: no such data directory (nothing was created)\n"


def _readme_rows() -> list[tuple[list[str], list[str]]]:
    """The CLI guide's `python -m` -> `mre` table: each row's two cells as lists of words (backticks and commas dropped)."""
    section = (ROOT / "docs" / "guides" / "cli.md").read_text().split("## From `python -m` to `mre`\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c for c in line.split("|") if c.strip()]
        if len(cells) == 2 and "`" in cells[0]:
            left, right = (re.sub(r"[`,()]", " ", c).split() for c in cells)
            rows.append((left, right))
    return rows


def test_the_cli_guide_table_names_every_twin() -> None:
    rows = _readme_rows()
    for (program, sub), (group, command) in TWINS.items():
        assert any(
            left[0] == program and (sub is None or sub in left) and right[0] == group and command in right for left, right in rows
        ), f"docs/guides/cli.md's python -m -> mre table lacks python -m {program} {sub or ''} -> mre {group} {command}"


def test_a_reader_that_stops_early_ends_mre_quietly_with_141_as_python_m(made: dict[str, Path], tmp_path: Path) -> None:
    """`mre search query ... --queries FILE | head -1` (click alone would exit 1 on a broken pipe)."""
    many = tmp_path / "many.txt"
    many.write_text("kayak\n" * 3000)  # well over a pipe buffer of output
    codes = []
    for argv in (["retrieval", "search"], ["cli", "search", "query"]):
        proc = subprocess.Popen(
            [sys.executable, "-m", *argv, str(made["data"]), "alice", "--queries", str(many)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT
        )
        assert proc.stdout is not None and proc.stderr is not None
        assert b"kayak" in proc.stdout.readline()
        proc.stdout.close()
        err = proc.stderr.read().decode()
        codes.append(proc.wait(timeout=120))
        assert err == "", err
    assert codes == [141, 141]


# --- on PostgreSQL ---------------------------------------------------------------------------------------------------


@pytest.mark.pg
def test_on_postgresql_the_twins_migrate_read_and_export_the_same(
    made: dict[str, Path], pg_server: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python -m ledger migrate` and `mre db migrate` into two fresh databases say the same (each naming its own);
    then, with DATABASE_URL set, reading commands and `db export` print the same as their twins."""
    from tests import pg_support

    urls = [pg_support.fresh_database(pg_server) for _ in range(2)]
    data = str(made["data"])
    said = []
    for url, run in zip(urls, (lambda a: ledger_cli.main(["migrate", *a]), lambda a: mre_main(["db", "migrate", *a])), strict=True):
        capsys.readouterr()
        code = run([data, url, "alice"])
        out, err = capsys.readouterr()
        said.append((code, out.replace(url.rsplit("/", 1)[1].split("?")[0], "DB"), err))
    assert said[0] == said[1]
    assert said[0][0] == 0 and "ok      alice" in said[0][1]
    monkeypatch.setenv("DATABASE_URL", urls[1])
    for python_m in (
        ["ledger", "list", data],
        ["ledger", "verify", data, "alice", "--json"],
        ["ledger", "export", urls[1], "alice"],
        ["retrieval", "search", data, "alice", "kayak", "--json"],
        ["receipts", "verify", str(made["receipt"]), "--data", data, "--trust", str(made["pub"])],
        ["control", "history", data, "alice", "0"],
    ):
        a, b = both(capsys, python_m, twin_argv(python_m))
        assert a == b, python_m
        assert a[0] == 0 and a[1], (python_m, a)


def test_a_database_url_with_a_password_on_the_command_line_is_refused_and_never_echoed(tmp_path: Path) -> None:
    secret = "s3cr3t-Pa55"
    for url in (f"postgresql://mre:{secret}@127.0.0.1:1/x", f"postgresql://127.0.0.1:1/x?password={secret}"):
        r = subprocess.run(
            [sys.executable, "-c", "import sys; from cli.main import main; sys.exit(main(sys.argv[1:]))", "--database-url", url, "ledger", "list", str(tmp_path)],
            capture_output=True, text=True, cwd=ROOT, timeout=60,
        )
        assert r.returncode == 2 and "DATABASE_URL" in r.stderr and secret not in r.stdout + r.stderr and "Traceback" not in r.stderr, r.stderr


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review6_mre_dash_arguments.py):
# Reviewer finding (`mre` vs its `python -m` twins): argparse and click read arguments that start with '-'
# differently, so the twins disagree in exit status and effect on the same input:
#
# * a negative-number positional (a query "-1", a chat message "-5", a seq "-3"): argparse takes it as the positional
#   (the search runs, the turn is answered), mre refuses it as an unknown option (exit 2);
# * an option value that starts with '-' (`--reason -typo`): argparse refuses it (exit 2, nothing changed), mre takes it
#   as the value and revokes;
# * `-k=5`: argparse reads 5, mre refuses '=5'.
# --------------------------------------------------------------------------------------------------------------------


ENV = ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR", "DATABASE_URL")


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    engine = Engine(tmp_path / "a")
    engine.remember("alice", "the thermostat was set to -1 degrees by mistake")
    engine.index.close()
    return tmp_path / "a"


def _copy(data: Path) -> Path:
    b = data.parent / "b"
    shutil.copytree(data, b)
    keys = Path(f"{data}.keys")
    if keys.exists():
        shutil.copytree(keys, Path(f"{b}.keys"))
    return b


def _code(main, argv: list[str]) -> int:  # type: ignore[no-untyped-def]
    try:
        return int(main(argv))
    except SystemExit as exc:  # argparse's own exit
        return int(exc.code or 0)


@pytest.mark.parametrize("which", ["search", "chat"])
def test_a_negative_number_positional_is_read_the_same(data: Path, which: str, capsys: pytest.CaptureFixture[str]) -> None:
    b = _copy(data)
    if which == "search":
        py = _code(retrieval_cli.main, ["search", str(data), "alice", "-1"])
        twin = mre_main(["search", "query", str(b), "alice", "-1"])
    else:
        py = _code(chat_cli.main, [str(data), "alice", "-5"])
        twin = mre_main(["chat", "turn", str(b), "alice", "-5"])
    assert py == 0
    assert twin == py


def test_a_reason_starting_with_a_dash_is_read_the_same(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = _copy(data)
    py = _code(control_cli.main, ["revoke", str(data), "alice", "0", "--reason", "-typo"])
    twin = mre_main(["control", "revoke", str(b), "alice", "0", "--reason", "-typo"])
    assert (py, twin) == (py, py)


def test_k_equals_is_read_the_same(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    py = _code(retrieval_cli.main, ["search", str(data), "alice", "thermostat", "-k=5"])
    twin = mre_main(["search", "query", str(data), "alice", "thermostat", "-k=5"])
    assert py == 0
    assert twin == py
