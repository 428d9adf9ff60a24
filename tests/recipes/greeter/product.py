"""A test-sized product, built by following docs/architecture.md's recipes: a machine, a
console page with its template, an HTTP route, an item for "needs a person", a metric, and a
platform adapter its tick calls. Nothing of hub/ is edited for it: the test adds the declaration's
module to the hub's list, as the recipe says."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ledger import Machine, Offered, Product, Store, Tick, tick, user

DB = "greetings"
GREETINGS = Machine(DB, kind="greeting", start=["sent"], edges=[], create_by=[user(), tick("weather")])


def offered(settings: Any) -> Offered:
    def attention(store: Store, now: int) -> list[dict[str, Any]]:
        unanswered = store.query(DB, "status", "sent", 5).docs
        return [{"what": "greeting", "title": f"{d['_id']} waits for an answer", "reason": d.get("text", ""), "db": DB,
                 "id": d["_id"], "action": "/console/greet", "actionLabel": "Answer it"} for d in unanswered]

    return Offered(attention=attention)


def _ticks(section: Any) -> Sequence[Tick]:
    from .tick import weather

    return [Tick("weather", "1h", weather)]


GREETER = Product(
    "greeter", "Greetings: a test-sized product made by the architecture guide's recipes.",
    machines=[GREETINGS],
    ticks=_ticks,
    tick_help={"weather": "asks the weather service for today's greeting"},
    api="tests.recipes.greeter.api:greeter_router",
    pages="tests.recipes.greeter.pages:greeter_pages",
    nav=(("/console/greet", "Greetings"),),
    templates="tests.recipes.greeter",
    services="tests.recipes.greeter.product:offered",
    metrics="tests.recipes.greeter.metrics:metrics",
)

PRODUCTS = (GREETER,)
