"""The builder's daily token budget, kept in the ledger: one document a UTC day in ``bot``
(``token-budget-YYYY-MM-DD``, machine ``bot/token-budget``), written by the builder with the
revision check, so two builders adding at once both count (the loser reads again and adds).

Before each claim the builder asks ``spent``; once the day's tokens reach the limit, pending
builds wait, unclaimed, for the next day (no attempt is used, nothing fails), and the
console's overview says so. A build that started under the limit finishes, so a day can end a
little over it. Tokens are added before the build's result is written: a builder that dies in
between counts a build twice rather than not at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ledger import Conflict, Ledger, NotFound

from .machine import BUDGET_KIND, STATE_DB, budget_id

MAX_TRIES = 20  # writers racing for one day's document: each loss costs a read


def day_of(now_ms: int) -> str:
    """The UTC day of an epoch-milliseconds time, ``YYYY-MM-DD``."""
    return datetime.fromtimestamp(now_ms / 1000, tz=UTC).strftime("%Y-%m-%d")


@dataclass(frozen=True)
class Spent:
    """A day whose budget is used up: how much of how much."""

    day: str
    used: int
    limit: int


class TokenBudget:
    """The day's budget of ``limit`` tokens (0: no limit, the tokens are still counted), through ``db``."""

    def __init__(self, db: Ledger, limit: int) -> None:
        self.db = db  # bound to the builder's device
        self.limit = limit

    def today(self, now_ms: int) -> dict[str, Any] | None:
        """The budget document of ``now_ms``'s day, or None before the day's first build."""
        try:
            return self.db.get(STATE_DB, budget_id(day_of(now_ms)))
        except NotFound:
            return None

    def spent(self, now_ms: int) -> Spent | None:
        """The day's use when it has reached the limit, else None."""
        if self.limit <= 0:
            return None
        doc = self.today(now_ms) or {}
        used = int(doc.get("used") or 0)
        return Spent(day_of(now_ms), used, self.limit) if used >= self.limit else None

    def add(self, now_ms: int, tokens_in: int, tokens_out: int) -> dict[str, Any] | None:
        """Add one build's tokens to the day (nothing to add: no write); the document as written."""
        if tokens_in <= 0 and tokens_out <= 0:
            return None
        day = day_of(now_ms)
        doc_id = budget_id(day)
        for _ in range(MAX_TRIES):
            head = self.today(now_ms)
            base = head or {"kind": BUDGET_KIND, "status": "counting", "day": day, "tokensIn": 0, "tokensOut": 0, "used": 0, "builds": 0}
            body = {k: v for k, v in base.items() if not k.startswith("_")}
            body["tokensIn"] = int(body.get("tokensIn") or 0) + max(0, tokens_in)
            body["tokensOut"] = int(body.get("tokensOut") or 0) + max(0, tokens_out)
            body["used"] = body["tokensIn"] + body["tokensOut"]
            body["builds"] = int(body.get("builds") or 0) + 1
            body["limit"] = self.limit
            body["updatedAt"] = now_ms
            if self.limit > 0 and body["used"] >= self.limit and not body.get("spentAt"):
                body["spentAt"] = now_ms
            try:
                if head is None:
                    return self.db.put(STATE_DB, body, doc_id, create_only=True)
                return self.db.put(STATE_DB, body, doc_id, if_rev=head["_rev"])
            except Conflict:
                continue  # another builder added first: read again, add to its count
        raise Conflict(f"{STATE_DB}/{doc_id} changed {MAX_TRIES} times while this build's tokens were added: try again")


__all__ = ["Spent", "TokenBudget", "day_of"]
