"""PostgreSQL backend: the scale-out store. Several processes on several machines share it.

Commit order: every write takes one transaction-scoped advisory lock just before it appends
to the change log and holds it to commit, so sequence numbers are handed out in commit order
and a feed reader can never skip past a change that commits late. The lock is held only for
the append and the commit. LISTEN/NOTIFY wakes the feeds of other processes.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from .clock import SYSTEM, Clock
from .errors import BackendError
from .machine import Rules
from .sql import SQLStore, redact_url

log = logging.getLogger(__name__)

CHANNEL = "skyhub_changes"
APPEND_LOCK = 0x5C4B_0001
MIGRATE_LOCK = 0x5C4B_0002

MIGRATIONS: list[list[str]] = [
    [
        """CREATE TABLE docs (
            db TEXT NOT NULL, id TEXT NOT NULL, rev TEXT NOT NULL, body JSONB NOT NULL,
            deleted SMALLINT NOT NULL DEFAULT 0, PRIMARY KEY (db, id))""",
        """CREATE TABLE changes (
            seq BIGSERIAL PRIMARY KEY, db TEXT NOT NULL, id TEXT NOT NULL, rev TEXT NOT NULL,
            body TEXT NOT NULL, deleted SMALLINT NOT NULL, actor TEXT NOT NULL, at BIGINT NOT NULL)""",
        "CREATE INDEX changes_by_doc ON changes (db, id, seq)",
        "CREATE TABLE feed_cursors (handler TEXT PRIMARY KEY, done BIGINT NOT NULL, claimed BIGINT NOT NULL)",
        """CREATE TABLE feed_leases (
            handler TEXT NOT NULL, after BIGINT NOT NULL, upto BIGINT NOT NULL, owner TEXT NOT NULL,
            lease_until BIGINT NOT NULL, tries INTEGER NOT NULL, pos BIGINT NOT NULL,
            PRIMARY KEY (handler, after))""",
        """CREATE TABLE tick_runs (
            tick TEXT NOT NULL, scheduled_at BIGINT NOT NULL, owner TEXT NOT NULL,
            started_at BIGINT NOT NULL, finished_at BIGINT, outcome TEXT, error TEXT,
            PRIMARY KEY (tick, scheduled_at))""",
    ],
    [  # 2: keys that may be used once (request nonces)
        "CREATE TABLE once_keys (key TEXT PRIMARY KEY, expires_at BIGINT NOT NULL)",
        "CREATE INDEX once_keys_by_expiry ON once_keys (expires_at)",
    ],
    [  # 3: the feed reads a handler's databases in seq order (without this it sorts them all)
        "CREATE INDEX IF NOT EXISTS changes_by_db ON changes (db, seq)",
    ],
]
DEFAULT_INDEXES = ("status",)  # others are made on first query of their field


class PostgresStore(SQLStore):
    param = "%s"

    def __init__(self, url: str, rules: Rules | None = None, clock: Clock = SYSTEM) -> None:
        super().__init__(url, rules, clock)
        self._local = threading.local()
        self._conns: list[psycopg.Connection[Any]] = []
        self._pids: set[int] = set()
        self._conns_lock = threading.Lock()
        self._closed = threading.Event()
        self._listener: threading.Thread | None = None
        self._migrate()

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise BackendError(f"cannot connect to PostgreSQL at {redact_url(self.url)}: {_first_line(exc)}") from None
        with self._conns_lock:
            self._conns.append(conn)
            self._pids.add(conn.info.backend_pid)
        return conn

    def _conn(self) -> psycopg.Connection[Any]:
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            if self._closed.is_set():
                raise BackendError("the store is closed")
            conn = self._local.conn = self._connect()
        return conn

    def _cursor(self) -> Any:
        return _Cursor(self._conn().cursor(), self._local)

    @contextmanager
    def _tx(self, bookkeeping: bool = False) -> Iterator[Any]:
        conn = self._conn()
        try:
            with conn.transaction():
                cur = _Cursor(conn.cursor(), self._local)
                if bookkeeping:
                    # Feed and tick bookkeeping may be lost in a crash without harm: a lost
                    # lease or cursor move only means a redelivery (at-least-once).
                    cur.execute("SET LOCAL synchronous_commit = off")
                yield cur
        except psycopg.Error as exc:
            raise _translate(exc, self._local) from None

    def _lock_head(self) -> str:
        return " FOR UPDATE"

    def _migrate(self) -> None:
        with self._tx() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
            cur.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            cur.execute("SELECT MAX(version) FROM schema_version")
            current = cur.fetchone()[0] or 0
            for version, statements in enumerate(MIGRATIONS, start=1):
                if version > current:
                    for statement in statements:
                        cur.execute(statement)
                    cur.execute("INSERT INTO schema_version (version) VALUES (%s)", (version,))
                    log.info("postgres: migrated", extra={"version": version})
            for field in DEFAULT_INDEXES:
                cur.execute(self._index_sql(field))
                self._indexed.add(field)

    def _index_sql(self, field: str) -> str:
        return (
            f"CREATE INDEX IF NOT EXISTS docs_by_{field.lower()} "
            f"ON docs (db, (body -> '{field}'), id) WHERE deleted = 0"
        )

    def _ensure_index(self, field: str) -> None:
        with self._tx() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
            cur.execute(self._index_sql(field))

    def _field_match(self, field: str) -> str:
        return f"(body -> '{field}') = ?::jsonb"

    def _field_param(self, key: Any) -> Any:
        return json.dumps(key)

    def _append_change(self, cur: Any, db: str, id: str, rev: str, text: str, deleted: bool, actor: str, at: int) -> int:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (APPEND_LOCK,))
        cur.execute(
            "WITH c AS (INSERT INTO changes (db, id, rev, body, deleted, actor, at) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING seq) "
            "SELECT seq, pg_notify(%s, seq::text) FROM c",
            (db, id, rev, text, int(deleted), actor, at, CHANNEL),
        )
        return int(cur.fetchone()[0])

    # ---- wake-ups from other processes ---------------------------------------------
    def _start_wakeups(self) -> None:
        if self._listener is None:
            self._listener = threading.Thread(target=self._listen, name="pg-listen", daemon=True)
            self._listener.start()

    def _listen(self) -> None:
        backoff = 0.1
        while not self._closed.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    backoff = 0.1
                    self._wake(None)  # anything committed while we were not listening
                    while not self._closed.is_set():
                        # wake at once for each commit by another process (the generator would
                        # otherwise hold them until its timeout ends)
                        for note in conn.notifies(timeout=0.5):
                            if note.pid not in self._pids:
                                self._wake(None)
            except psycopg.Error as exc:
                if self._closed.is_set():
                    return
                log.warning("postgres: LISTEN connection lost (%s); reconnecting", _first_line(exc))
                self._closed.wait(backoff)
                backoff = min(backoff * 2, 5.0)

    def close(self) -> None:
        self._closed.set()
        with self._conns_lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            try:
                conn.close()
            except psycopg.Error:
                pass
        if self._listener is not None:
            self._listener.join(timeout=3)


class _Cursor:
    """Translates psycopg errors into BackendError at the one seam that calls psycopg."""

    __slots__ = ("_cur", "_local")

    def __init__(self, cur: Any, local: threading.local) -> None:
        self._cur = cur
        self._local = local

    def execute(self, sql: str, args: Any = ()) -> _Cursor:
        try:
            self._cur.execute(sql, args, prepare=True)
        except psycopg.Error as exc:
            raise _translate(exc, self._local) from None
        return self

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cur.fetchall()

    @property
    def rowcount(self) -> int:
        return int(self._cur.rowcount)


def _translate(exc: psycopg.Error, local: threading.local) -> BackendError:
    if isinstance(exc, psycopg.OperationalError):
        local.conn = None  # reconnect on next use
        return BackendError(f"PostgreSQL connection failed: {_first_line(exc)}")
    return BackendError(f"PostgreSQL failed: {_first_line(exc)}")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
