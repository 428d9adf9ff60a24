"""What publishing adds to ``/metrics`` (``PUBLISHERS.metrics``): posts that reached an end state."""

from __future__ import annotations

from collections.abc import Sequence

from ledger import Metric, Readings

from .machine import PUBLISH


def metrics(readings: Readings) -> Sequence[Metric]:
    """``skyhub_publishes_total{platform,outcome}``: posts that ended (done, error, ...) since the hub started; a first
    comment (``commented``) follows ``done`` and is not a second outcome."""
    samples = [((platform, status), float(n)) for machine, platform, status, n in readings.outcomes() if machine == PUBLISH.name]
    return [Metric("skyhub_publishes", "Posts that reached an end state, by platform and outcome", "counter",
                   ("platform", "outcome"), samples)]
