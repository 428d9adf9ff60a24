"""What every tick and handler is given: ``fn(event, ctx)``.

``ctx.db`` is a ``Ledger`` bound to the tick's or handler's own actor, ``ctx.now()`` reads the
one clock (the composition root's, which the ledger carries too), ``ctx.vault`` decrypts for backend actors, ``ctx.http`` is the
process's HTTP client (the one transport seam for every platform call), ``ctx.fetch`` the
guarded fetcher for every URL a client or an operator chose (``platforms.fetcher``), ``ctx.platforms`` says
where the platforms are (the ``[platforms]`` settings), ``ctx.settings`` is the product's own
settings section and ``ctx.log`` a logger named after the actor. Nothing else: a tick keeps no state between runs, so every one of them runs on a fake clock with a
mocked transport in a test.

A handler run by the feed may also use what its batch gives it: ``ctx.prepared`` (what the handler's
``prepare`` hook returned for the batch, see ``ledger/feed.py``) and ``ctx.later(db, write)``, a write
made with the batch's other later writes in one transaction after the call returns.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .clock import Clock
from .errors import LedgerError
from .store import Ledger, Write

if TYPE_CHECKING:  # the engine does not need httpx to run; products that call out do
    import httpx


class Secrets(Protocol):
    """The vault as a backend actor sees it (``ctx.vault``)."""

    def reveal(self, cred_id: str) -> dict[str, Any]:
        """The current secret of a credential (backend actors only)."""

    def usable(self, cred_id: str) -> dict[str, Any]:
        """The credential's metadata if work may use it now; raises NeedsReauth otherwise."""

    def report_dead(self, cred_id: str, reason: str) -> None:
        """A platform refused this credential: flag it NEEDS RE-AUTH."""


class _Missing:
    """Stands in for a service the composition root did not provide; says so when used."""

    def __init__(self, what: str) -> None:
        self._what = what

    def __getattr__(self, name: str) -> Any:
        raise LedgerError(f"no {self._what} was given to this tick or handler (the hub wires one in; a test must pass one)")

    def __repr__(self) -> str:
        return f"<no {self._what}>"


@dataclass
class Services:
    """What the composition root hands to every tick and handler besides its ledger."""

    vault: Callable[[Ledger], Secrets] | None = None  # the vault as one actor sees it
    http: httpx.Client | None = None
    platforms: Any = None  # the [platforms] settings section: where to call
    fetch: Any = None  # the guarded fetcher (platforms.fetcher.Fetcher) for URLs someone else chose


@dataclass
class Context:
    """The one argument besides the event: see the module docstring."""

    db: Ledger
    clock: Clock
    name: str  # the tick's or handler's name
    settings: Any = None
    platforms: Any = None
    vault: Secrets = field(default_factory=lambda: _Missing("vault"))
    http: httpx.Client = field(default_factory=lambda: _Missing("HTTP client"))  # type: ignore[assignment]
    fetch: Any = field(default_factory=lambda: _Missing("guarded fetcher"))
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("skyhub"))
    tries: int = 0  # handlers: failed deliveries of this change before this one
    prepared: Any = None  # handlers: what the handler's prepare hook returned for this batch (None: nothing)
    deferred: list[tuple[str, Write]] | None = field(default=None, repr=False)  # the feed's: this call's later writes

    def later(self, db: str, write: Write) -> None:
        """Write ``write`` to ``db`` as this context's actor once the call has returned. In a feed's batch the
        later writes of its calls are made together, one transaction per database, before the feed moves
        its cursor on (while the calls are quick: see ``ledger.feed.FLUSH_S``; the writes of a call that
        fails are dropped), and a refused one is logged, not raised: use it for a write whose refusal needs no retry,
        such as the finish of a claim that may have been taken back. Anywhere else it is written at once
        (a refusal raises). A process that dies before the batch's writes are made loses them, as it
        would lose a call in progress: the work is done again once its lease runs out."""
        if self.deferred is None:
            self.db.put(db, write.doc, write.id, if_rev=write.if_rev, create_only=write.create_only)
        else:
            self.deferred.append((db, write))

    def now(self) -> int:
        """Epoch milliseconds from the one clock."""
        return self.clock.now_ms()

    @property
    def actor(self) -> str:
        """The actor this context writes as (the Ledger's)."""
        return self.db.actor


def make_context(db: Ledger, name: str, services: Services | None, *, settings: Any = None, tries: int = 0) -> Context:
    """A context for ``db.actor``, on ``db``'s clock, with what ``services`` provides."""
    ctx = Context(db=db, clock=db.clock, name=name, settings=settings, log=logging.getLogger(f"skyhub.{db.actor}"), tries=tries)
    if services is not None:
        if services.vault is not None:
            ctx.vault = services.vault(db)
        if services.http is not None:
            ctx.http = services.http
        if services.fetch is not None:
            ctx.fetch = services.fetch
        ctx.platforms = services.platforms
    return ctx
