"""``/health`` within a budget: the hub says what is wrong within a second, even while its
store hangs (a locked table, a stalled disk, a database that stopped answering)."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from typing import Any, Protocol

from ledger import LedgerError
from ledger.sql import redact_url

from .worker import Worker

BUDGET_S = 1.0


class _Running(Protocol):
    @property
    def running(self) -> bool: ...


class _Store(Protocol):
    url: str


class Reports(Protocol):
    """What the probe asks: a full report (``health()``, which may hang with its store), and what it says without one."""

    def health(self) -> dict[str, Any]:
        """The full report (``App.health``)."""

    @property
    def store(self) -> _Store:
        """The store (its URL names it in a degraded report)."""

    @property
    def feed(self) -> _Running:
        """The change feed (whether it runs)."""

    @property
    def scheduler(self) -> _Running:
        """The scheduler (whether it runs)."""


class HealthProbe:
    """``app.health()`` within a budget: in a thread of its own, at most one at a time; a
    check still waiting on the store is joined, not doubled, so a hung store costs one thread.
    ``budget`` is in seconds."""

    def __init__(self, app: Reports, budget: float = BUDGET_S) -> None:
        self.app = app
        self.budget = budget
        self._worker = Worker("health")
        self._pending: Future[dict[str, Any]] | None = None

    async def __call__(self) -> dict[str, Any]:
        """The health report (``app.health()``), or a degraded one naming the problem when the store fails
        or does not answer within the budget."""
        if self._pending is None or self._pending.done():
            self._pending = self._worker.submit(self.app.health)
        try:
            async with asyncio.timeout(self.budget):
                return await asyncio.shield(asyncio.wrap_future(self._pending))
        except TimeoutError:
            return self._degraded(f"the store did not answer within {self.budget:g} s")
        except LedgerError as exc:
            return self._degraded(exc.reason)

    def _degraded(self, reason: str) -> dict[str, Any]:
        a = self.app
        return {
            "ok": False,
            "store": {"url": redact_url(a.store.url), "ok": False, "error": reason},
            "feed": {"running": a.feed.running},
            "scheduler": {"running": a.scheduler.running},
        }
