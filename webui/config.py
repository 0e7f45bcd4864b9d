"""`python app.py` options (pure: argv and environment in, a Config out)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from receipts.body import MAX_RECEIPT_BYTES

from .retention import parse_hours

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
  RECEIPT_SIGNING_KEY  the receipt signing key (else DATA_DIR/keys/, created once)
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


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise ConfigError(message)


def parser(environ: Mapping[str, str]) -> argparse.ArgumentParser:
    p = _Parser(prog="python app.py", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--data",
        default=environ.get("DATA_DIR") or "./data",
        help="data directory: ledgers, index, receipts, keys (default: $DATA_DIR or ./data)",
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
    return p


def parse_args(argv: Sequence[str] | None, environ: Mapping[str, str]) -> Config:
    """Raises ConfigError naming the bad option; --help exits (SystemExit 0) as usual."""
    args = parser(environ).parse_args(argv)
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
    return Config(Path(args.data), args.host, port, hours, args.concurrency, not args.no_mcp)


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
        "blocked_paths": [str(cfg.data_dir.resolve())],  # never served as a file, whatever a handler returns
        "run_history": False,  # no copy of visitors' calls in the browser's run history
        "footer_links": ["api", "gradio"],
        "ssr_mode": False,
        "show_error": False,
    }
