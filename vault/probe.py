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
    from platforms.fetcher import Fetcher

log = logging.getLogger(__name__)
DB = "probes"
PROBE_BYTES = 1024 * 1024  # the most of a lane's answer that is read (a health answer is a few bytes)


def default_lanes(platforms: Any) -> dict[str, str]:
    """A lane per platform where the ``[platforms]`` settings say they are."""
    return {
        "bluesky-pds": f"{platforms.bluesky_pds}/xrpc/_health",
        "graph-api": f"{platforms.facebook_url}/",
        "threads": f"{platforms.threads_url}/",
    }


def probe_tick(event: TickEvent, ctx: Context) -> dict[str, bool]:
    """The ``probe`` tick: one cheap request per lane in ``[probe.lanes]``."""
    return Prober(ctx.db, dict(ctx.settings.lanes), ctx.fetch, timeout=ctx.settings.timeout).run()


class Prober:
    """Probes lanes and records each in ``probes``: ``lanes`` maps a lane's name to its URL, ``db`` is
    bound to ``tick:probe``, ``fetch`` is the guarded fetcher, ``timeout`` is in seconds per request.

    A lane's URL is the operator's own setting, so its first hop may be http or a private address
    (a PDS on the same network); a redirect from it is checked like any fetch."""

    def __init__(self, db: Ledger, lanes: dict[str, str], fetch: Fetcher, timeout: float = 5.0) -> None:
        self.db = db  # bound to tick:probe
        self.lanes = lanes
        self.fetch = fetch
        self.timeout = timeout

    def run(self) -> dict[str, bool]:
        """Probe every lane once: whether each is reachable, by lane name."""
        return {lane: self.probe(lane, url) for lane, url in self.lanes.items()}

    def probe(self, lane: str, url: str) -> bool:
        """Request ``url`` once and record the result as ``probes/<lane>``; whether it answered below 500.
        A write that loses a race with another prober is dropped."""
        from platforms.errors import PlatformError

        started = time.perf_counter()
        error = None
        try:
            got = self.fetch.get(url, what=f"lane {lane}", timeout=self.timeout, max_bytes=PROBE_BYTES, trusted=True)
            ok = got.status < 500
            if not ok:
                error = f"HTTP {got.status}"
        except PlatformError as exc:
            ok, error = False, exc.reason[:300]
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
