"""What the vault adds to ``/metrics`` (``VAULT.metrics``): the credentials a person must paste again."""

from __future__ import annotations

from collections.abc import Sequence

from ledger import Metric, Readings

from .credentials import CREDENTIALS, DB


def metrics(readings: Readings) -> Sequence[Metric]:
    """``skyhub_credentials_needing_reauth``, from the store's live counts."""
    needing = sum(c.n for c in readings.counts() if (c.db, c.kind, c.status) == (DB, CREDENTIALS.kind, "needs-reauth"))
    return [Metric("skyhub_credentials_needing_reauth", "Credentials a person must paste again", samples=[((), needing)])]
