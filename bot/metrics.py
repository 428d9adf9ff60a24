"""What mention builds add to ``/metrics`` (``BOT.metrics``): replies that reached an end state."""

from __future__ import annotations

from collections.abc import Sequence

from ledger import Metric, Readings

from .machine import MENTIONS

REPLY_OUTCOMES = frozenset({"replied", "error", "skipped"})


def metrics(readings: Readings) -> Sequence[Metric]:
    """``skyhub_replies_total{platform,outcome}``: mentions that ended replied, in error or skipped, since the hub started."""
    samples = [((platform or "bsky", status), float(n)) for machine, platform, status, n in readings.outcomes()
               if machine == MENTIONS.name and status in REPLY_OUTCOMES]
    return [Metric("skyhub_replies", "Mentions that reached an end state after a build, by platform and outcome", "counter",
                   ("platform", "outcome"), samples)]
