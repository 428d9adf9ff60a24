"""What the hub hands a product's HTTP routes (``ledger.Web``): the store, the settings, the one
clock, the principal dependency, the API's threads, and backend contexts."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ledger import Clock, Context, Ledger, Store

from .deps import Run, principal


class Web:
    """See ``ledger.Web``; ``context(product, actor)`` makes a backend context (the composition root's)."""

    def __init__(self, store: Store, settings: Any, clock: Clock, run: Run, context: Callable[[str, str], Context]) -> None:
        self._store = store
        self._settings = settings
        self._clock = clock
        self._run = run
        self._context = context

    @property
    def store(self) -> Store:
        """The hub's store."""
        return self._store

    @property
    def settings(self) -> Any:
        """The hub's settings."""
        return self._settings

    @property
    def principal(self) -> Callable[..., Any]:
        """The FastAPI dependency giving the authenticated principal."""
        return principal

    @property
    def clock(self) -> Clock:
        """The hub's one clock."""
        return self._clock

    def ledger(self, actor: str) -> Ledger:
        """The hub's store bound to ``actor``, on the hub's clock."""
        return Ledger(self._store, actor, self._clock)

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Awaitable[Any]:
        """``fn`` in the API's threads, awaited."""
        return self._run(fn, *args, **kwargs)

    def context(self, product: str, actor: str) -> Context:
        """A backend context for ``actor`` of ``product``."""
        return self._context(product, actor)
