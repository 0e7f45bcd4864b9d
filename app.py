"""`python app.py [--data DIR] [--host H] [--port P]`: the Memory Receipt Engine web app and MCP server.

Starting only: the options, the data directory, the service, the start-up sweep and recovery, then
launch. The page is webui/layout.py (its events webui/wiring.py); every rule lives in `webui/`.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

import gradio as gr

from receipts.keys import KeyConfigError
from storage import BackendError
from storage.api import SemanticUnavailable, semantic_model
from webui.config import (
    Config,
    ConfigError,
    launch_options,
    open_engine,
    parse_args,
    sweep_interval,
    warn_loose_modes,
)
from webui.forget import recover
from webui.handlers import raised_at
from webui.layout import CSS, build
from webui.retention import Sweeper, sweep
from webui.service import Service

__all__ = ["Running", "build", "main", "start"]  # build: tests build the page without launching it

log = logging.getLogger("app")


@dataclass
class Running:
    """A launched app: stop() closes the server, the sweeper and the download folder."""

    demo: gr.Blocks
    url: str
    service: Service
    sweeper: Sweeper

    def stop(self) -> None:
        self.sweeper.stop()
        self.demo.close()
        self.service.downloads.close()
        self.service.engine.index.stop_embedding()  # the semantic extra's thread: nothing written after the stop
        self.service.engine.close()  # a PostgreSQL pool (nothing for files)


def start(cfg: Config, *, block: bool = False, quiet: bool = False) -> Running:
    """Open the data directory, sweep, build and launch. With block=False the server runs in a thread."""
    engine = open_engine(cfg)  # a --data whose parent is missing is refused (a typo), unless --create
    if cfg.semantic:  # the model's sha256 is checked before it loads; SemanticUnavailable is one line
        engine.index.use_semantic(semantic_model())
        log.info("search: hybrid (%s)", engine.index.semantic)
    elsewhere = engine.ledger.kept_elsewhere()  # DATABASE_URL: several replicas may share it (README "Scaling out")
    if elsewhere is not None:
        log.info("memory kept in %s; %s holds the signing key and caches", elsewhere, cfg.data_dir)
    warn_loose_modes(cfg.data_dir)  # what the engine creates is private: anything loose was there before
    service = Service(engine)  # its Downloads removes the download folders of app processes that are gone
    demo = build(service, retention_hours=cfg.retention_hours)  # adds Gradio's file cache to service.cache_dirs
    # finish any erasure a crash interrupted, and delete its receipts' copies in those folders, before the index
    # catches up or a visitor arrives
    recover(service)
    for warning in engine.index.catch_up():
        log.warning("%s", warning)
    if cfg.semantic:  # vectors for what is not embedded yet, then for each turn's events: a thread, off every turn's path
        engine.index.embed_in_background(engine.ledger.sessions())
    jobs = [service.downloads.sweep]
    if cfg.retention_hours is not None:
        sweep(engine, cfg.retention_hours)
        jobs.insert(0, lambda: sweep(engine, cfg.retention_hours))
    sweeper = Sweeper(jobs, sweep_interval(cfg.retention_hours))
    sweeper.start()
    demo.queue(default_concurrency_limit=cfg.concurrency)
    running = Running(demo, "", service, sweeper)
    _app, url, _share = demo.launch(prevent_thread_lock=not block, quiet=quiet, css=CSS, **launch_options(cfg))
    running.url = url or f"http://{cfg.host}:{cfg.port}/"
    return running


START_FAILED = (
    "the app could not start; the log line above says where it failed. "
    "Check the data directory with `python -m ledger verify DATA_DIR`"
)


def quiet_logs(environ: Mapping[str, str]) -> None:
    """The operator's log holds the app's own lines: not gradio's loopback requests (httpx), nor the two INFO lines
    the MCP SDK writes for every tool call ("Processing request of type …", "Terminating session: None") unless
    MRE_LOG_MCP=1 asks for them."""
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("mcp").setLevel(logging.INFO if environ.get("MRE_LOG_MCP") == "1" else logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    quiet_logs(os.environ)
    try:
        cfg = parse_args(argv, os.environ)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        start(cfg, block=True)
    except KeyboardInterrupt:
        return 0
    except (ConfigError, KeyConfigError, BackendError, SemanticUnavailable) as exc:  # --data refused (nothing created), an unusable key or database: why
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a start-up failure is one line, not a traceback
        # A fixed sentence: the message of an exception raised while opening the data directory (the index
        # catching up, an erasure finished at start) could quote a ledger line, a memory's words, and its class
        # is an internal name (issue 18). The log line above it has the class and where it was raised.
        log.error("the app could not start (%s at %s)", type(exc).__name__, raised_at(exc))
        print(f"error: {START_FAILED}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
