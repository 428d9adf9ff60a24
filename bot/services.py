"""What mention builds offer a hub (``BOT.services``): the item for "needs a person" when the
builder's daily token budget is spent and pending builds wait for the next day. The limit is
the one the builder recorded on the day's document (the builder's own settings, which may be a
workflow's, not the hub's)."""

from __future__ import annotations

from typing import Any

from ledger import LedgerError, NotFound, Offered, Store

from .budget import day_of
from .machine import DB, STATE_DB, budget_id

BUDGET_RANK = 5  # after credentials (nothing runs without them), before failures of single documents


def offered(settings: Any) -> Offered:
    """The bot's services for a hub with these settings."""

    def attention(store: Store, now: int) -> list[dict[str, Any]]:
        day = day_of(now)
        try:
            doc = store.get(STATE_DB, budget_id(day))
        except (NotFound, LedgerError):
            return []
        used, limit = int(doc.get("used") or 0), int(doc.get("limit") or 0)
        if limit <= 0 or used < limit:
            return []
        waiting = sum(1 for d in store.query(DB, "status", "pending-build", 101).docs if d.get("kind") == "mention")
        count = f"{waiting if waiting <= 100 else 'more than 100'} pending build{'s' if waiting != 1 else ''} wait"
        return [{"what": "token-budget", "title": f"today's codegen token budget is spent ({day}, UTC)",
                 "reason": (f"{used:,} of {limit:,} tokens used: {count} for the next day (00:00 UTC), "
                            "unclaimed and without using an attempt; raise codegen.daily_token_budget to build sooner"),
                 "db": STATE_DB, "id": budget_id(day), "since": doc.get("spentAt"), "rank": BUDGET_RANK}]

    return Offered(attention=attention)


__all__ = ["offered"]
