"""`mre bundle`: session bundles (`python -m bundle export|verify|import|markdown|list`)."""

from __future__ import annotations

from typing import Any

import click

from cli.calls import run_program
from cli.options import OrderedGroup, data_dir_argument, json_option, session_argument, trust_option

IMPL = "cli.prog_bundle"
EPILOG = (
    "Exit status: 0 VERIFIED (or done); 1 FAILED (a check failed); 3 UNVERIFIED (nothing failed, but no --trust key "
    "was given or something could not be checked); 2 unusable input (a bundle refused for its structure, a bad path)."
)


@click.group(cls=OrderedGroup)
def bundle() -> None:
    """Session bundles: export, verify, import; Markdown, list."""


@bundle.command(epilog=EPILOG)
@data_dir_argument
@session_argument
@click.argument("out", metavar="OUT")
def export(**params: Any) -> int:
    """Write one session as a signed bundle."""
    return run_program(IMPL, "cmd_export", "export", params)


@bundle.command(epilog=EPILOG, short_help="Check a bundle: signature, members, ledger, every receipt.")
@click.argument("file", metavar="FILE")
@trust_option("a public key to trust (repeatable)")
@json_option("print the report as JSON")
@click.option("--policy", metavar="FILE", help="check the witness cosignatures the bundle carries under this tlog-policy (logs, witnesses, quorum)")
def verify(**params: Any) -> int:
    """Check a bundle: signature, members, ledger, checkpoint, every receipt and certificate."""
    return run_program(IMPL, "cmd_verify", "verify", params)


@bundle.command("import", epilog=EPILOG)
@data_dir_argument
@click.argument("file", metavar="FILE")
@click.option("--as", "as_session", metavar="SESSION", help="the session id to import it as")
@trust_option("a public key to trust (repeatable)")
@click.option("--allow-untrusted", is_flag=True, help="import a bundle no --trust key signed (recorded as unverified)")
@click.option("--create", is_flag=True, help="create DATA_DIR and any missing folders above it (without it only the default ./data is made)")
@click.option("--detect-changes", is_flag=True, help="run the change detector over the imported user statements in order, recording its "
              "supersessions as chat turns do (only for a bundle this DATA_DIR's key signed, on files)")
def import_(**params: Any) -> int:
    """Verify a bundle, then import it under a new session id."""
    return run_program(IMPL, "cmd_import", "import", params)


@bundle.command()
@data_dir_argument
@session_argument
@click.argument("out", metavar="OUT")
def markdown(**params: Any) -> int:
    """The conversation as one readable Markdown file."""
    return run_program(IMPL, "cmd_markdown", "markdown", params)


@bundle.command("list")
@data_dir_argument
def list_(**params: Any) -> int:
    """The imported sessions of a data directory."""
    return run_program(IMPL, "cmd_list", "list", params)
