"""`mre search`: the search index (`python -m retrieval search|rebuild`)."""

from __future__ import annotations

from typing import Any

import click

from cli.calls import run_search
from cli.options import OrderedGroup, data_dir_argument, json_option, k_option, session_argument


@click.group(cls=OrderedGroup)
def search() -> None:
    """Search one session's memories; rebuild the search index."""


@search.command(short_help="Search one session: QUERY, or --queries FILE.")
@data_dir_argument
@session_argument
@click.argument("query", metavar="[QUERY]", required=False)
@click.option("--queries", metavar="FILE", help="one query per line; prints one JSON line per query")
@k_option("results per query, 1-50")
@json_option("print one JSON object instead of a table")
@click.option("--include-revoked", is_flag=True, help="also show memories the visitor revoked, each labelled with the control event that revoked it")
@click.option("--history", is_flag=True, help="also show statements a newer one superseded, each labelled with the seq that replaced it")
@click.option("--explain", is_flag=True, help="per hit: the matched terms and their weights, the raw BM25 and collapse figures, the rules that fired")
@click.option("--semantic", is_flag=True, help="hybrid search with the optional semantic extra (requirements-semantic.txt): lexical and dense, fused")
@click.option("--as-of", metavar="SIZE|CHECKPOINT", help="search the memory as it stood when the ledger held SIZE events (or at a kept checkpoint), with a turn's rules")
def query(**params: Any) -> int:
    """Search one session (`python -m retrieval search`): QUERY, or --queries FILE."""
    return run_search("cmd_search", "search", params)


@search.command()
@data_dir_argument
@click.option("--semantic", is_flag=True, help="then embed every event with the optional semantic extra (requirements-semantic.txt)")
def rebuild(**params: Any) -> int:
    """Rebuild DATA_DIR/index.sqlite from the ledgers."""
    return run_search("cmd_rebuild", "rebuild", params)
