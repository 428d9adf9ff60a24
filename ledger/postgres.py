"""PostgreSQL backend: the scale-out store. Several processes on several machines share it.

Commit order: every write takes one transaction-scoped advisory lock just before it appends
to the change log and holds it to commit, so sequence numbers are handed out in commit order
and a feed reader can never skip past a change that commits late. The lock is held only for
the append and the commit. LISTEN/NOTIFY wakes the feeds of other processes.

Fail fast, give back what you take: connections come from a bounded pool and return to it
after each operation. Each has TCP keepalives, a connect timeout and a statement timeout;
an operation that outlives its budget (a database that stalls with its sockets open, where
no server-side timeout can fire) has its connection cut by a watchdog, fails with
BackendError, and the pool replaces the connection.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import socket
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import psycopg.errors
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from .clock import SYSTEM, Clock
from .errors import BackendError, Invalid, LedgerError
from .machine import Rules
from .schema import POSTGRES, POSTGRES_TEXTS, compile_queries
from .sql import SQLStore, redact_url

log = logging.getLogger(__name__)

CHANNEL = "skyhub_changes"
APPEND_LOCK = 0x5C4B_0001
MIGRATE_LOCK = 0x5C4B_0002

POOL_SIZE = 10  # connections per store at most; one is kept open, the others close after MAX_IDLE_S
MAX_IDLE_S = 10.0  # a burst's extra connections are given back this long after it ends
STATEMENT_TIMEOUT = 5.0  # seconds an operation may take, on the server and on the client
CONNECT_TIMEOUT = 5.0
RECONNECT_S = 10.0
LISTEN_CHECK_S = 5.0  # the LISTEN connection, idle, asks for a row this often to notice a stall
_LOCK = POSTGRES.compile("SELECT pg_advisory_xact_lock(:lock)")


class PostgresStore(SQLStore):
    """The shared store: PostgreSQL through psycopg 3 and a bounded connection pool."""

    dialect = POSTGRES
    q = compile_queries(POSTGRES, POSTGRES_TEXTS)

    def __init__(
        self, url: str, rules: Rules | None = None, clock: Clock = SYSTEM, *,
        pool_size: int = POOL_SIZE, statement_timeout: float = STATEMENT_TIMEOUT, connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        super().__init__(url, rules, clock)
        if pool_size < 1 or statement_timeout <= 0 or connect_timeout <= 0:
            raise LedgerError("pool_size, statement_timeout and connect_timeout must be positive")
        self.statement_timeout = statement_timeout
        self.listen_check = LISTEN_CHECK_S
        self._kwargs = connection_options(url, connect_timeout)
        self._closed = threading.Event()
        self._pids: weakref.WeakValueDictionary[int, psycopg.Connection[Any]] = weakref.WeakValueDictionary()
        self._last_error: tuple[float, str] | None = None
        self._watchdog = _Watchdog()
        self._listener: threading.Thread | None = None
        try:  # first contact on a connection of its own, so that a failure says why
            psycopg.connect(url, **self._kwargs).close()
        except psycopg.Error as exc:
            self._watchdog.stop()
            raise BackendError(f"cannot connect to PostgreSQL at {redact_url(url)}: {_first_line(exc)}") from exc
        self._pool: ConnectionPool[Any] = ConnectionPool(
            url, kwargs=self._kwargs, min_size=1, max_size=pool_size, open=False, configure=self._configure,
            connection_class=_connection_class(self._connect_failed), timeout=statement_timeout,
            max_idle=MAX_IDLE_S, num_workers=2, name=f"skyhub-{id(self):x}",
            # the pool retries a failed connect after 1, 2, 4, ... s: give up on a retry after
            # RECONNECT_S and let demand start a fresh one, so a database that comes back is
            # used within seconds, not after a minute-long backoff
            reconnect_timeout=RECONNECT_S,
        )
        self._pool.open(wait=False)
        try:
            self._open_schema()
        except BaseException:
            self.close()
            raise

    # ---- connections ---------------------------------------------------------------
    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        """Each new pooled connection: the server-side time limits, and its pid (whose
        NOTIFYs this process has already acted on)."""
        op = self._watchdog.watch(conn, self.statement_timeout)
        try:
            ms = str(int(self.statement_timeout * 1000))
            conn.execute(
                "SELECT set_config('statement_timeout', %s, false), set_config('idle_in_transaction_session_timeout', %s, false)",
                (ms, str(int(self.statement_timeout * 2000))),
            )
        finally:
            self._watchdog.release(op)
        self._pids[conn.info.backend_pid] = conn
        self._last_error = None

    def _connect_failed(self, reason: str) -> None:
        self._last_error = (time.monotonic(), reason)

    def _borrow(self, budget: float) -> psycopg.Connection[Any]:
        try:
            conn: psycopg.Connection[Any] = self._pool.getconn(timeout=budget)
            return conn
        except PoolTimeout as exc:
            why = ""
            if self._last_error and time.monotonic() - self._last_error[0] < 60:
                why = f"; the last attempt to connect failed: {self._last_error[1]}"
            stats = self._pool.get_stats()
            raise BackendError(
                f"PostgreSQL gave no connection within {budget:.3g} s ({stats.get('pool_size', 0)} open, "
                f"{stats.get('pool_available', 0)} free, at most {self._pool.max_size}){why}"
            ) from exc
        except PoolClosed as exc:
            raise BackendError("the store is closed") from exc

    @contextmanager
    def _op(self, budget: float | None = None) -> Iterator[Any]:
        budget = budget if budget is not None else self.statement_timeout
        deadline = time.monotonic() + budget
        conn = self._borrow(budget)
        op = self._watchdog.watch(conn, budget, deadline)
        try:
            yield _Cursor(conn.cursor(), op, self)
        finally:
            self._watchdog.release(op)
            self._pool.putconn(conn)

    def _op_within(self, timeout: float) -> Any:
        return self._op(timeout)

    @contextmanager
    def _tx(self, bookkeeping: bool = False) -> Iterator[Any]:
        with self._op() as cur:
            try:
                with cur.connection.transaction():
                    if bookkeeping:
                        # Feed and tick bookkeeping may be lost in a crash without harm: a lost
                        # lease or cursor move only means a redelivery (at-least-once).
                        cur.execute("SET LOCAL synchronous_commit = off")
                    yield cur
            except psycopg.Error as exc:
                raise self._translate(exc, cur.op) from exc

    @contextmanager
    def _schema_tx(self) -> Iterator[Any]:
        """One process at a time (an advisory lock), and no time limit: an index is built
        while it takes. (CREATE INDEX blocks writes to docs meanwhile.)"""
        conn = self._borrow(self.statement_timeout)
        op = _Op(conn, math.inf)
        try:
            with conn.transaction():
                cur = _Cursor(conn.cursor(), op, self)
                cur.execute("SET LOCAL statement_timeout = 0")
                cur.execute(_LOCK, {"lock": MIGRATE_LOCK})
                yield cur
        except psycopg.Error as exc:
            raise self._translate(exc, op) from exc
        finally:
            self._pool.putconn(conn)

    def _append_change(self, cur: Any, args: dict[str, Any]) -> int:
        cur.execute(_LOCK, {"lock": APPEND_LOCK})
        args["channel"] = CHANNEL
        cur.execute(self.q.append_change, args)
        return int(cur.fetchone()[0])

    def _translate(self, exc: psycopg.Error, op: _Op) -> LedgerError:
        reason = _first_line(exc)
        if op.cut:
            return BackendError(f"PostgreSQL did not answer within {op.budget:.3g} s (stalled or unreachable); the connection was dropped")
        if isinstance(exc, psycopg.errors.QueryCanceled):
            return BackendError(f"PostgreSQL stopped a statement at the {self.statement_timeout:g} s statement timeout: {reason}")
        if isinstance(exc, (psycopg.errors.ProgramLimitExceeded, psycopg.DataError)):
            return Invalid(f"PostgreSQL cannot store this: {reason}")
        if isinstance(exc, psycopg.OperationalError):
            return BackendError(f"PostgreSQL connection failed: {reason}")
        return BackendError(f"PostgreSQL failed: {reason}")

    # ---- wake-ups from other processes ---------------------------------------------
    def _start_wakeups(self) -> None:
        if self._listener is None:
            self._listener = threading.Thread(target=self._listen, name="pg-listen", daemon=True)
            self._listener.start()

    def _listen(self) -> None:
        backoff = 0.1
        while not self._closed.is_set():
            conn: psycopg.Connection[Any] | None = None
            try:
                conn = psycopg.connect(self.url, **self._kwargs)
                conn.execute(f"LISTEN {CHANNEL}")
                backoff = 0.1
                self._wake(None)  # anything committed while we were not listening
                checked = time.monotonic()
                while not self._closed.is_set():
                    # wake at once for each commit by another process (the generator would
                    # otherwise hold them until its timeout ends)
                    for note in conn.notifies(timeout=0.5):
                        if note.pid not in self._pids:
                            self._wake(None)
                    if time.monotonic() - checked > self.listen_check:
                        op = self._watchdog.watch(conn, self.statement_timeout)
                        try:
                            conn.execute("SELECT 1")
                        finally:
                            self._watchdog.release(op)
                        checked = time.monotonic()
            except psycopg.Error as exc:
                if self._closed.is_set():
                    return
                log.warning("postgres: LISTEN connection lost (%s); reconnecting", _first_line(exc))
                self._closed.wait(backoff)
                backoff = min(backoff * 2, 5.0)
            finally:
                if conn is not None:
                    conn.close()

    def close(self) -> None:
        self._closed.set()
        self._pool.close(timeout=5)
        self._watchdog.stop()
        if self._listener is not None:
            self._listener.join(timeout=3)


def connection_options(url: str, connect_timeout: float) -> dict[str, Any]:
    """What every connection gets, unless the URL says otherwise: a connect timeout, TCP
    keepalives (a dead peer is noticed in about a minute, idle or not) and a name."""
    given = conninfo_to_dict(url)
    options: dict[str, Any] = {"autocommit": True, "connect_timeout": max(2, math.ceil(connect_timeout))}
    defaults = {
        "keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3,
        "tcp_user_timeout": 60_000, "application_name": "skyhub",
    }
    options.update({k: v for k, v in defaults.items() if k not in given})
    return options


def _connection_class(on_failure: Any) -> type[psycopg.Connection[Any]]:
    """A connection class that reports why a pool's attempt to connect failed (the pool
    itself only says that no connection came)."""

    class Connection(psycopg.Connection[Any]):
        @classmethod
        def connect(cls, conninfo: str = "", **kwargs: Any) -> Any:
            try:
                return super().connect(conninfo, **kwargs)
            except psycopg.Error as exc:
                on_failure(_first_line(exc))
                raise

    return Connection


class _Op:
    """One operation on one connection, with the time it may take."""

    __slots__ = ("conn", "budget", "deadline", "cut")

    def __init__(self, conn: psycopg.Connection[Any], budget: float, deadline: float | None = None) -> None:
        self.conn = conn
        self.budget = budget
        self.deadline = deadline if deadline is not None else time.monotonic() + budget
        self.cut = False


class _Watchdog:
    """Cuts the connection of an operation that outlives its budget.

    A statement timeout is enforced by the server; when the server (or the network to it)
    stalls with the socket open, nothing answers and a read would wait for TCP to give up
    (about 15 minutes). The watchdog shuts the socket down instead: the waiting call fails at
    once, and the pool discards the broken connection."""

    TICK = 0.05

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ops: dict[int, _Op] = {}
        self._ids = itertools.count()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pg-watchdog", daemon=True)
        self._thread.start()

    def watch(self, conn: psycopg.Connection[Any], budget: float, deadline: float | None = None) -> _Op:
        op = _Op(conn, budget, deadline)
        with self._lock:
            self._ops[id(op)] = op
        return op

    def release(self, op: _Op) -> None:
        with self._lock:
            self._ops.pop(id(op), None)

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.TICK):
            now = time.monotonic()
            with self._lock:  # a released operation's connection may be lent again: cut under the lock
                for key, op in list(self._ops.items()):
                    if op.deadline <= now:
                        del self._ops[key]
                        op.cut = True
                        _shutdown(op.conn)


def _shutdown(conn: psycopg.Connection[Any]) -> None:
    try:
        fd = conn.pgconn.socket
        sock = socket.socket(fileno=os.dup(fd))
    except (psycopg.Error, OSError):
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        sock.close()
    log.warning("postgres: an operation outlived its budget; its connection was cut")


class _Cursor:
    """Translates psycopg errors into ledger errors at the one seam that calls psycopg."""

    __slots__ = ("_cur", "op", "_store")

    def __init__(self, cur: Any, op: _Op, store: PostgresStore) -> None:
        self._cur = cur
        self.op = op
        self._store = store

    def execute(self, sql: str, args: Any = None) -> _Cursor:
        try:
            self._cur.execute(sql, args, prepare=True)
        except psycopg.Error as exc:
            raise self._store._translate(exc, self.op) from exc
        return self

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cur.fetchall()  # type: ignore[no-any-return]

    @property
    def rowcount(self) -> int:
        return int(self._cur.rowcount)

    @property
    def connection(self) -> psycopg.Connection[Any]:
        return self._cur.connection  # type: ignore[no-any-return]


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
