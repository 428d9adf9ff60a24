"""The composition root: one store, the registered machines, handlers and ticks, and the
threads that run them (`skyhub run`)."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from ledger import Feed, Handler, Rules, Scheduler, Tick, deadletter_machine, open_store
from ledger.jobs import JOBS, jobs_handler
from ledger.lease import Sweeper
from ledger.sql import SQLStore, redact_url

from .settings import Settings

log = logging.getLogger(__name__)


def build_rules() -> Rules:
    """Every machine skyhub knows. Later products declare theirs here."""
    return Rules([JOBS, deadletter_machine()])


@dataclass
class App:
    settings: Settings
    store: SQLStore
    rules: Rules
    handlers: list[Handler]
    feed: Feed
    sweeper: Sweeper
    scheduler: Scheduler
    ticks: list[Tick] = field(default_factory=list)
    _stopped: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        self.feed.start()
        self.sweeper.start()
        self.scheduler.start()
        log.info(
            "skyhub running on %s: handlers %s; ticks %s",
            redact_url(self.store.url),
            ", ".join(h.name for h in self.handlers) or "none",
            ", ".join(f"{t.name} every {t.every}" for t in self.ticks) or "none",
        )

    def stop(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        self.scheduler.stop(wait=True)
        self.sweeper.stop()
        self.feed.stop()
        self.store.close()
        log.info("skyhub stopped")


def open_app_store(settings: Settings, rules: Rules | None = None) -> SQLStore:
    return open_store(settings.database_url, rules if rules is not None else build_rules())


def build_app(settings: Settings) -> App:
    rules = build_rules()
    store = open_app_store(settings, rules)
    f = settings.feed
    handlers = [
        jobs_handler(
            lease_ms=int(settings.jobs.lease * 1000),
            max_tries=f.max_tries, timeout=f.handler_timeout, backoff=f.backoff,
        )
    ]
    feed = Feed(store, handlers, lease_ms=int(f.lease * 1000), batch_size=f.batch_size)
    sweeper = Sweeper(store, rules, safety_interval=settings.sweep.safety_interval)
    ticks = [Tick("sweep", settings.sweep.safety_interval, lambda event, ctx: sweeper.sweep_once())]
    scheduler = Scheduler(store, ticks, owner=feed.owner)
    return App(settings, store, rules, handlers, feed, sweeper, scheduler, ticks)
