"""SQLite backend: the embedded default. One file, WAL mode, no server to start.

Writes are serialized by SQLite itself (``BEGIN IMMEDIATE``), so the change log's sequence
numbers are in commit order. Writers in this process wake the feed directly; commits by other
processes are noticed through ``PRAGMA data_version``.
"""

from __future__ import annotations

import logging
import os
import random
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .clock import SYSTEM, Clock
from .errors import BackendError, LedgerError
from .machine import Rules
from .sql import SQLStore

log = logging.getLogger(__name__)

MIGRATIONS: list[list[str]] = [
    [
        """CREATE TABLE docs (
            db TEXT NOT NULL, id TEXT NOT NULL, rev TEXT NOT NULL, body TEXT NOT NULL,
            deleted INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (db, id)) WITHOUT ROWID""",
        """CREATE TABLE changes (
            seq INTEGER PRIMARY KEY, db TEXT NOT NULL, id TEXT NOT NULL,
            rev TEXT NOT NULL, body TEXT NOT NULL, deleted INTEGER NOT NULL,
            actor TEXT NOT NULL, at INTEGER NOT NULL)""",
        "CREATE INDEX changes_by_doc ON changes (db, id, seq)",
        "CREATE TABLE feed_cursors (handler TEXT PRIMARY KEY, done INTEGER NOT NULL, claimed INTEGER NOT NULL)",
        """CREATE TABLE feed_leases (
            handler TEXT NOT NULL, after INTEGER NOT NULL, upto INTEGER NOT NULL,
            owner TEXT NOT NULL, lease_until INTEGER NOT NULL, tries INTEGER NOT NULL,
            pos INTEGER NOT NULL, PRIMARY KEY (handler, after))""",
        """CREATE TABLE tick_runs (
            tick TEXT NOT NULL, scheduled_at INTEGER NOT NULL, owner TEXT NOT NULL,
            started_at INTEGER NOT NULL, finished_at INTEGER, outcome TEXT, error TEXT,
            PRIMARY KEY (tick, scheduled_at))""",
    ],
    [  # 2: keys that may be used once (request nonces)
        "CREATE TABLE once_keys (key TEXT PRIMARY KEY, expires_at INTEGER NOT NULL)",
        "CREATE INDEX once_keys_by_expiry ON once_keys (expires_at)",
    ],
    [  # 3: the feed reads a handler's databases in seq order (without this it sorts them all)
        "CREATE INDEX IF NOT EXISTS changes_by_db ON changes (db, seq)",
    ],
]
DEFAULT_INDEXES = ("status",)  # others are made on first query of their field


