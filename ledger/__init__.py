"""skyhub's engine: documents with revisions, machines as data, the change feed, the
scheduler and leases. Imports nothing else of skyhub."""

from .actor import ADMIN, ActorPattern, device, handler, tick, user
from .backends import DEFAULT_URL, open_store
from .clock import SYSTEM, Clock, FakeClock, SystemClock
from .errors import BackendError, Conflict, Forbidden, Invalid, LedgerError, NotFound, TooLarge
from .feed import DEADLETTERS, Feed, Handler, HandlerContext, deadletter_machine
from .guards import Guard, GuardContext, attempts_left, attempts_used_up, claim, fresh, guard, lease_expired, renew, same_claim
from .machine import Edge, InvalidMachine, Machine, Rules
from .scheduler import Scheduler, Tick, TickContext, TickEvent, parse_interval
from .store import Batch, Change, Doc, Ledger, Page, Store, TickRun

__all__ = [
    "ADMIN", "ActorPattern", "BackendError", "Batch", "Change", "Clock", "Conflict", "DEADLETTERS",
    "DEFAULT_URL", "Doc", "Edge", "FakeClock", "Feed", "Forbidden", "Guard", "GuardContext", "Handler",
    "HandlerContext", "Invalid", "InvalidMachine", "Ledger", "LedgerError", "Machine", "NotFound", "Page",
    "Rules", "SYSTEM", "Scheduler", "Store", "SystemClock", "Tick", "TickContext", "TickEvent", "TickRun",
    "TooLarge", "attempts_left", "attempts_used_up", "claim", "deadletter_machine", "device", "fresh",
    "guard", "handler", "lease_expired", "open_store", "parse_interval", "renew", "same_claim", "tick", "user",
]
