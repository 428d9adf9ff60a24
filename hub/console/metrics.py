"""``GET /metrics`` in the Prometheus text format, for the tools operators already run.

Every value is read when scraped, from bookkeeping that is cheap to read (no table scans):

| metric | from |
| --- | --- |
| ``skyhub_documents{db,kind,status}`` | ``store.counts()``: counters kept in each write's transaction |
| ``skyhub_feed_behind{handler}``, ``skyhub_feed_pending{handler}`` | ``store.feed_position``: the handler's cursor against the log's head |
| ``skyhub_tick_runs_total{tick,outcome}``, ``skyhub_tick_duration_seconds{tick}`` | ``store.tick_runs``: runs finished since this process started |
| ``skyhub_tick_last_run_timestamp_seconds{tick}`` | the last run's scheduled time |
| ``skyhub_http_requests_total{route,method,status}``, ``skyhub_http_request_duration_seconds{route}`` | this process's requests, by route template |
| ``skyhub_publishes_total{platform,outcome}``, ``skyhub_replies_total{platform,outcome}`` | writes of posts and mention replies into an end state (``done``, ``error``, ...; a first comment, ``commented``, is not a second outcome), read from the change log |
| ``skyhub_credentials_needing_reauth`` | credentials whose status is ``needs-reauth`` |

The HTTP counters are per process (several ``skyhub run`` processes each report their own,
as Prometheus expects); the others describe the shared database.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.routing import BaseRoute, Match

from ledger import LedgerError

from .activity import Activity

if TYPE_CHECKING:
    from ..app import App

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
TICK_RUNS_READ = 200  # every run the store keeps per tick (ledger: TICK_RUNS_KEPT): none is missed between scrapes
PUBLISH_MACHINE = "requests/publish-request"
MENTION_MACHINE = "requests/mention"
REPLY_OUTCOMES = {"replied", "error", "skipped"}
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT"})

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class _TickRuns:
    """Tick runs finished since this process started, counted once each."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}
        self.counts: dict[tuple[str, str], int] = {}
        # per tick: runs at or under each bucket's bound, then the sum of every duration (a
        # histogram's running totals: a process that runs for months keeps a few numbers)
        self.buckets: dict[str, list[int]] = {}
        self.totals: dict[str, tuple[int, float]] = {}
        self.lock = threading.Lock()

    def _observe(self, name: str, seconds: float) -> None:
        counts = self.buckets.setdefault(name, [0] * len(BUCKETS))
        for i, bound in enumerate(BUCKETS):
            if seconds <= bound:
                counts[i] += 1
        n, total = self.totals.get(name, (0, 0.0))
        self.totals[name] = (n + 1, total + seconds)

    def update(self, app: App) -> None:
        """Count the runs of every tick that finished since the last scrape."""
        with self.lock:
            for t in app.ticks:
                runs = app.store.tick_runs(t.name, limit=TICK_RUNS_READ)
                last = self.seen.get(t.name, 0)
                for r in sorted(runs, key=lambda r: r.scheduled_at):
                    if r.finished_at is None or r.scheduled_at <= last:
                        continue
                    last = r.scheduled_at
                    key = (t.name, r.outcome or "unknown")
                    self.counts[key] = self.counts.get(key, 0) + 1
                    self._observe(t.name, max(0.0, (r.finished_at - r.started_at) / 1000))
                self.seen[t.name] = last


