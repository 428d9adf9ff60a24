"""A worker: one daemon thread that runs calls in order, for the event loop to await.

The change-stream reader and the health check call the store from the server's event loop
through one of these rather than a ``ThreadPoolExecutor``: an executor's threads are joined at
interpreter exit, so one store call that hangs (a locked table, a dead NFS mount) would keep
the process from ever ending. A daemon thread does not.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class Worker:
    def __init__(self, name: str) -> None:
        self.name = name
        self._calls: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
        future: Future[T] = Future()
        self._calls.put((future, fn, args))
        return future

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the worker's thread, awaited."""
        return await asyncio.wrap_future(self.submit(fn, *args))

    def _run(self) -> None:
        while True:
            future, fn, args = self._calls.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # handed to the awaiting side, which decides
                future.set_exception(exc)
