"""A bound on a SQLite WAL file's size.

SQLite checkpoints by itself: the commit that takes the WAL past 1,000 pages copies it back
into the database (PASSIVE: it never waits for readers), and the next writer starts the WAL
over from its beginning. That only happens when a checkpoint has copied *every* frame; a
reader still using older frames (a feed claiming, a console query, another process) makes it
stop short, and a WAL that never starts over keeps growing. So:

- ``journal_size_limit`` cuts the file back to WAL_LIMIT whenever the WAL does start over;
- every CHECK_EVERY-th commit of a process looks at the file's size (a ``stat``: 2 us of a
  commit's 70 otherwise), and one that finds it past WAL_LIMIT runs a TRUNCATE checkpoint
  itself, which waits up to TRUNCATE_WAIT_MS for readers and writers to let go, copies
  everything and empties the file; if they do not let go, the next try is RETRY_S later.
  That is the bound: past it by at most the commits between two looks, and those made while
  a truncate waits.

Checkpointing from a background thread instead (``wal_autocheckpoint = 0`` and a PASSIVE
checkpoint every 100 ms) was measured and dropped: 20,000 puts in one thread went from
8,500 to 5,700 puts/s and p99.9 from 5 to 20 ms, because while commits follow each other a
checkpoint in another thread never catches up with the last frame, so the WAL never starts
over, runs up to the limit (larger WAL, slower page lookups) and is truncated in a commit.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time

log = logging.getLogger(__name__)

WAL_LIMIT = 16 * 1024 * 1024  # bytes: the WAL file is truncated back past this
TRUNCATE_WAIT_MS = 200  # a TRUNCATE checkpoint waits this long for readers and writers
RETRY_S = 1.0  # after a TRUNCATE that could not finish
# commits of this process between two looks at the WAL file's size: 4 since writes keep the search
# index (a full-text merge in one commit writes many pages; with 8, 20,000 small writes of a searched
# field took the WAL 90 KB past the limit and its slack)
CHECK_EVERY = 4


class WalBound:
    """Keeps one SQLite file's WAL under ``limit`` bytes: checked after each commit of this process."""

    def __init__(self, path: str, limit: int = WAL_LIMIT) -> None:
        self.path = path
        self.wal = path + "-wal"
        self.limit = limit
        self.truncates = 0  # counted for tests and benchmarks
        self._lock = threading.Lock()  # one checkpoint at a time in this process
        self._conn: sqlite3.Connection | None = None
        self._retry_at = 0.0
        self._warned = 0.0
        self._closed = False
        self._commits = 0

    def committed(self) -> None:
        """This process committed a write: if the WAL file is past the limit, checkpoint and empty it."""
        self._commits += 1
        if self._commits % CHECK_EVERY:
            return
        try:
            size = os.stat(self.wal).st_size
        except FileNotFoundError:
            return
        if size <= self.limit or time.monotonic() < self._retry_at:
            return
        with self._lock:
            if self._closed or os.stat(self.wal).st_size <= self.limit:
                return  # closed, or another thread of this process has just done it
            if self._truncate():
                self.truncates += 1
            else:
                self._retry_at = time.monotonic() + RETRY_S

    def _truncate(self) -> bool:
        try:
            if self._conn is None:
                self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=0)
                self._conn.execute(f"PRAGMA busy_timeout = {TRUNCATE_WAIT_MS}")
            busy, _frames, _copied = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.Error as exc:
            now = time.monotonic()
            if now - self._warned > 60:
                self._warned = now
                log.warning("sqlite: could not truncate the WAL (%s bytes past its limit): %s", self.limit, exc)
            return False
        return not busy

    def close(self) -> None:
        """Close the checkpoint connection."""
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None