class StoreCollector(Collector):
    """Reads the store's bookkeeping on every scrape (see the module docstring)."""

    def __init__(self, app: App, activity: Activity) -> None:
        self.app = app
        self.activity = activity
        self.ticks = _TickRuns()

    def collect(self) -> Iterable[Metric]:
        """Every metric read from the store, as Prometheus families."""
        app = self.app
        docs = GaugeMetricFamily("skyhub_documents", "Live documents by database, kind and status", labels=["db", "kind", "status"])
        reauth = GaugeMetricFamily("skyhub_credentials_needing_reauth", "Credentials a person must paste again")
        needing = 0
        try:
            for c in app.store.counts():
                if c.db == "auth":
                    continue
                docs.add_metric([c.db, c.kind, c.status], c.n)
                if c.db == "vault" and c.kind == "credential" and c.status == "needs-reauth":
                    needing += c.n
        except LedgerError:
            pass
        reauth.add_metric([], needing)
        yield docs
        yield reauth

        behind = GaugeMetricFamily("skyhub_feed_behind", "Changes between a handler's cursor and the log's head", labels=["handler"])
        pending = GaugeMetricFamily("skyhub_feed_pending", "Changes of a handler's databases not handled yet (capped at 10,000)",
                                    labels=["handler"])
        for h in app.handlers:
            try:
                pos = app.store.feed_position(h.cursor, list(h.dbs))
            except LedgerError:
                continue
            behind.add_metric([h.name], pos.behind)
            if pos.pending is not None:
                pending.add_metric([h.name], pos.pending)
        yield behind
        yield pending

        try:
            self.ticks.update(app)
        except LedgerError:
            pass
        runs = CounterMetricFamily("skyhub_tick_runs", "Tick runs finished since this process started, by outcome", labels=["tick", "outcome"])
        durations = HistogramMetricFamily("skyhub_tick_duration_seconds", "How long tick runs took", labels=["tick"])
        last_run = GaugeMetricFamily("skyhub_tick_last_run_timestamp_seconds", "When each tick last ran (scheduled time)", labels=["tick"])
        with self.ticks.lock:
            for (name, outcome), n in sorted(self.ticks.counts.items()):
                runs.add_metric([name, outcome], n)
            for name, counts in sorted(self.ticks.buckets.items()):
                n, total = self.ticks.totals[name]
                buckets = [(str(b), c) for b, c in zip(BUCKETS, counts)] + [("+Inf", n)]
                durations.add_metric([name], buckets, total)
            for name, seen in sorted(self.ticks.seen.items()):
                if seen:
                    last_run.add_metric([name], seen / 1000)
        yield runs
        yield durations
        yield last_run

        publishes = CounterMetricFamily("skyhub_publishes", "Posts that reached an end state, by platform and outcome",
                                        labels=["platform", "outcome"])
        replies = CounterMetricFamily("skyhub_replies", "Mentions that reached an end state after a build, by platform and outcome",
                                      labels=["platform", "outcome"])
        for machine, platform, status, n in self.activity.outcome_counts():
            if machine == PUBLISH_MACHINE:
                publishes.add_metric([platform, status], n)
            elif machine == MENTION_MACHINE and status in REPLY_OUTCOMES:
                replies.add_metric([platform or "bsky", status], n)
        yield publishes
        yield replies


class Metrics:
    """The registry behind ``/metrics`` and the HTTP middleware that feeds it."""

    def __init__(self, app: App, activity: Activity) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(StoreCollector(app, activity))
        self.requests = Counter("skyhub_http_requests", "HTTP requests by route template, method and status",
                                ["route", "method", "status"], registry=self.registry)
        self.latency = Histogram("skyhub_http_request_duration_seconds", "HTTP request time by route template", ["route"],
                                 registry=self.registry, buckets=BUCKETS[:10])

    def scrape(self) -> bytes:
        """The whole text exposition."""
        return generate_latest(self.registry)

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count one HTTP request (a method outside HTTP's standard ones counts as ``other``, a status outside
        100-599 as ``other``: a client cannot make up label values)."""
        status_label = str(status) if 100 <= status <= 599 else "other"
        self.requests.labels(route, method if method in METHODS else "other", status_label).inc()
        self.latency.labels(route).observe(seconds)


def route_of(routes: Sequence[BaseRoute], scope: Scope) -> str:
    """The route template a request matches (``/v1/db/{db}/docs/{doc_id:path}``), or ``other``,
    so the labels stay few whatever paths clients send."""
    for route in routes:
        try:
            match, _ = route.matches(scope)
        except Exception:  # noqa: BLE001 - a route that cannot read this scope does not match it
            continue
        if match == Match.FULL:
            return str(getattr(route, "path", "other"))
    return "other"


class Measured:
    """ASGI wrapper counting each request by route template, method and status; ``routes`` gives
    the routes to match, asked for each request."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], metrics: Metrics,
                 routes: Callable[[], Sequence[BaseRoute]]) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI: pass the request on and count it (500 when it fails before its answer starts); other scopes
        pass uncounted."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: MutableMapping[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = route_of(self.routes(), scope)
            self.metrics.observe(route, str(scope.get("method", "")), status, time.perf_counter() - started)


__all__ = ["CONTENT_TYPE", "Measured", "Metrics", "StoreCollector", "route_of"]
