"""`python app.py` options (pure: argv and environment in, a Config out), and the start-up checks: the data
directory (made the way `python -m chat` makes one) and file modes."""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chat.engine import Engine
from receipts.body import MAX_RECEIPT_BYTES
from receipts.cosignature import MAX_POLICY_BYTES, Policy, parse_policy
from receipts.keys import KeyConfigError
from receipts.note import MalformedNote
from storage.datadir import EXPECTED_DATA_DIR, DataDirError, make_data_dir, writable_data_dir
from storage.local import keys_dir, load_existing, looser_than_private, new_key_note
from webui.retention import parse_hours

DEFAULT_PORT = 7860
DEFAULT_CONCURRENCY = 16
SWEEP_SECONDS = 300.0

DESCRIPTION = """\
The Memory Receipt Engine web app: chat with stamps, manual search, receipt
verification and the ledger view, plus an MCP server at /gradio_api/mcp/.
Without GROQ_API_KEY the offline stand-in answers (and says so).

environment:
  DATA_DIR             default for --data (./data)
  GRADIO_SERVER_NAME   default for --host (127.0.0.1; a Space sets 0.0.0.0)
  GRADIO_SERVER_PORT   default for --port (7860)
  RETENTION_HOURS      default for --retention-hours (off)
  GROQ_API_KEY, GROQ_MODEL, GROQ_BASE_URL   the language model (optional)
  RECEIPT_SIGNING_KEY  the receipt signing key (else signing.key in the keys folder, created once)
  RECEIPT_KEYS_DIR     the keys folder (default: DATA_DIR.keys beside the data directory, mode 0700)
  MRE_LOG_PROMPTS      set to 1 to let GROQ_LOG=debug log prompts (memories included); off by default
"""


class ConfigError(ValueError):
    """An option or environment variable is unusable; the app does not start."""


@dataclass(frozen=True, slots=True)
class Config:
    data_dir: Path
    host: str
    port: int
    retention_hours: float | None
    concurrency: int
    mcp: bool
    create: bool = False  # --create: make every missing folder of data_dir, not only its last
    # --data named a folder other than the default ($DATA_DIR or ./data): when it is missing, it is made only with
    # --create, so a typo never starts a second history (issue 31)
    not_default: bool = False
    semantic: bool = False  # --semantic: hybrid search with the optional semantic extra (requirements-semantic.txt)
    witnesses: Policy | None = None  # $WITNESS_POLICY: a tlog-policy whose witnesses cosign each turn's checkpoint (§22)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise ConfigError(message)


def parser(environ: Mapping[str, str]) -> argparse.ArgumentParser:
    p = _Parser(prog="python app.py", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--data",
        default=environ.get("DATA_DIR") or "./data",
        help="data directory: ledgers, index, receipts (default: $DATA_DIR or ./data); keys live apart, in DATA_DIR.keys",
    )
    p.add_argument(
        "--host",
        default=environ.get("GRADIO_SERVER_NAME") or "127.0.0.1",
        help="address to listen on (default: $GRADIO_SERVER_NAME or 127.0.0.1)",
    )
    p.add_argument(
        "--port",
        default=environ.get("GRADIO_SERVER_PORT") or str(DEFAULT_PORT),
        help=f"port (default: $GRADIO_SERVER_PORT or {DEFAULT_PORT})",
    )
    p.add_argument(
        "--retention-hours",
        default=environ.get("RETENTION_HOURS"),
        help="delete sessions idle for more than this many hours (default: $RETENTION_HOURS, or off). Set it on a public Space.",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help=f"events run in parallel across visitors (default {DEFAULT_CONCURRENCY})",
    )
    p.add_argument("--no-mcp", action="store_true", help="do not serve the MCP endpoint")
    p.add_argument(
        "--semantic",
        action="store_true",
        help="search by meaning too: the optional semantic extra (pip install -r requirements-semantic.txt)",
    )
    p.add_argument(
        "--create",
        action="store_true",
        help="create the data directory and any missing folders above it (without it only the default is made)",
    )
    return p


def parse_args(argv: Sequence[str] | None, environ: Mapping[str, str]) -> Config:
    """Raises ConfigError naming the bad option; --help exits (SystemExit 0) as usual."""
    args = parser(environ).parse_args(argv)
    if not args.data.strip():  # Path("") is ".": the app would quietly make the current folder its data directory
        raise ConfigError(f"--data: an empty path; {EXPECTED_DATA_DIR}")
    try:
        port = int(args.port)
    except ValueError:
        raise ConfigError(f"--port {args.port!r}: must be a number from 1 to 65535") from None
    if not 1 <= port <= 65535:
        raise ConfigError(f"--port {port}: must be from 1 to 65535")
    if not 1 <= args.concurrency <= 256:
        raise ConfigError(f"--concurrency {args.concurrency}: must be from 1 to 256")
    try:
        hours = parse_hours(args.retention_hours)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    default = environ.get("DATA_DIR") or "./data"
    not_default = os.path.abspath(args.data) != os.path.abspath(default)
    return Config(
        Path(args.data), args.host, port, hours, args.concurrency, not args.no_mcp, args.create, not_default, args.semantic,
        witness_policy(environ),
    )


