"""What the command lines share to open their stores on either backend (`python -m retrieval`, `receipts`, `chat`).

Light at import (no psycopg): a command on files pays nothing for PostgreSQL. `database_for` says which backend a
command uses — $DATABASE_URL when set (a DATA argument that is itself a postgresql:// URL too, where a command
allows it) — and `opened_stores` opens the stores, turning a server that cannot be reached, or a URL that is not a
PostgreSQL one, into one CliError line that names the server without its password (exit 2), never a traceback.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from cli.support import CliError
from storage import BackendError, database_url, is_database_url

if TYPE_CHECKING:
    from storage.stores import Stores



def database_for(raw: str | None = None, *, url_argument: bool = False) -> str | None:
    """The database a command uses: `raw` when `url_argument` and it is a postgresql:// URL, else $DATABASE_URL,
    else None (the files). CliError when $DATABASE_URL is set to something that is not a PostgreSQL URL."""
    if url_argument and raw is not None and is_database_url(raw):
        return raw
    try:
        return database_url()
    except BackendError as exc:
        raise CliError(str(exc)) from None


def quiet_pool() -> None:
    """The pool logs every failed connection attempt; a command line's one error line says what failed instead."""
    import logging  # here: the file path of a command never pays for it
    logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)
    logging.getLogger("psycopg").addHandler(logging.NullHandler())


@contextmanager
def opened_stores(data_dir: str | os.PathLike[str], url: str) -> Iterator[Stores]:
    """The PostgreSQL stores at `url` (DATA_DIR keeps the key and receipt copies), closed after.

    A BackendError while opening or using them (no server, a lost connection) becomes a CliError."""
    from cli.prog_ledger_pg import CONNECT_TIMEOUT_S
    from storage.stores import pg_stores

    quiet_pool()
    try:
        stores = pg_stores(url, data_dir, timeout=CONNECT_TIMEOUT_S)
    except BackendError as exc:
        raise CliError(str(exc)) from None
    try:
        yield stores
    except BackendError as exc:
        raise CliError(str(exc)) from None
    finally:
        stores.close()


@contextmanager
def data_stores(data: str) -> Iterator[Stores]:
    """The stores of DATA_DIR: PostgreSQL's when $DATABASE_URL is set (DATA_DIR keeps the key), else its files."""
    url = database_for()
    if url is not None:
        with opened_stores(data, url) as stores:
            yield stores
        return
    from storage.stores import open_stores

    stores = open_stores(data)
    try:
        yield stores
    finally:
        stores.close()


__all__ = ["data_stores", "database_for", "opened_stores", "quiet_pool"]
