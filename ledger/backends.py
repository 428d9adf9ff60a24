"""Open a store from a URL: ``sqlite:///path``, a bare path, or ``postgresql://...``.

Settings a hub may expose (defaults in parentheses):

- ``pool_size``: connections a store keeps at most (SQLite 8, PostgreSQL 10);
- ``statement_timeout``: seconds a PostgreSQL operation may take before it fails with
  BackendError, on the server and, if the server stalls, on the client (5);
- ``connect_timeout``: seconds to open a PostgreSQL connection (5; libpq rounds up to >= 2).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .clock import Clock
from .errors import Invalid, NotFound
from .machine import Rules

if TYPE_CHECKING:  # the SQL layer loads with the first store opened, not with the ledger
    from .sql import SQLStore

DEFAULT_URL = "sqlite:///skyhub.db"


def open_store(
    url: str | None, rules: Rules | None, clock: Clock, *,
    pool_size: int | None = None, statement_timeout: float | None = None, connect_timeout: float | None = None,
    create: bool = True,
) -> SQLStore:
    """Open the store a database URL names (``sqlite:///PATH``, a bare path, or ``postgresql://...``), with
    ``rules`` (None: none), timing its revisions and leases on ``clock`` (the composition root's).
    ``create=False`` (a command that only reads) refuses a SQLite file that does not exist yet
    instead of making an empty one."""
    url = url or DEFAULT_URL
    if url.startswith(("postgresql://", "postgres://")):
        from . import postgres

        return postgres.PostgresStore(
            url, rules, clock,
            pool_size=pool_size or postgres.POOL_SIZE,
            statement_timeout=statement_timeout or postgres.STATEMENT_TIMEOUT,
            connect_timeout=connect_timeout or postgres.CONNECT_TIMEOUT,
        )
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///"):]
    elif "://" in url:
        raise Invalid(f"unknown database URL scheme in {url.split('://')[0]!r}: use sqlite:///PATH or postgresql://...")
    elif "=" in url and " " in url.strip():
        raise Invalid("that looks like a PostgreSQL conninfo string: write it as a URL, postgresql://USER@HOST:PORT/DB")
    else:
        path = url
    from . import sqlite

    if not create and path != ":memory:" and not os.path.exists(path):
        raise NotFound(f"no database at {path}: nothing has been written there yet (start the hub with `skyhub run`, "
                       "write with `skyhub db put`, or point --database-url / SKYHUB_DATABASE_URL at an existing one)")
    return sqlite.open_sqlite(path, rules, clock, pool_size=pool_size or sqlite.POOL_SIZE)