WITNESS_POLICY_ENV = "WITNESS_POLICY"


def witness_policy(environ: Mapping[str, str]) -> Policy | None:
    """The tlog-policy file $WITNESS_POLICY names (docs/guides/witnesses.md), or None when unset. ConfigError (one
    line) for a file that cannot be read or is not a policy: the app does not start half-witnessed."""
    raw = environ.get(WITNESS_POLICY_ENV, "").strip()
    if not raw:
        return None
    try:
        with open(raw, "rb") as f:
            data = f.read(MAX_POLICY_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{WITNESS_POLICY_ENV}={raw}: {exc.strerror or exc}") from None
    try:
        return parse_policy(data)
    except MalformedNote as exc:
        raise ConfigError(f"{WITNESS_POLICY_ENV}={raw}: {exc}") from None


def open_engine(cfg: Config) -> Engine:
    """The engine over --data, the data directory made as `python -m chat` makes it: a missing one only when it is
    the default ($DATA_DIR or ./data, its parent folder existing) or with --create (all of it), and that, like a new
    receipt signing key, is said on stderr. Any other missing --data (a typo) is a ConfigError, and nothing is created."""
    try:
        data = writable_data_dir(str(cfg.data_dir), create=cfg.create)
    except DataDirError as exc:
        raise ConfigError(f"--data {exc}") from None
    if cfg.not_default and not cfg.create and not data.is_dir():
        raise ConfigError(f"--data {cfg.data_dir}: no such data directory; nothing was created (pass --create to start a new one there)")
    had_key = load_existing(data) is not None  # reads only: a new key is announced, never made silently
    if make_data_dir(data):
        _note(f"created data directory {data}")
    engine = Engine(data)  # moves a key left in DATA_DIR/keys/ out first
    engine.witnesses = cfg.witnesses
    if not had_key:
        _note(new_key_note(data, engine.key.key_id))
    return engine


def _note(message: str) -> None:
    """A line for the person at the terminal (stderr), as the command lines say what they created."""
    print(message, file=sys.stderr)


CACHE_MAX_AGE = 24 * 3600


def delete_cache(hours: float | None) -> tuple[int, int]:
    """Gradio's (frequency, age) for its file cache: uploaded receipts and download copies.

    The cache is never the record (DATA_DIR is), so it is bounded even with retention off:
    a day, or the retention age when that is shorter. A reload re-offers an older receipt.
    """
    age = CACHE_MAX_AGE if hours is None else max(60, min(CACHE_MAX_AGE, int(hours * 3600)))
    return min(age, 3600), age


def sweep_interval(hours: float | None) -> float:
    return SWEEP_SECONDS if hours is None else max(10.0, min(SWEEP_SECONDS, hours * 3600 / 4))


def launch_options(cfg: Config) -> dict[str, Any]:
    """The keyword arguments for Blocks.launch (the privacy- and limit-relevant ones are the point)."""
    return {
        "server_name": cfg.host,
        "server_port": cfg.port,
        "mcp_server": cfg.mcp,
        "max_file_size": MAX_RECEIPT_BYTES,  # uploads over the receipt cap are refused by Gradio, unread
        "blocked_paths": _blocked_paths(cfg.data_dir),  # never served as a file, whatever a handler returns
        "run_history": False,  # no copy of visitors' calls in the browser's run history
        "enable_monitoring": False,  # no /monitoring dashboard of visitors' events (webui/__init__.py stops its summary)
        "footer_links": ["api", "gradio"],
        "ssr_mode": False,
        "show_error": False,
    }


def _blocked_paths(data_dir: Path) -> list[str]:
    paths = [str(data_dir.resolve())]
    try:
        paths.append(str(keys_dir(data_dir).resolve()))  # the keys live apart from the data: block them too
    except KeyConfigError:
        pass  # no keys folder can exist (the engine refuses to start the same way)
    return paths


log = logging.getLogger("webui")
LOOSE_SHOWN = 3


def loose_modes_message(data_dir: Path) -> str | None:
    """A one-line warning naming what under `data_dir` other local users can read, and the fix; None if nothing."""
    loose = list(looser_than_private(data_dir))
    if not loose:
        return None
    shown = ", ".join(f"{p} ({mode:04o})" for p, mode in loose[:LOOSE_SHOWN])
    more = f" and {len(loose) - LOOSE_SHOWN} more" if len(loose) > LOOSE_SHOWN else ""
    return (
        f"{data_dir}: {len(loose)} files or folders are open to other local users ({shown}{more}); "
        f"they hold memories. Nothing was changed; to fix: chmod -R go-rwx {shlex.quote(str(data_dir))}"
    )


def warn_loose_modes(data_dir: Path) -> str | None:
    """Log the loose-modes warning once (at start-up); returns it. Never chmods anything."""
    message = loose_modes_message(data_dir)
    if message is not None:
        log.warning("%s", message)
    return message
