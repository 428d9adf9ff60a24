"""SQLite backend: the embedded default. One file, WAL mode, no server to start.

Writes are serialized by SQLite itself (``BEGIN IMMEDIATE``), so the change log's sequence
numbers are in commit order; the writers of one machine queue before it on a kernel lock
(``<db>.wlock``, ``ledger/writelock.py``), with a bounded wait. Writers in this process wake the feed directly; other processes
that listen are woken after each commit by a datagram on their socket in ``<db>.wake/``
(``ledger/wake.py``), with a ``PRAGMA data_version`` poll every second as a safety net. Where
those sockets cannot be used (or ``SKYHUB_SQLITE_WAKE=poll``), the poll runs every 10 ms.
The WAL file is kept under a size limit (``ledger/checkpoint.py``).
"""

from __future__ import annotations

import collections
import json
import logging
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from .checkpoint import WAL_LIMIT, WalBound
from .clock import Clock
from .errors import BackendError, Invalid, LedgerError
from .machine import Rules
from .schema import SQLITE, compile_queries
from .sql import SQLStore
from .store import Want
from .wake import AVAILABLE as SOCKETS_AVAILABLE
from .wake import Lead, Listener, Peers, WakeUnavailable, new_token, wake_folder
from .writelock import WAIT_S as WRITER_WAIT_S
from .writelock import WriterLock

log = logging.getLogger(__name__)

POOL_SIZE = 8  # connections per store; every operation borrows one for its own duration
POLL_S = 0.01  # data_version poll without wake-up sockets: 9.7 ms median cross-process latency
SAFETY_POLL_S = 1.0  # data_version poll beside the sockets: only for a wake-up that got lost
WAKE_ENV = "SKYHUB_SQLITE_WAKE"
WAKE_MODES = ("sockets", "poll")


class Connections(Protocol):
    """Where a SQLite store borrows a connection for one operation (``get``) and gives it back (``put``)."""

    def get(self) -> sqlite3.Connection:
        """A connection for this thread's operation alone; BackendError when none comes free in time."""

    def put(self, conn: sqlite3.Connection, broken: bool = False) -> None:
        """Give the connection back (``broken``: it failed to roll back)."""


class SQLiteBase(SQLStore):
    """What every SQLite store shares, wherever its database lives: SQLite's dialect, its
    transactions (``BEGIN IMMEDIATE``, with the short retries of ``_retry_busy``) and its errors
    translated once (``_Cursor``). A subclass provides ``_pool`` (``Connections``); the file store
    below adds wake-ups for other processes and the WAL's bound, the test kit's in-memory store
    (``skyhub_testkit.memory``) one connection that every store on its database shares."""

    dialect = SQLITE
    q = compile_queries(SQLITE)
    _pool: Connections
    writer_lock: WriterLock | None = None  # the file store's kernel writer lock (ledger/writelock.py)

    def _op(self) -> _Lease:
        return _Lease(self._pool)

    @contextmanager
    def _tx(self, bookkeeping: bool = False) -> Iterator[Any]:
        # Other writers of this machine are waited for on the writer lock (woken by the kernel when
        # the last one commits, for at most its bound); past that, and for writers that do not take
        # it, _retry_busy: short retries rather than SQLite's growing sleeps.
        conn = self._pool.get()
        broken = False
        lock = self.writer_lock
        locked = False
        try:
            locked = lock.acquire() if lock is not None else False
            cur = _Cursor(conn.cursor())
            cur.execute("BEGIN IMMEDIATE")  # waits (briefly, repeatedly) while another process writes
            try:
                yield cur
            except BaseException:
                broken = not _rollback(conn)
                raise
            try:
                _retry_busy(lambda: conn.execute("COMMIT"))
            except BackendError as exc:
                broken = not _rollback(conn)
                raise BackendError(f"SQLite commit failed: {exc.reason}") from exc
        finally:
            if locked:
                lock.release()  # type: ignore[union-attr]
            self._pool.put(conn, broken=broken)

    _schema_tx = _tx

    def _missing_index(self, exc: BackendError) -> bool:
        return "no such index" in str(exc.__cause__ or "")

    def _db_list(self, dbs: Any) -> Any:
        return json.dumps(list(dbs))


