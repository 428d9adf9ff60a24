"""The composition root: one store, the products' machines, handlers and ticks, and the
threads that run them. It holds no product logic: every product is a ``Product`` declaration
(``hub/products.py`` lists them), and this module only composes what they declare.

``hub/server.py`` serves an ``App`` over HTTP (``skyhub run``); the CLI builds one for
``skyhub tick``.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger import (
    Clock,
    Context,
    Feed,
    Handler,
    Ledger,
    LedgerError,
    Offered,
    Product,
    Rules,
    Scheduler,
    Services,
    Store,
    Tick,
    Usage,
    deadletter_machine,
    open_store,
)
from ledger.actor import ADMIN
from ledger.actor import tick as tick_actor
from ledger.bulk import audit_machine
from ledger.context import make_context
from ledger.lease import Sweeper
from ledger.pause import PAUSE
from ledger.replay import replayer
from ledger.sql import redact_url
from ledger.text import duration

from .auth import protect
from .products import products
from .samples import HELP as SAMPLE_HELP
from .samples import SAMPLES_DB, take_sample
from .settings import Settings

log = logging.getLogger(__name__)


def build_rules(known: Sequence[Product] | None = None) -> Rules:
    """Every machine, write policy and index the products declare, plus the engine's own."""
    rules = Rules([deadletter_machine(), audit_machine(), PAUSE])
    rules.allow(SAMPLES_DB, free=(tick_actor("sample"), ADMIN), blind=(tick_actor("sample"), ADMIN))  # the depth ring (hub/samples.py)
    for product in products() if known is None else known:
        product.declare(rules)
    protect(rules)
    return rules


def open_app_store(settings: Settings, rules: Rules | None, clock: Clock) -> Store:
    """The store the settings name, with ``rules`` (None: every product's), on ``clock``."""
    s = settings.store
    rules = rules if rules is not None else build_rules()
    rules.configure(settings.section)  # guards judge writes with the hub's real settings (image hosts, fetch policy)
    for name in s.indexes:
        db, dot, field = name.partition(".")
        if not dot:
            raise Usage(f"store.indexes: {name!r} is not db.field (e.g. \"requests.slug\")")
        rules.index(db, field)
    return open_store(settings.database_url, rules, clock,
                      pool_size=s.pool_size or None, statement_timeout=s.statement_timeout, connect_timeout=s.connect_timeout)


def offered(settings: Settings, known: Sequence[Product] | None = None) -> dict[str, Offered]:
    """What each product offers (``Product.services``), by product name."""
    return {p.name: p.offered(settings) for p in (products() if known is None else known)}


def services_for(settings: Settings, offers: dict[str, Offered] | None = None) -> Services:
    """The vault (as each actor sees it, from the product that offers secrets), the HTTP client and the
    guarded fetcher every tick and handler shares."""
    offers = offers if offers is not None else offered(settings)
    secrets = next((o.secrets for o in offers.values() if o.secrets is not None), None)
    return Services(vault=secrets, http=_Lazy(lambda: _http(settings.platforms.timeout)),  # type: ignore[arg-type]
                    platforms=settings.platforms, fetch=_Lazy(lambda: _fetcher(settings.fetch)))


