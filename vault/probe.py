"""Egress probes: one cheap request per API lane, one document per lane in ``probes``.

A lane is reachable when it answers at all below 500 (an auth error from a probe without a
token still proves the network path works); timeouts, connection errors and 5xx are not.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from ledger import Conflict, Context, Ledger, NotFound, TickEvent

if TYPE_CHECKING:  # httpx loads with the probe tick, not with the vault
    import httpx

log = logging.getLogger(__name__)
DB = "probes"


def default_lanes(endpoints: Any) -> dict[str, str]:
    """A lane per platform at the given endpoints (``vault.checks.Endpoints``)."""
    return {
        "bluesky-pds": f"{endpoints.bluesky_pds}/xrpc/_health",
        "graph-api": f"{endpoints.facebook}/",
        "threads": f"{endpoints.threads}/",
    }


def probe_tick(event: TickEvent, ctx: Context) -> dict[str, bool]:
    """The ``probe`` tick: one cheap request per lane in ``[probe.lanes]``."""
    return Prober(ctx.db, dict(ctx.settings.lanes), ctx.http, timeout=ctx.settings.timeout).run()


class Prober:
    """Probes lanes and records each in ``probes``: ``lanes`` maps a lane's name to its URL, ``db`` is
    bound to ``tick:probe``, ``timeout`` is in seconds per request."""

    def __init__(self, db: Ledger, lanes: dict[str, str], client: httpx.Client, timeout: float = 5.0) -> None:
        self.db = db  # bound to tick:probe
        self.lanes = lanes
        self.client = client
        self.timeout = timeout

    def run(self) -> dict[str, bool]:
        """Probe every lane once: whether each is reachable, by lane name."""
        return {lane: self.probe(lane, url) for lane, url in self.lanes.items()}

    def probe(self, lane: str, url: str) -> bool:
        """Request ``url`` once and record the result as ``probes/<lane>``; whether it answered below 500.
        A write that loses a race with another prober is dropped."""
        import httpx

        started = time.perf_counter()
        error = None
        try:
            response = self.client.get(url, timeout=self.timeout)
            ok = response.status_code < 500
            if not ok:
                error = f"HTTP {response.status_code}"
        except httpx.TimeoutException:
            ok, error = False, "timed out"
        except httpx.TransportError as exc:
            ok, error = False, f"{type(exc).__name__}: {exc}"[:300]
        latency = round((time.perf_counter() - started) * 1000, 1)
        now = self.db.now()
        body = {"kind": "probe", "lane": lane, "url": url, "ok": ok, "latencyMs": latency, "lastError": error, "checkedAt": now}
        try:
            head = self.db.get(DB, lane)
            if not ok:
                body["lastOkAt"] = head.get("lastOkAt")
            else:
                body["lastOkAt"] = now
            self.db.put(DB, body, lane, if_rev=head["_rev"])
        except NotFound:
            body["lastOkAt"] = now if ok else None
            try:
                self.db.put(DB, body, lane, create_only=True)
            except Conflict:
                pass
        except Conflict:
            pass  # another process probed at the same moment
        if not ok:
            log.warning("probe %s failed: %s", lane, error, extra={"lane": lane})
        return ok
