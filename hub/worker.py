"""Workers: a fixed set of daemon threads that run calls in order of arrival, for the event
loop to await.

The API's endpoints, the gate's credential checks, the change-stream reader and the health
check call the store through these rather than anyio's thread pool or a
``ThreadPoolExecutor``:

- anyio retires a pool thread after 10 s idle and starts a new one for the next burst, and
  the store keeps one connection per thread and never closes a retired thread's. Measured with
  three bursts of 600 writes from 30 clients, 13 s apart: the hub's PostgreSQL connections went
  36 -> 65 -> 94 (the server allows 100, shared by every process), its open SQLite files
  20 -> 35 -> 51. A worker's threads live as long as the hub, so the store holds at most one
  connection per thread: 20 -> 22 -> 22 and 20 -> 20 -> 21 with these workers.
- an executor's threads are joined at interpreter exit, so one store call that hangs (a
  locked table, a dead NFS mount) would keep the process from ever ending. Daemon threads do
  not.
"""

from __future__ import annotations

import asyncio
import functools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class Worker:
    """A fixed set of ``threads`` daemon threads, started with the first call, that run calls in order of
    arrival (see the module docstring). ``name`` names the threads."""

    def __init__(self, name: str, threads: int = 1) -> None:
        self.name = name
        self.threads = max(1, threads)
        self._calls: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]]] = queue.SimpleQueue()
        self._started = False
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
        """Queue ``fn(*args, **kwargs)`` for the worker's threads; its future."""
        with self._lock:
            if not self._started:
                for i in range(self.threads):
                    name = self.name if self.threads == 1 else f"{self.name}-{i}"
                    threading.Thread(target=self._run, name=name, daemon=True).start()
                self._started = True
        future: Future[T] = Future()
        self._calls.put((future, functools.partial(fn, *args, **kwargs)))
        return future

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` in one of the worker's threads, awaited."""
        return await asyncio.wrap_future(self.submit(fn, *args, **kwargs))

    def _run(self) -> None:
        while True:
            future, call = self._calls.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(call())
            except BaseException as exc:  # handed to the awaiting side, which decides
                future.set_exception(exc)