class SQLiteStore(SQLiteBase):
    """The embedded store: one SQLite file in WAL mode, shared by this process's threads
    through a bounded pool and by other processes through SQLite's own locks."""

    _pool: _Pool

    def __init__(
        self, path: str, rules: Rules | None, clock: Clock, *,
        pool_size: int = POOL_SIZE, wake: str = "sockets", poll_interval: float | None = None,
        wal_limit: int = WAL_LIMIT, writer_wait: float = WRITER_WAIT_S,
    ) -> None:
        if wake not in WAKE_MODES:
            raise Invalid(f"SQLite wake-ups must be one of {', '.join(WAKE_MODES)}, not {wake!r}")
        super().__init__(f"sqlite:///{path}", rules, clock)
        self.path = path
        self.wal_limit = wal_limit
        self._pool = _Pool(self._connect, pool_size, BUSY_WAIT_S)
        try:
            self.writer_lock = WriterLock(path, writer_wait)
        except OSError as exc:  # a read-only folder, say: SQLite's own locking alone, as before
            log.warning("sqlite: no writer lock beside %s (%s); writers wait by retrying", path, exc.strerror or exc)
        self._closed = threading.Event()
        self._poller: threading.Thread | None = None
        self._poller_lock = threading.Lock()
        self._wake_mode = wake
        self._poll_interval = poll_interval
        self._listener: Listener | None = None
        token = new_token()
        self._peers = Peers(wake_folder(path), token) if SOCKETS_AVAILABLE else None
        self._token = token
        self.wal_bound = WalBound(path, wal_limit)
        self._warned: dict[str, float] = {}
        try:
            self._open_schema()
        except BaseException:
            self._pool.close()
            raise

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=0)
        except sqlite3.Error as exc:
            raise BackendError(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        try:
            conn.execute("PRAGMA busy_timeout = 0")  # we wait ourselves: see _retry_busy
            _retry_busy(lambda: conn.execute("PRAGMA journal_mode = WAL"))
            _retry_busy(lambda: conn.execute("PRAGMA synchronous = NORMAL"))
            conn.execute(f"PRAGMA journal_size_limit = {int(self.wal_limit)}")  # see ledger/checkpoint.py
        except (sqlite3.Error, BackendError) as exc:
            conn.close()
            raise BackendError(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        return conn

    # ---- after a commit: checkpoints, and wake-ups for other processes --------------
    def _committed(self, db: str, actor: str) -> None:
        # Runs after COMMIT in the writer's thread; nothing here may fail the write. Other
        # processes first: a truncate past the WAL limit may wait for readers.
        if self._peers is not None:
            try:
                self._peers.notify(db, actor)
            except Exception as exc:  # noqa: BLE001 - logged; listeners fall back to their poll
                self._warn("notify", "sqlite: could not wake other processes (they will poll): %s", exc)
        try:
            self.wal_bound.committed()
        except Exception as exc:  # noqa: BLE001 - logged; the write stands
            self._warn("checkpoint", "sqlite: WAL checkpoint after a commit failed: %s", exc)

    def _warn(self, key: str, message: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._warned.get(key, -60.0) >= 60:
            self._warned[key] = now
            log.warning(message, *args)

    # ---- wake-ups from other processes ---------------------------------------------
    def _start_wakeups(self) -> None:
        with self._poller_lock:
            if self._poller is not None or self._closed.is_set():
                return
            # Before binding: a commit that slips in before the socket is bound moves this
            # version, and the poll sees it. Every commit that starts after the bind (so after
            # subscribe() returns) is sent to the socket; changes before that are for the
            # subscriber's own first look, as with NOTIFY.
            try:
                conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
            except sqlite3.Error as exc:
                raise BackendError(f"cannot watch SQLite database {self.path!r} for other processes' commits: {exc}") from exc
            try:
                version = conn.execute("PRAGMA data_version").fetchone()[0]
            except sqlite3.Error as exc:
                conn.close()
                raise BackendError(f"cannot watch SQLite database {self.path!r} for other processes' commits: {exc}") from exc
            if self._wake_mode == "sockets" and self._peers is not None:
                try:
                    self._listener = Listener(self._peers.folder, self._token)
                    self._peers.own = self._listener.name
                    self.skips_wakeups = True  # its board says when no feed here waits (ledger/wake.py)
                except (WakeUnavailable, OSError) as exc:
                    log.warning("sqlite: wake-up sockets unavailable (%s): polling for other processes' commits every %g s",
                                exc, self._poll_interval or POLL_S)
            self._poller = threading.Thread(target=self._watch, args=(conn, version), name="sqlite-wakeups", daemon=True)
            self._poller.start()

    def _publish_wants(self, wants: list[Want] | None) -> None:
        listener = self._listener
        if listener is None:
            return
        try:
            listener.publish(wants)
        except OSError as exc:  # senders then send everything: only slower
            self._warn("wants", "sqlite: could not publish what this process's feeds want: %s", exc)

    def lead(self, group: str) -> Lead | None:
        """Group ``group``'s lead, in the wake-up folder; None while this store does not listen."""
        listener = self._listener
        if listener is None:
            return None
        try:
            return Lead(listener.folder, group)
        except (OSError, ValueError) as exc:  # every runner looks for itself: only slower
            self._warn("lead", "sqlite: no lead for feed group %s: %s", group, exc)
            return None

    def _publish_waiting(self, waiting: bool) -> None:
        listener = self._listener
        if listener is not None:
            listener.set_waiting(waiting)

    def _watch(self, conn: sqlite3.Connection, last: int) -> None:
        """Wake this store's listeners for other processes' commits: on a datagram at once,
        and when ``PRAGMA data_version`` moved since the last wake-up (the poll)."""
        listener = self._listener
        interval = self._poll_interval or (SAFETY_POLL_S if listener else POLL_S)
        try:
            next_poll = time.monotonic() + interval
            while not self._closed.is_set():
                if listener is not None:
                    hints = listener.wait(next_poll - time.monotonic())
                    if self._closed.is_set():
                        break
                    if hints:
                        # read before waking: a commit after this read moves it, and the poll sees it
                        last = conn.execute("PRAGMA data_version").fetchone()[0]
                        if None in hints:
                            self._wake(None)
                        else:  # only the handlers that want such a commit (a skip-own worker not by its own)
                            for db, actor in hints:  # type: ignore[misc]
                                self._wake_elsewhere(db, actor)
                        continue
                elif self._closed.wait(max(0.0, next_poll - time.monotonic())):
                    break
                if time.monotonic() < next_poll:
                    continue
                next_poll = time.monotonic() + interval
                version = conn.execute("PRAGMA data_version").fetchone()[0]
                if version != last:
                    last = version
                    self._wake(None)
        except (sqlite3.Error, OSError) as exc:
            log.warning("sqlite: wake-up watcher stopped: %s", exc)
        finally:
            conn.close()

    def close(self) -> None:
        """Stop the wake-up threads, remove this store's socket and close the pool's connections."""
        self._closed.set()
        self._pool.close()
        with self._poller_lock:
            poller, listener = self._poller, self._listener
        if listener is not None:
            listener.interrupt()
        if poller is not None:
            poller.join(timeout=2)
        if listener is not None:
            listener.close()
        if self._peers is not None:
            self._peers.close()
        self.wal_bound.close()
        if self.writer_lock is not None:
            self.writer_lock.close()


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
            raise BackendError(f"SQLite refused the write: {exc}") from exc
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if "locked" not in text and "busy" not in text:
                raise BackendError(f"SQLite failed: {exc}") from exc
            now = time.monotonic()
            if not deadline:
                deadline = now + BUSY_WAIT_S
            elif now > deadline:
                raise BackendError(f"SQLite stayed locked by another writer for {BUSY_WAIT_S:g} s") from exc
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.002)
        except sqlite3.Error as exc:
            raise BackendError(f"SQLite failed: {exc}") from exc
        except (OverflowError, UnicodeEncodeError) as exc:  # checked before: a bug if it happens
            raise BackendError(f"SQLite could not bind a value: {exc}") from exc


class _Cursor:
    """A cursor that turns sqlite3 errors into BackendError at the one seam that calls it."""

    __slots__ = ("_cur",)

    def __init__(self, cur: sqlite3.Cursor) -> None:
        self._cur = cur

    def execute(self, sql: str, args: Any = ()) -> _Cursor:
        _retry_busy(lambda: self._cur.execute(sql, args))
        return self

    @property
    def connection(self) -> sqlite3.Connection:
        return self._cur.connection

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


class _Lease:
    """A pooled connection's cursor for one operation (a class: cheaper than a generator)."""

    __slots__ = ("_pool", "_conn")

    def __init__(self, pool: Connections) -> None:
        self._pool = pool

    def __enter__(self) -> _Cursor:
        self._conn = self._pool.get()
        return _Cursor(self._conn.cursor())

    def __exit__(self, *exc: object) -> None:
        self._pool.put(self._conn)


def _rollback(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("ROLLBACK")
        return True
    except sqlite3.Error:
        return False


class _Pool:
    """At most ``size`` connections, each lent to one operation at a time and kept for the
    next. Threads come and go (uvicorn's, the feed's); the connections stay bounded.

    Lending an idle connection takes no lock (``deque`` pop and append are atomic): a
    Condition on that path cost 1.5 us of a 10 us ``get``."""

    def __init__(self, connect: Callable[[], sqlite3.Connection], size: int, wait: float) -> None:
        if size < 1:
            raise LedgerError("pool_size must be at least 1")
        self._connect = connect
        self.size = size
        self._wait = wait
        self._idle: collections.deque[sqlite3.Connection] = collections.deque()
        self._count = 0
        self._waiting = 0
        self._cond = threading.Condition()
        self._closed = False

    def get(self) -> sqlite3.Connection:
        try:
            return self._idle.pop()
        except IndexError:
            return self._get_slow()

    def _get_slow(self) -> sqlite3.Connection:
        deadline = time.monotonic() + self._wait
        with self._cond:
            while True:
                if self._closed:
                    raise BackendError("the store is closed")
                if self._idle:
                    return self._idle.pop()
                if self._count < self.size:
                    self._count += 1
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BackendError(f"no SQLite connection came free within {self._wait:g} s (all {self.size} in use)")
                self._waiting += 1
                try:
                    self._cond.wait(min(left, 0.05))  # a put may append without the lock: look again soon
                finally:
                    self._waiting -= 1
        try:
            return self._connect()
        except BaseException:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise

    def put(self, conn: sqlite3.Connection, broken: bool = False) -> None:
        if broken or self._closed or conn.in_transaction:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            conn.close()
            return
        self._idle.append(conn)
        if self._waiting:
            with self._cond:
                self._cond.notify()
        if self._closed:  # closed meanwhile: close() may have missed this one
            self._drain()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._drain()

    def _drain(self) -> None:
        while True:
            try:
                conn = self._idle.pop()
            except IndexError:
                return
            with self._cond:
                self._count -= 1
            conn.close()

    @property
    def in_use(self) -> int:
        return self._count - len(self._idle)


def open_sqlite(path: str, rules: Rules | None, clock: Clock, *, pool_size: int = POOL_SIZE) -> SQLiteStore:
    """Open (or create) the SQLite store at ``path``; SKYHUB_SQLITE_WAKE=poll turns the wake-up sockets off."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise LedgerError(f"cannot create the database {path!r}: folder {directory!r} does not exist")
    mode = os.environ.get(WAKE_ENV, "").strip().lower() or "sockets"
    if mode not in WAKE_MODES:
        raise Invalid(f"{WAKE_ENV} must be one of {', '.join(WAKE_MODES)}, not {mode!r}")
    return SQLiteStore(path, rules, clock, pool_size=pool_size, wake=mode)
