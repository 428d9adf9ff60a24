"""The schema and statements are declared once and compiled once per dialect."""

from __future__ import annotations

import re
from dataclasses import fields

from ledger.postgres import PostgresStore
from ledger.schema import MIGRATIONS, POSTGRES, SQLITE, Queries, index_name, migration_statements
from ledger.sqlite import SQLiteStore


def test_every_statement_is_in_the_drivers_own_parameter_style():
    for f in fields(Queries):
        lite, pg = getattr(SQLiteStore.q, f.name), getattr(PostgresStore.q, f.name)
        assert "%(" not in lite and "{" not in lite, f.name
        assert not re.search(r"(?<![:\w]):[a-z]", pg) and "{" not in pg, f.name
        extra = {"channel"} if f.name == "append_change" else set()  # PostgreSQL also notifies other processes
        assert set(re.findall(r"(?<![:\w]):(\w+)", lite)) | extra == set(re.findall(r"%\((\w+)\)s", pg)), f.name


def test_dialect_differences_are_named_in_the_schema():
    lite = [s for m in MIGRATIONS for s in migration_statements(m, SQLITE)]
    pg = [s for m in MIGRATIONS for s in migration_statements(m, POSTGRES)]
    assert len(lite) == len(pg)
    assert "WITHOUT ROWID" in lite[0] and "JSONB" in pg[0] and "WITHOUT ROWID" not in pg[0]
    assert "seq INTEGER PRIMARY KEY" in lite[1] and "seq BIGSERIAL PRIMARY KEY" in pg[1]
    assert any("json_extract(body, '$.status')" in s for s in lite)
    assert any("(body -> 'status')" in s for s in pg)
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))


def test_index_names_are_short_distinct_and_quotable():
    long_db, long_field = "d" * 64, "F" * 64
    names = {index_name(db, f) for db in ("a", "a-b", "a_b", long_db) for f in ("A", "a", long_field, long_field.lower())}
    assert len(names) == 16
    assert all(len(n) <= 63 and re.fullmatch(r"[a-z0-9_]+", n) for n in names)
