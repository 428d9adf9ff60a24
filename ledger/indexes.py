"""Field indexes: which (db, field) pairs have an index, as this process sees them, and
which statement answers a query on each.

Indexes are declared, never a side effect of a read: by the code (``Rules.index``,
``Machine(indexes=...)``, a product's ``indexes``), made when a store opens, or by an admin at
run time (``add_index``). Either way they are listed in the ``doc_indexes`` table, so that
every process and every restart sees them; ``status`` has one index for every database. A
query on any other field is a bounded scan (see ``SQLStore.query``).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from .document import Doc
from .errors import Invalid
from .schema import STATUS_INDEX, Dialect, Queries, create_index_sql, index_name, indexed_query, scan_query, status_query
from .store import Index

log = logging.getLogger(__name__)

MAX_INDEXED_BYTES = 1000  # JSON bytes of an indexed field's value (PostgreSQL's B-tree takes ~2.7 kB a row)
CACHE_S = 5.0  # how long a process trusts its list (another process may add or drop an index)
BUILTIN = Index("*", "status", STATUS_INDEX, "builtin")


class IndexCatalog:
    """This process's copy of the list of field indexes, and the page statements they answer."""

    def __init__(self, dialect: Dialect, q: Queries) -> None:
        self.dialect = dialect
        self.q = q
        self._pairs: dict[tuple[str, str], Index] = {}
        self._fields: dict[str, tuple[str, ...]] = {}
        self._read_at = 0.0
        self._status_sql = status_query(dialect)
        self._page_sql: dict[tuple[str, str], str] = {}
        self._scan_sql: dict[str, str] = {}

    def read(self, cur: Any) -> None:
        """Read the list again (``cur``: a cursor on the store's database)."""
        cur.execute(self.q.indexes, {})
        pairs = {(r[0], r[1]): Index(r[0], r[1], r[2], r[3], int(r[4])) for r in cur.fetchall()}
        fields: dict[str, list[str]] = {}
        for db, field in pairs:
            fields.setdefault(db, []).append(field)
        self._pairs, self._read_at = pairs, time.monotonic()
        self._fields = {db: ("status", *names) for db, names in fields.items()}

    def forget(self) -> None:
        """Read the list again before the next query that needs it."""
        self._read_at = 0.0

    @property
    def stale(self) -> bool:
        """Whether another process may have changed the indexes since they were read."""
        return time.monotonic() - self._read_at > CACHE_S

    def has(self, db: str, field: str) -> bool:
        """Whether queries on ``db``'s ``field`` are answered by an index."""
        return field == "status" or (db, field) in self._pairs

    def page_sql(self, db: str, field: str) -> str:
        """The statement that pages through ``db`` by ``field`` with its index."""
        if field == "status":
            return self._status_sql
        sql = self._page_sql.get((db, field))
        if sql is None:
            sql = self._page_sql[(db, field)] = indexed_query(self.dialect, db, field)
        return sql

    def scan_sql(self, field: str) -> str:
        """The bounded scan's statement for ``field`` (a field without an index)."""
        sql = self._scan_sql.get(field)
        if sql is None:
            sql = self._scan_sql[field] = scan_query(self.dialect, field)
        return sql

    def listing(self, declared: set[tuple[str, str]]) -> list[Index]:
        """Every index, the built-in status index first, marking those the code declares."""
        out = [BUILTIN]
        for (db, field), entry in sorted(self._pairs.items()):
            origin = "declared" if (db, field) in declared else entry.origin
            out.append(Index(db, field, entry.name, origin, entry.created_at))
        return out

    def create(self, cur: Any, db: str, field: str, origin: str, now_ms: int) -> None:
        """Make the index of (db, field) and list it, in the caller's schema transaction."""
        cur.execute(create_index_sql(self.dialect, db, field), {})
        cur.execute(self.q.index_add, {"db": db, "field": field, "name": index_name(db, field), "origin": origin, "now": now_ms})
        log.info("index on %s.%s made (%s)", db, field, origin, extra={"db": db, "field": field})

    def check_values(self, db: str, body: Doc) -> None:
        """Refuse a value too long for the index of its field, on every backend alike."""
        for name in self._fields.get(db, ("status",)):
            value = body.get(name)
            if value is None or isinstance(value, (bool, int, float)) or (isinstance(value, str) and len(value) <= 250):
                continue
            size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
            if size > MAX_INDEXED_BYTES:
                raise Invalid(
                    f"field {name!r} is indexed in {db!r}: its value must be at most {MAX_INDEXED_BYTES:,} bytes of JSON, "
                    f"not {size:,}"
                )
