"""Open a store from a URL: ``sqlite:///path``, a bare path, or ``postgresql://...``."""

from __future__ import annotations

from .clock import SYSTEM, Clock
from .errors import Invalid
from .machine import Rules
from .sql import SQLStore

DEFAULT_URL = "sqlite:///skyhub.db"


def open_store(url: str | None = None, rules: Rules | None = None, clock: Clock = SYSTEM, **options: object) -> SQLStore:
    url = url or DEFAULT_URL
    if url.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore

        return PostgresStore(url, rules, clock, **options)  # type: ignore[arg-type]
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///"):]
    elif "://" in url:
        raise Invalid(f"unknown database URL scheme in {url.split('://')[0]!r}: use sqlite:///PATH or postgresql://...")
    elif "=" in url and " " in url.strip():
        raise Invalid("that looks like a PostgreSQL conninfo string: write it as a URL, postgresql://USER@HOST:PORT/DB")
    else:
        path = url
    from .sqlite import open_sqlite

    return open_sqlite(path, rules, clock)
