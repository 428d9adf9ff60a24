"""skyhub's engine: documents with revisions, machines as data, the change feed, the
scheduler and leases. Imports nothing else of skyhub."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# Names load from their modules when first asked for (PEP 562): `skyhub --help` and one CLI command
# need a few of them, and the engine whole costs a start-up tens of ms (the settings sections load
# pydantic). Type checkers read the imports below.
if TYPE_CHECKING:
    from .actor import ADMIN, ActorPattern, device, handler, tick, user
    from .backends import DEFAULT_URL, open_store
    from .clock import SYSTEM, Clock, FakeClock, SystemClock, parse_interval
    from .context import Context, Secrets, Services
    from .errors import BackendError, Conflict, Forbidden, Invalid, LedgerError, NotFound, TooLarge, Usage
    from .feed import DEADLETTERS, Feed, Handler, deadletter_machine
    from .guards import (
        Guard,
        GuardContext,
        attempts_left,
        attempts_used_up,
        claim,
        fresh,
        guard,
        lease_expired,
        renew,
        same_claim,
        started_over,
    )
    from .machine import Edge, InvalidMachine, Machine, Rules
    from .move import VERBS, Move
    from .product import Env, Metric, Offered, Pages, Policy, Product, Readings, Web
    from .scheduler import Scheduler, Tick, TickEvent
    from .section import Interval, Section
    from .store import (
        Administration,
        Batch,
        Change,
        Coordination,
        Doc,
        Documents,
        Elsewhere,
        FeedPosition,
        Index,
        Ledger,
        Page,
        SearchPage,
        StatusCount,
        Store,
        TickRun,
        Write,
        Written,
    )

__all__ = [
    "ADMIN", "ActorPattern", "Administration", "BackendError", "Batch", "Change", "Clock", "Conflict", "Context",
    "Coordination", "DEADLETTERS", "DEFAULT_URL", "Doc", "Documents", "Edge", "Elsewhere", "Env", "FakeClock", "Feed", "FeedPosition", "Forbidden",
    "Guard", "GuardContext", "Handler", "Index", "Interval", "Invalid", "InvalidMachine", "Ledger", "LedgerError",
    "Machine", "Metric", "Move", "VERBS", "NotFound", "Offered", "Readings", "Page", "Pages", "Policy", "Product", "Rules", "SYSTEM", "SearchPage", "Scheduler", "Secrets", "Section", "Services", "Web",
    "StatusCount", "Store",
    "SystemClock", "Tick", "TickEvent", "TickRun", "TooLarge", "Write", "Written", "Usage", "attempts_left", "attempts_used_up", "claim",
    "deadletter_machine", "device", "fresh", "guard", "handler", "lease_expired", "open_store", "parse_interval",
    "renew", "same_claim", "started_over", "tick", "user",
]


_HOME: dict[str, str] = {
    "ADMIN": "actor", "ActorPattern": "actor", "device": "actor", "handler": "actor", "tick": "actor", "user": "actor",
    "DEFAULT_URL": "backends", "open_store": "backends",
    "SYSTEM": "clock", "Clock": "clock", "FakeClock": "clock", "SystemClock": "clock", "parse_interval": "clock",
    "Context": "context", "Secrets": "context", "Services": "context",
    "BackendError": "errors", "Conflict": "errors", "Forbidden": "errors", "Invalid": "errors", "LedgerError": "errors", "NotFound": "errors", "TooLarge": "errors", "Usage": "errors",
    "DEADLETTERS": "feed", "Feed": "feed", "Handler": "feed", "deadletter_machine": "feed",
    "Guard": "guards", "GuardContext": "guards", "attempts_left": "guards", "attempts_used_up": "guards", "claim": "guards", "fresh": "guards", "guard": "guards", "lease_expired": "guards", "renew": "guards", "same_claim": "guards", "started_over": "guards",
    "Edge": "machine", "InvalidMachine": "machine", "Machine": "machine", "Rules": "machine",
    "VERBS": "move", "Move": "move",
    "Env": "product", "Metric": "product", "Offered": "product", "Pages": "product", "Policy": "product", "Product": "product", "Readings": "product", "Web": "product",
    "Scheduler": "scheduler", "Tick": "scheduler", "TickEvent": "scheduler",
    "Administration": "store", "Batch": "store", "Change": "store", "Coordination": "store", "Doc": "store", "Documents": "store", "Elsewhere": "store", "FeedPosition": "store", "Index": "store", "Ledger": "store", "Page": "store", "SearchPage": "store", "StatusCount": "store", "Store": "store", "TickRun": "store", "Write": "store", "Written": "store",
    "Interval": "section", "Section": "section",
}


def __getattr__(name: str) -> object:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'ledger' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # asked once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))
