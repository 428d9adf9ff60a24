"""The greeter's metrics (the architecture guide's "Add a metric")."""

from __future__ import annotations

from collections.abc import Sequence

from ledger import Metric, Readings

from .product import DB


def metrics(readings: Readings) -> Sequence[Metric]:
    sent = sum(c.n for c in readings.counts() if (c.db, c.status) == (DB, "sent"))
    return [Metric("skyhub_greetings_sent", "Greetings sent", samples=[((), sent)])]
