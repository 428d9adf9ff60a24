"""The SQLite writer lock: a kernel lock taken before ``BEGIN IMMEDIATE``, with a bounded wait.

SQLite serializes writers itself, but a writer that finds the database locked can only sleep
and try again (``ledger/sqlite.py`` ``_retry_busy``): under a steady stream of commits from
several processes much of each wait is sleep after the lock came free. This lock orders the
writers of one machine before they reach SQLite, so a waiter is woken by the kernel the moment
the previous writer commits:

- in this process, a ``threading.Lock`` (``flock`` does not tell this process's threads apart);
- across processes, ``flock`` on ``<db>.wlock`` beside the database. The kernel drops it
  when its holder exits, however it exits (``kill -9`` included): no stale lock file to clear.

The wait is bounded (``WAIT_S``): a holder that is stopped (SIGSTOP, a debugger) or stuck inside
its transaction cannot hold the others forever. After the bound the writer goes on to
``BEGIN IMMEDIATE`` without the lock, that is to SQLite's own locking and its busy retries, which
fail with a clear error after their own limit. Correctness never rests on this lock: SQLite's
lock is still taken inside it, and writers that do not take it (the ``sqlite3`` shell) are
ordered by SQLite as before.

A blocking ``flock`` has no timeout, so a long cross-process wait runs on one thread per store
(``_waiter``) while the writer waits on a condition with its deadline; a grant that comes after
the writer gave up is handed back at once. A short one (up to about 2 ms) is a few non-blocking
looks from the writer's own thread first (``POLL_FIRST_S``).
"""

from __future__ import annotations

import fcntl
import os
import threading
import time

SUFFIX = ".wlock"
WAIT_S = 2.0  # then SQLite's busy handling takes over (see ledger/sqlite.py)
# A writer that finds the lock taken looks again after pauses growing from POLL_FIRST_S to POLL_LAST_S
# (about 2 ms in all) before it waits in the kernel: most waits are one transaction of another process
# (0.1-0.3 ms), and a look is cheaper than the waiter thread's hand-over (two thread switches in each
# process). Measured: SQLite jobs/s with two worker processes +20-25 % (docs/benchmarks.md).
POLL_FIRST_S = 0.00002
POLL_LAST_S = 0.001


class WriterLock:
    """``acquire()`` before ``BEGIN IMMEDIATE``, ``release()`` after COMMIT or ROLLBACK."""

    def __init__(self, db_path: str, wait: float = WAIT_S) -> None:
        self.path = db_path + SUFFIX
        self.wait = wait
        self.fallbacks = 0  # writes that went on without the lock after the bound
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        self._local = threading.Lock()
        self._cond = threading.Condition()
        self._wanted = False  # a writer waits for the waiter thread's flock
        self._granted = False  # the waiter thread got it for that writer
        self._busy = False  # the waiter thread is inside its blocking flock
        self._closed = False
        self._thread: threading.Thread | None = None

    def acquire(self) -> bool:
        """Take the lock within the bound; False: the bound passed (go on without it)."""
        deadline = time.monotonic() + self.wait
        if not self._local.acquire(timeout=self.wait):
            self.fallbacks += 1
            return False
        pause = POLL_FIRST_S
        while True:  # a short wait: looks after growing pauses, in this thread (the first one at once)
            with self._cond:
                if self._closed:
                    self._local.release()
                    return False
                if self._busy:
                    break
                try:
                    fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return True
                except BlockingIOError:
                    pass
                except OSError:
                    self._local.release()
                    return False
            if pause > POLL_LAST_S or time.monotonic() + pause > deadline:
                break
            time.sleep(pause)
            pause *= 1.5
        with self._cond:  # a longer one: the kernel wakes the waiter thread when the lock comes free
            if self._closed:
                self._local.release()
                return False
            # (while the waiter thread is in its flock, a grant to it is what comes next)
            self._wanted, self._granted = True, False
            if self._thread is None:
                self._thread = threading.Thread(target=self._waiter, name="sqlite-writer-lock", daemon=True)
                self._thread.start()
            self._cond.notify_all()
            got = self._cond.wait_for(lambda: self._granted or self._closed, timeout=max(0.0, deadline - time.monotonic()))
            self._wanted = False
            if got and self._granted:
                return True
            self._granted = False
        self.fallbacks += 1
        self._local.release()
        return False

    def release(self) -> None:
        """Give the lock back (after a successful ``acquire`` only)."""
        with self._cond:
            self._granted = False
        try:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        except OSError:
            pass
        self._local.release()

    def _waiter(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: (self._wanted and not self._granted) or self._closed)
                if self._closed:
                    return
                self._busy = True
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX)  # blocks in the kernel, without the GIL
            except OSError:
                with self._cond:
                    self._busy = self._wanted = False
                    self._cond.notify_all()
                continue
            with self._cond:
                self._busy = False
                if self._wanted and not self._closed:
                    self._granted = True
                    self._cond.notify_all()
                    continue
                fcntl.flock(self._fd, fcntl.LOCK_UN)  # the writer gave up meanwhile: hand it back

    def close(self) -> None:
        """Stop the waiter thread (it ends when its flock returns) and close the lock file."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        thread = self._thread
        if thread is not None and thread.is_alive():
            thread.join(timeout=0.1)
        if thread is None or not thread.is_alive():  # else it stays open until the blocked flock returns
            os.close(self._fd)
