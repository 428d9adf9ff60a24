"""The greeter's tick: today's greeting from the weather service."""

from __future__ import annotations

from typing import Any

from ledger import Context, TickEvent
from platforms.errors import PlatformError

from .product import DB
from .weather import Weather


def weather(event: TickEvent, ctx: Context) -> dict[str, Any]:
    try:
        summary = Weather(ctx.http).today()
    except PlatformError as exc:
        return {"error": exc.reason}
    ctx.db.put(DB, {"kind": "greeting", "status": "sent", "text": f"Good day: {summary}"})
    return {"sent": 1}
