"""WAL checkpoints for SQLite, off the commit path.

Every connection runs with ``wal_autocheckpoint = 0``: no commit copies the WAL back into
the database file (SQLite's default makes the commit that crosses 1,000 pages do it, in
the writer's own time). Instead each store that writes runs one background thread that,
while commits happen, runs ``wal_checkpoint(PASSIVE)`` every INTERVAL_S: it copies what no
reader still needs and never waits for anyone, and a checkpoint that finds readers (or
another process's checkpoint) simply does less. Once a checkpoint has copied everything,
the next writer starts the WAL over from its beginning, and ``journal_size_limit`` cuts the
file back to WAL_LIMIT.

The bound: a commit that leaves the WAL file larger than WAL_LIMIT runs a TRUNCATE
checkpoint itself (waiting up to TRUNCATE_WAIT_MS for readers and writers; if they do not
let go, it tries again a second later). Several processes may each run a checkpointer:
SQLite lets one checkpoint run at a time, and the others find it busy and skip a round.
A failing checkpoint is logged, never raised into a write.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time

log = logging.getLogger(__name__)

INTERVAL_S = 0.1  # between PASSIVE checkpoints while commits happen
WAL_LIMIT = 16 * 1024 * 1024  # bytes: the WAL file is truncated back past this
TRUNCATE_WAIT_MS = 200  # a TRUNCATE checkpoint waits this long for readers and writers
RETRY_S = 1.0  # after a TRUNCATE that could not finish


class Checkpointer:
    """Keeps one SQLite file's WAL short from a background thread (started on the first commit)."""

    def __init__(self, path: str, *, interval: float = INTERVAL_S, limit: int = WAL_LIMIT) -> None:
        self.path = path
        self.wal = path + "-wal"
        self.interval = interval
        self.limit = limit
        self.checkpoints = 0  # counted for tests and benchmarks
        self.truncates = 0
        self._dirty = threading.Event()
        self._closed = threading.Event()
        self._lock = threading.Lock()  # one checkpoint at a time in this process
        self._conn: sqlite3.Connection | None = None
        self._thread: threading.Thread | None = None
        self._retry_at = 0.0
        self._warned = 0.0

    def committed(self) -> None:
        """This process committed a write: checkpoint soon, and now if the WAL is past the limit."""
        if self._thread is None:
            self._start()
        self._dirty.set()
        try:
            size = os.stat(self.wal).st_size
        except FileNotFoundError:
            return
        if size > self.limit and time.monotonic() >= self._retry_at:
            busy = self.checkpoint("TRUNCATE")
            if busy:
                self._retry_at = time.monotonic() + RETRY_S
            else:
                self.truncates += 1

    def _start(self) -> None:
        with self._lock:
            if self._thread is None and not self._closed.is_set():
                self._thread = threading.Thread(target=self._run, name="sqlite-checkpoint", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            self._dirty.wait()
            if self._closed.wait(self.interval):  # let the commits of the next INTERVAL_S gather
                return
            self._dirty.clear()
            self.checkpoint("PASSIVE")

    def checkpoint(self, mode: str) -> bool:
        """Run one ``wal_checkpoint(mode)``; True if it could not do all of it (busy)."""
        with self._lock:
            if self._closed.is_set():
                return False
            try:
                if self._conn is None:
                    self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=0)
                    self._conn.execute(f"PRAGMA busy_timeout = {TRUNCATE_WAIT_MS}")
                busy, _frames, _copied = self._conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
            except sqlite3.Error as exc:
                now = time.monotonic()
                if now - self._warned > 60:
                    self._warned = now
                    log.warning("sqlite: WAL checkpoint (%s) failed: %s", mode, exc)
                return True
            self.checkpoints += 1
            return bool(busy)

    def close(self) -> None:
        """Stop the thread and close its connection."""
        self._closed.set()
        self._dirty.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