class SQLiteStore(SQLStore):
    def __init__(self, path: str, rules: Rules | None = None, clock: Clock = SYSTEM, *, wake_interval: float = 0.01) -> None:
        super().__init__(f"sqlite:///{path}", rules, clock)
        self.path = path
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._closed = threading.Event()
        self._poller: threading.Thread | None = None
        self._wake_interval = wake_interval
        self._migrate()

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=0)
            conn.execute("PRAGMA busy_timeout = 0")  # we wait ourselves: see _retry_busy
            _retry_busy(lambda: conn.execute("PRAGMA journal_mode = WAL"))
            _retry_busy(lambda: conn.execute("PRAGMA synchronous = NORMAL"))
        except (sqlite3.Error, BackendError) as exc:
            raise BackendError(f"cannot open SQLite database {self.path!r}: {exc}") from None
        with self._conns_lock:
            self._conns.append(conn)
        return conn

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed.is_set():
                raise BackendError("the store is closed")
            conn = self._local.conn = self._connect()
        return conn

    def _cursor(self) -> sqlite3.Cursor:
        return _Cursor(self._conn().cursor())  # type: ignore[return-value]

    @contextmanager
    def _tx(self, bookkeeping: bool = False) -> Iterator[Any]:
        # Other writers (threads or processes) are waited for by _retry_busy: short retries
        # rather than SQLite's growing sleeps. (A Python lock for this process's threads was
        # measured slower: docs/benchmarks.md.)
        conn = self._conn()
        cur = _Cursor(conn.cursor())
        cur.execute("BEGIN IMMEDIATE")  # waits (briefly, repeatedly) while another process writes
        try:
            yield cur
        except BaseException:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise
        try:
            _retry_busy(lambda: conn.execute("COMMIT"))
        except BackendError as exc:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise BackendError(f"SQLite commit failed: {exc.reason}") from None

    def _migrate(self) -> None:
        with self._tx() as cur:
            cur.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            cur.execute("SELECT MAX(version) FROM schema_version")
            current = cur.fetchone()[0] or 0
            for version, statements in enumerate(MIGRATIONS, start=1):
                if version > current:
                    for statement in statements:
                        cur.execute(statement)
                    cur.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
                    log.info("sqlite: migrated", extra={"version": version, "path": self.path})
            for field in DEFAULT_INDEXES:
                cur.execute(self._index_sql(field))
                self._indexed.add(field)

    def _index_sql(self, field: str) -> str:
        return (
            f"CREATE INDEX IF NOT EXISTS docs_by_{field.lower()} "
            f"ON docs (db, json_extract(body, '$.{field}'), id) WHERE deleted = 0"
        )

    def _ensure_index(self, field: str) -> None:
        with self._tx() as cur:
            cur.execute(self._index_sql(field))

    def _field_match(self, field: str) -> str:
        return f"json_extract(body, '$.{field}') = ?"

    def _append_change(self, cur: Any, db: str, id: str, rev: str, text: str, deleted: bool, actor: str, at: int) -> int:
        cur.execute(
            "INSERT INTO changes (db, id, rev, body, deleted, actor, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (db, id, rev, text, int(deleted), actor, at),
        )
        return int(cur.lastrowid)

    # ---- wake-ups from other processes ---------------------------------------------
    def _start_wakeups(self) -> None:
        if self._poller is None:
            self._poller = threading.Thread(target=self._poll, name="sqlite-wakeups", daemon=True)
            self._poller.start()

    def _poll(self) -> None:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
        try:
            last = conn.execute("PRAGMA data_version").fetchone()[0]
            while not self._closed.wait(self._wake_interval):
                version = conn.execute("PRAGMA data_version").fetchone()[0]
                if version != last:
                    last = version
                    self._wake(None)
        except sqlite3.Error as exc:
            log.warning("sqlite: wake-up poller stopped: %s", exc)
        finally:
            conn.close()

    def close(self) -> None:
        self._closed.set()
        with self._conns_lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            try:
                conn.close()
            except sqlite3.Error:
                pass
        if self._poller is not None:
            self._poller.join(timeout=2)


BUSY_WAIT_S = 30.0


def _retry_busy(call: Any) -> Any:
    """Run ``call``; while the database is locked by another process, retry after short,
    jittered sleeps (0.1-2 ms) for up to BUSY_WAIT_S. SQLite's own busy handler sleeps in
    growing steps (1, 2, 5, ... 100 ms), and under a steady stream of writes from several
    processes a waiter keeps losing the race and sleeping longer; short retries keep the
    lock handed around. Other sqlite3 errors become BackendError here, once."""
    delay = 0.0001
    deadline = 0.0
    while True:
        try:
            return call()
        except sqlite3.IntegrityError as exc:
            raise BackendError(f"SQLite refused the write: {exc}") from None
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if "locked" not in text and "busy" not in text:
                raise BackendError(f"SQLite failed: {exc}") from None
            now = time.monotonic()
            if not deadline:
                deadline = now + BUSY_WAIT_S
            elif now > deadline:
                raise BackendError(f"SQLite stayed locked by another writer for {BUSY_WAIT_S:g} s") from None
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.002)
        except sqlite3.Error as exc:
            raise BackendError(f"SQLite failed: {exc}") from None


class _Cursor:
    """A cursor that turns sqlite3 errors into BackendError at the one seam that calls it."""

    __slots__ = ("_cur",)

    def __init__(self, cur: sqlite3.Cursor) -> None:
        self._cur = cur

    def execute(self, sql: str, args: Any = ()) -> _Cursor:
        _retry_busy(lambda: self._cur.execute(sql, args))
        return self

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cur.fetchall()

    @property
    def rowcount(self) -> int:
        return self._cur.rowcount

    @property
    def lastrowid(self) -> int | None:
        return self._cur.lastrowid


def open_sqlite(path: str, rules: Rules | None = None, clock: Clock = SYSTEM) -> SQLiteStore:
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise LedgerError(f"cannot create the database {path!r}: folder {directory!r} does not exist")
    return SQLiteStore(path, rules, clock)
