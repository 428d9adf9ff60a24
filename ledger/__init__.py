"""skyhub's engine: documents with revisions, machines as data, the change feed, the
scheduler and leases. Imports nothing else of skyhub."""

from __future__ import annotations

from .actor import ADMIN, ActorPattern, device, handler, tick, user
from .backends import DEFAULT_URL, open_store
from .clock import SYSTEM, Clock, FakeClock, SystemClock
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
from .scheduler import Scheduler, Tick, TickEvent, parse_interval
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


def __getattr__(name: str) -> object:
    # the settings section types load pydantic: only code that declares settings pays for it
    if name in ("Interval", "Section"):
        from . import section

        return getattr(section, name)
    raise AttributeError(f"module 'ledger' has no attribute {name!r}")
