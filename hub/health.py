"""``/health`` within a budget: the hub says what is wrong within a second, even while its
store hangs (a locked table, a stalled disk, a database that stopped answering)."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from ledger import LedgerError
from ledger.sql import redact_url

from .worker import Worker

if TYPE_CHECKING:
    from .app import App

BUDGET_S = 1.0


class HealthProbe:
    """``app.health()`` within a budget: in a thread of its own, at most one at a time; a
    check still waiting on the store is joined, not doubled, so a hung store costs one thread.
    ``budget`` is in seconds."""

    def __init__(self, app: App, budget: float = BUDGET_S) -> None:
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
