"""A PostgreSQL schema per test: ``with schema() as url:`` gives a database URL whose
``search_path`` is a new, empty schema, dropped afterwards. The server is the one
``SKYHUB_TEST_PG_URL`` names (``./dev test`` starts it); an unreachable server is an error."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

PG_URL = os.environ.get("SKYHUB_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def pg_schema_url(schema: str) -> str:
    """``PG_URL`` with its ``search_path`` set to ``schema``."""
    sep = "&" if "?" in PG_URL else "?"
    return f"{PG_URL}{sep}options=-csearch_path%3D{schema}"


@contextmanager
def schema(prefix: str = "t") -> Iterator[str]:
    """A new schema's database URL, for the ``with`` block; the schema is dropped after it."""
    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    try:
        yield pg_schema_url(name)
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {name} CASCADE")


__all__ = ["PG_URL", "pg_schema_url", "schema"]
