"""``GET /metrics`` in the Prometheus text format, for the tools operators already run.

Every value is read when scraped, from bookkeeping that is cheap to read (no table scans):

| metric | from |
| --- | --- |
| ``skyhub_documents{db,kind,status}`` | ``store.counts()``: counters kept in each write's transaction |
| ``skyhub_feed_behind{handler}``, ``skyhub_feed_pending{handler}`` | ``store.feed_position``: the handler's cursor against the log's head |
| ``skyhub_tick_runs_total{tick,outcome}``, ``skyhub_tick_duration_seconds{tick}`` | ``store.tick_runs``: runs finished since this process started |
| ``skyhub_tick_last_run_timestamp_seconds{tick}`` | the last run's scheduled time |
| ``skyhub_paused{target}`` | the ``pauses`` database's status index: 1 per paused tick, platform or account |
| ``skyhub_http_requests_total{route,method,status}``, ``skyhub_http_request_duration_seconds{route}`` | this process's requests, by route template |

and what each product adds (``Product.metrics``: a function of ``ledger.Readings``, the store's
counts read once a scrape and the terminal writes the console's activity reader counts from
the change log, returning ``ledger.Metric`` families). The HTTP counters are per process (several ``skyhub run`` processes each report their own,
as Prometheus expects); the others describe the shared database.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

from starlette.routing import BaseRoute, Match

from ledger import Handler, LedgerError, Metric, Product, Readings, StatusCount, Store, Tick
from ledger.pause import paused

from ..auth import AUTH_DB

if TYPE_CHECKING:  # prometheus_client is imported on the first scrape: a hub nobody scrapes never loads it
    from prometheus_client.core import Metric as Metric_

    from .activity import Activity

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
HTTP_BUCKETS = BUCKETS[:10]
TICK_RUNS_READ = 200  # every run the store keeps per tick (ledger: TICK_RUNS_KEPT): none is missed between scrapes
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

    def update(self, store: Store, ticks: Sequence[Tick]) -> None:
        """Count the runs of every tick that finished since the last scrape."""
        with self.lock:
            for t in ticks:
                runs = store.tick_runs(t.name, limit=TICK_RUNS_READ)
                last = self.seen.get(t.name, 0)
                for r in sorted(runs, key=lambda r: r.scheduled_at):
                    if r.finished_at is None or r.scheduled_at <= last:
                        continue
                    last = r.scheduled_at
                    key = (t.name, r.outcome or "unknown")
                    self.counts[key] = self.counts.get(key, 0) + 1
                    self._observe(t.name, max(0.0, (r.finished_at - r.started_at) / 1000))
                self.seen[t.name] = last


class _Readings:
    """What the products' metrics read on one scrape (``ledger.Readings``)."""

    def __init__(self, counts: Sequence[StatusCount], activity: Activity) -> None:
        self._counts = counts
        self._activity = activity

    def counts(self) -> Sequence[StatusCount]:
        return self._counts

    def outcomes(self) -> Sequence[tuple[str, str, str, int]]:
        return self._activity.outcome_counts()