class _Lazy:
    """A service made on first use (``make()``), so a hub whose ticks never call out never imports httpx's stack."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self._made: Any = None
        self._lock = threading.Lock()

    def _get(self) -> Any:
        with self._lock:
            if self._made is None:
                self._made = self._make()
            return self._made

    def __getattr__(self, name: str) -> Any:
        return getattr(self._get(), name)

    def close(self) -> None:
        """Close what was made (nothing was, if nothing asked for it)."""
        with self._lock:
            if self._made is not None and hasattr(self._made, "close"):
                self._made.close()
            self._made = None


def _http(timeout: float) -> Any:
    import httpx

    return httpx.Client(timeout=timeout, headers={"User-Agent": "skyhub"})


def _fetcher(section: Any) -> Any:
    from platforms.fetcher import Fetcher, FetchPolicy

    return Fetcher(FetchPolicy.of(section))


@dataclass
class App:
    """A hub process: the store, the feed, the sweep and the scheduler over what the products declare."""

    settings: Settings
    store: Store
    rules: Rules
    products: tuple[Product, ...]
    services: Services
    handlers: list[Handler]
    feed: Feed
    sweeper: Sweeper
    scheduler: Scheduler
    clock: Clock  # the one clock: the store, the feed, the scheduler, the sweep, the gate and the sessions read it
    ticks: list[Tick] = field(default_factory=list)
    offers: dict[str, Offered] = field(default_factory=dict)  # what each product offers, by name
    stopping: threading.Event = field(default_factory=threading.Event)
    _stopped: threading.Event = field(default_factory=threading.Event)

    @property
    def pausable(self) -> dict[str, str]:
        """What the products let a person pause besides a tick: platform -> what waits meanwhile (``ledger/pause.py``)."""
        return {scope: why for p in self.products for scope, why in p.pausable.items()}

    def start(self) -> None:
        """Start the feed, the sweep and the scheduler, each in threads of its own."""
        self._started = True
        self.feed.start()
        self.sweeper.start()
        self.scheduler.start()
        log.info(
            "skyhub running on %s: handlers %s; ticks %s",
            redact_url(self.store.url),
            ", ".join(h.name for h in self.handlers) or "none",
            ", ".join(f"{t.name} every {duration(t.seconds)}" for t in self.ticks) or "none",
        )

    def stop(self) -> None:
        """Stop the scheduler (waiting for running ticks), the sweep and the feed, then close the HTTP client
        and the store. ``stopping`` is set first, so open streams end; calling it again does nothing more."""
        self.stopping.set()
        if self._stopped.is_set():
            return
        self._stopped.set()
        self.scheduler.stop(wait=True)
        self.sweeper.stop()
        self.feed.stop()
        http = self.services.http
        if isinstance(http, _Lazy):
            http.close()
        self.store.close()
        if getattr(self, "_started", False):
            log.info("skyhub stopped")

    def context(self, product: str, actor: str) -> Context:
        """A context for a backend ``actor`` of ``product`` (``tick:vault`` for "verify now")."""
        return make_context(Ledger(self.store, actor, self.clock), actor.partition(":")[2] or actor, self.services,
                            settings=self.settings.section(product))

    def notices(self) -> list[str]:
        """The lines the products want said when the hub starts (the vault has no key yet, ...)."""
        return [line for o in self.offers.values() if o.notice is not None and (line := o.notice())]

    def health(self) -> dict[str, Any]:
        """Store, feed, scheduler and vault state, for /health and the console."""
        store: dict[str, Any] = {"url": redact_url(self.store.url)}
        try:
            # a ping within its own budget first: a stalled database is reported, not waited for
            store.update(ok=True, pingMs=round(self.store.ping(0.8) * 1000, 1), headSeq=self.store.head_seq())
        except LedgerError as exc:
            store.update(ok=False, error=exc.reason)
        handlers = []
        for h in self.handlers:
            entry: dict[str, Any] = {"name": h.name, "dbs": list(h.dbs)}
            if store["ok"]:
                try:
                    pos = self.store.feed_position(h.cursor)
                    entry.update(done=pos.done, claimed=pos.claimed, inFlight=len(pos.leases))
                except LedgerError:
                    pass
            handlers.append(entry)
        ticks = []
        for t in self.ticks:
            entry = {"name": t.name, "every": t.every}
            runs = self.store.tick_runs(t.name, limit=1) if store["ok"] else []
            if runs:
                r = runs[0]
                entry["lastRun"] = {"scheduledAt": r.scheduled_at, "finishedAt": r.finished_at, "outcome": r.outcome, "error": r.error}
            ticks.append(entry)
        sections: dict[str, Any] = {}
        for name, o in self.offers.items():  # each product's own part (the vault: its key)
            if o.health is not None:
                try:
                    sections[name] = o.health(self.store)
                except LedgerError as exc:
                    sections[name] = {"ok": False, "reason": exc.reason}
        feed_ok = self.feed.running or not self.handlers
        sched_ok = self.scheduler.running or not self.ticks
        products_ok = all(bool(section.get("ok")) for section in sections.values())
        return {
            "ok": bool(store["ok"] and feed_ok and sched_ok and products_ok and not self.stopping.is_set()),
            "store": store,
            "feed": {"running": self.feed.running, "handlers": handlers},
            "scheduler": {"running": self.scheduler.running, "ticks": ticks},
            "sweep": {"returned": self.sweeper.returned, "failed": self.sweeper.failed},
            **sections,
        }


SWEEP_HELP = "takes back expired leases (the hub also wakes it at the earliest lease)"


def tick_help(known: Sequence[Product] | None = None) -> dict[str, str]:
    """Every tick a hub can run, and what it does."""
    out = {"sweep": SWEEP_HELP, "sample": SAMPLE_HELP}
    for product in products() if known is None else known:
        out.update(product.tick_help)
    return out


def build_app(settings: Settings, *, clock: Clock, services: Services | None = None) -> App:
    """Compose the products the settings configure into one hub process, every part on ``clock``, which the
    caller makes (``skyhub``'s entry point: the wall clock; a test: a fake clock, which then moves them all)."""
    known = products()
    rules = build_rules(known)
    store = open_app_store(settings, rules, clock)
    offers = offered(settings, known)
    services = services or services_for(settings, offers)
    f = settings.feed
    handlers: list[Handler] = []
    ticks: list[Tick] = []
    sweeper = Sweeper(store, rules, clock=clock, safety_interval=settings.sweep.safety_interval)
    ticks.append(Tick("sweep", settings.sweep.safety_interval, lambda event, ctx: sweeper.sweep_once()))
    kept = settings.activity.samples_kept
    ticks.append(Tick("sample", 60.0, lambda event, ctx: take_sample(store, rules, clock.now_ms(), kept)))
    for product in known:
        section = settings.section(product.name) if product.settings is not None else None
        made = list(product.ticks(section))
        undocumented = [t.name for t in made if t.name not in product.tick_help]
        if undocumented:
            raise LedgerError(f"product {product.name} runs tick {undocumented[0]!r} without saying what it does (tick_help)")
        ticks.extend(made)
        handlers.extend(
            dataclasses.replace(h, max_tries=f.max_tries, timeout=f.handler_timeout, backoff=f.backoff)
            for h in product.handlers(section)
        )
    names = [t.name for t in ticks]
    if len(set(names)) != len(names):
        raise LedgerError(f"two ticks share a name: {sorted(n for n in names if names.count(n) > 1)[0]!r}")
    if handlers:  # a person's replay of a dead letter goes to the handler that gave up (ledger.replay)
        replay = dataclasses.replace(replayer(handlers, services), max_tries=f.max_tries, timeout=f.handler_timeout, backoff=f.backoff)
        fed = [*handlers, replay]
    else:
        fed = []
    feed = Feed(store, fed, clock=clock, lease_ms=int(f.lease * 1000), batch_size=f.batch_size, services=services)
    scheduler = Scheduler(store, ticks, clock=clock, owner=feed.owner, services=services)
    return App(settings, store, rules, known, services, handlers, feed, sweeper, scheduler, clock, ticks, offers)