def family(metric: Metric) -> Metric_:
    """A product's ``ledger.Metric`` as a Prometheus family."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    made: GaugeMetricFamily | CounterMetricFamily
    if metric.kind == "counter":
        made = CounterMetricFamily(metric.name, metric.help, labels=list(metric.labels))
    else:
        made = GaugeMetricFamily(metric.name, metric.help, labels=list(metric.labels))
    for values, value in metric.samples:
        made.add_metric(list(values), value)
    return made


class StoreCollector:
    """Reads the store's bookkeeping on every scrape (see the module docstring), then what each product adds."""

    def __init__(self, store: Store, handlers: Sequence[Handler], ticks: Sequence[Tick], products: Sequence[Product],
                 activity: Activity) -> None:
        self.store = store
        self.handlers = handlers
        self.ticks_run = ticks
        self.products = products
        self.activity = activity
        self.ticks = _TickRuns()
        self._readers: list[Callable[[Readings], Sequence[Metric]]] | None = None

    def readers(self) -> list[Callable[[Readings], Sequence[Metric]]]:
        """The products' metrics functions (imported on the first scrape)."""
        if self._readers is None:
            self._readers = [r for p in self.products if (r := p.metric_reader()) is not None]
        return self._readers

    def collect(self) -> Iterable[Metric_]:
        """Every metric read from the store, then the products', as Prometheus families."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
        store = self.store
        docs = GaugeMetricFamily("skyhub_documents", "Live documents by database, kind and status", labels=["db", "kind", "status"])
        try:
            counts = [c for c in store.counts() if c.db != AUTH_DB]  # sessions and tokens stay private
        except LedgerError:
            counts = []
        for c in counts:
            docs.add_metric([c.db, c.kind, c.status], c.n)
        yield docs

        behind = GaugeMetricFamily("skyhub_feed_behind", "Changes between a handler's cursor and the log's head", labels=["handler"])
        pending = GaugeMetricFamily("skyhub_feed_pending", "Changes of a handler's databases not handled yet (capped at 10,000)",
                                    labels=["handler"])
        for h in self.handlers:
            try:
                pos = store.feed_position(h.cursor, list(h.dbs))
            except LedgerError:
                continue
            behind.add_metric([h.name], pos.behind)
            if pos.pending is not None:
                pending.add_metric([h.name], pos.pending)
        yield behind
        yield pending

        try:
            self.ticks.update(store, self.ticks_run)
        except LedgerError:
            pass
        runs = CounterMetricFamily("skyhub_tick_runs", "Tick runs finished since this process started, by outcome", labels=["tick", "outcome"])
        durations = HistogramMetricFamily("skyhub_tick_duration_seconds", "How long tick runs took", labels=["tick"])
        last_run = GaugeMetricFamily("skyhub_tick_last_run_timestamp_seconds", "When each tick last ran (scheduled time)", labels=["tick"])
        with self.ticks.lock:
            for (name, outcome), n in sorted(self.ticks.counts.items()):
                runs.add_metric([name, outcome], n)
            for name, counts_ in sorted(self.ticks.buckets.items()):
                n, total = self.ticks.totals[name]
                buckets = [(str(b), c) for b, c in zip(BUCKETS, counts_)] + [("+Inf", n)]
                durations.add_metric([name], buckets, total)
            for name, seen in sorted(self.ticks.seen.items()):
                if seen:
                    last_run.add_metric([name], seen / 1000)
        yield runs
        yield durations
        yield last_run

        stopped = GaugeMetricFamily("skyhub_paused", "1 for each tick, platform or account paused now (skyhub pause)",
                                    labels=["target"])
        try:
            for target in sorted(paused(store)):
                stopped.add_metric([target], 1)
        except LedgerError:
            pass
        yield stopped

        readings = _Readings(counts, self.activity)
        for read in self.readers():
            for metric in read(readings):
                yield family(metric)


class Metrics:
    """The HTTP request counts behind ``/metrics`` (kept as plain numbers: ``Measured`` counts every request from
    the first, and prometheus_client is imported only when ``/metrics`` is first scraped) and, once the console is
    made, the store's collector (``collector``)."""

    def __init__(self, now_ms: Callable[[], int], collector: StoreCollector | None = None) -> None:
        self.now_ms = now_ms  # the hub's clock: when each series was first counted (its ``_created``)
        self.collector = collector
        self._lock = threading.Lock()
        self._requests: dict[tuple[str, str, str], list[float]] = {}  # labels -> [count, created]
        self._latency: dict[str, tuple[list[int], list[float]]] = {}  # route -> (per-bucket counts, [sum, count, created])
        self._registry: Any = None

    def scrape(self) -> bytes:
        """The whole text exposition: the store's families, then the HTTP requests and their times."""
        from prometheus_client import CollectorRegistry, generate_latest
        with self._lock:
            if self._registry is None:
                self._registry = CollectorRegistry(auto_describe=False)
                self._registry.register(self)
            registry = self._registry
        return generate_latest(registry)

    def collect(self) -> Iterable[Metric_]:
        """What a ``prometheus_client`` registry asks for: as its ``Counter`` and ``Histogram`` would expose them."""
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
        if self.collector is not None:
            yield from self.collector.collect()
        requests = CounterMetricFamily("skyhub_http_requests", "HTTP requests by route template, method and status",
                                       labels=["route", "method", "status"])
        latency = HistogramMetricFamily("skyhub_http_request_duration_seconds", "HTTP request time by route template",
                                        labels=["route"])
        bounds = [repr(float(b)) for b in HTTP_BUCKETS] + ["+Inf"]  # as prometheus_client writes them ("1.0")
        with self._lock:
            for labels, (n, created) in self._requests.items():
                requests.add_metric(list(labels), n, created=created)
            for route, (counts, (total, _n, created)) in self._latency.items():
                running, buckets = 0, []
                for bound, c in zip(bounds, counts):
                    running += c
                    buckets.append((bound, running))
                latency.add_metric([route], buckets, total)
                latency.add_sample("skyhub_http_request_duration_seconds_created", {"route": route}, created)
        yield requests
        yield latency

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count one HTTP request (a method outside HTTP's standard ones counts as ``other``, a status outside
        100-599 as ``other``: a client cannot make up label values)."""
        status_label = str(status) if 100 <= status <= 599 else "other"
        key = (route, method if method in METHODS else "other", status_label)
        slot = next((i for i, bound in enumerate(HTTP_BUCKETS) if seconds <= bound), len(HTTP_BUCKETS))
        with self._lock:
            counted = self._requests.get(key)
            if counted is None:
                self._requests[key] = [1.0, self.now_ms() / 1000]
            else:
                counted[0] += 1
            timed = self._latency.get(route)
            if timed is None:
                timed = self._latency[route] = ([0] * (len(HTTP_BUCKETS) + 1), [0.0, 0.0, self.now_ms() / 1000])
            timed[0][slot] += 1
            timed[1][0] += seconds
            timed[1][1] += 1


def route_of(routes: Sequence[BaseRoute], scope: Scope) -> str:
    """The route template a request matches (``/v1/db/{db}/docs/{doc_id:path}``), or ``other``,
    so the labels stay few whatever paths clients send. A router included whole (FastAPI's ``include_router``
    keeps it as one route: the API's topics, each product's) is looked into."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:  # no prefix is given to include_router here: its routes' paths are whole
            found = route_of(included.routes, scope)
            if found != "other":
                return found
            continue
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


__all__ = ["CONTENT_TYPE", "Measured", "Metrics", "StoreCollector", "family", "route_of"]
