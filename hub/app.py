"""The composition root: one store, the registered machines, handlers and ticks, the HTTP
API, and the threads that run them (`skyhub run`)."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from bot import MENTIONS, STATE_DB, Guardrails, Ingester, Replier
from bot.bluesky import Bluesky
from ledger import (
    ADMIN,
    Feed,
    Handler,
    Ledger,
    LedgerError,
    Rules,
    Scheduler,
    Services,
    Tick,
    deadletter_machine,
    open_store,
    tick,
    user,
)
from ledger.jobs import JOBS, jobs_handler
from ledger.lease import Sweeper
from ledger.sql import SQLStore, redact_url
from vault import CREDENTIALS, Endpoints, Maintainer, MasterKey, Platforms, Policy, Prober, Vault, load_master_key
from vault.probe import DB as PROBES

from .auth import protect
from .settings import Settings

log = logging.getLogger(__name__)


def build_rules() -> Rules:
    """Every machine skyhub knows. Later products declare theirs here."""
    rules = Rules([JOBS, deadletter_machine(), CREDENTIALS, MENTIONS])
    rules.allow(PROBES, free=[tick("probe"), user(), ADMIN], blind=[user(), ADMIN])
    rules.allow(STATE_DB, free=[tick("ingest"), user(), ADMIN])
    protect(rules)
    return rules


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
    master_key: Any = None
    maintainer: Maintainer | None = None
    stopping: threading.Event = field(default_factory=threading.Event)
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
        self.stopping.set()
        if self._stopped.is_set():
            return
        self._stopped.set()
        self.scheduler.stop(wait=True)
        self.sweeper.stop()
        self.feed.stop()
        self.store.close()
        log.info("skyhub stopped")

    def verify_credential(self, cred_id: str) -> dict[str, Any]:
        """Check a credential with its platform now (``vault put --verify``); its metadata after."""
        assert self.maintainer is not None
        from vault import DB as VAULT_DB
        from vault import public

        self.maintainer.maintain(self.store.get(VAULT_DB, cred_id))
        return public(self.store.get(VAULT_DB, cred_id))

    def health(self) -> dict[str, Any]:
        """Store, feed and scheduler state, for /health and the console."""
        store: dict[str, Any] = {"url": redact_url(self.store.url)}
        try:
            store.update(ok=True, headSeq=self.store.head_seq())
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
        feed_ok = self.feed.running or not self.handlers
        sched_ok = self.scheduler.running or not self.ticks
        return {
            "ok": bool(store["ok"] and feed_ok and sched_ok and not self.stopping.is_set()),
            "store": store,
            "feed": {"running": self.feed.running, "handlers": handlers},
            "scheduler": {"running": self.scheduler.running, "ticks": ticks},
            "sweep": {"returned": self.sweeper.returned, "failed": self.sweeper.failed},
        }

    def serve(self, host: str, port: int, on_ready: Any = None) -> None:
        """Serve the API until SIGTERM/SIGINT, with the feed, sweep and scheduler running.

        The server runs in a thread and the main thread owns the signals, so a stop always
        goes through ``stop()``: the API finishes its requests, in-flight handlers finish or
        are left to their leases, and the store closes. (uvicorn in the main thread would
        re-raise the signal and end the process before that.)
        """
        import signal

        from .api import create_api
        from .server import make_server

        server = make_server(create_api(self), host, port, self.settings)  # the limits: hub/server.py
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        self.start()
        thread = threading.Thread(target=server.run, name="api", daemon=True)
        thread.start()
        try:
            while not server.started:
                if not thread.is_alive():
                    raise LedgerError(f"the API could not start on {host}:{port} (is the port taken?)")
                if stop.wait(0.05):
                    break
            if server.started and on_ready:
                bound = server.servers[0].sockets[0].getsockname()
                on_ready(f"http://{bound[0]}:{bound[1]}")
            while not stop.wait(0.5) and thread.is_alive():
                pass
        finally:
            self.stopping.set()
            server.should_exit = True
            thread.join(10)
            self.stop()


def open_app_store(settings: Settings, rules: Rules | None = None) -> SQLStore:
    return open_store(settings.database_url, rules if rules is not None else build_rules())


class KeyLoader:
    """Loads the vault's master key on first use, so a hub without one still runs its
    engine; the vault tick and vault writes then fail with the reason and the remedy."""

    def __init__(self, key_file: str) -> None:
        self.key_file = key_file
        self._key: MasterKey | None = None

    def __call__(self) -> MasterKey:
        if self._key is None:
            self._key = load_master_key(self.key_file or None)
        return self._key


def platforms_for(settings: Settings) -> Platforms:
    v = settings.vault
    endpoints = Endpoints(bluesky_pds=v.bluesky_pds, instagram=v.instagram_url, threads=v.threads_url, graph=v.graph_url)
    return Platforms(endpoints, attempts=v.retries, wait=v.retry_wait)


def vault_policy(settings: Settings) -> Policy:
    v = settings.vault
    return Policy(
        refresh_after_ms=int(v.refresh_after * 1000), min_age_ms=int(v.min_age * 1000),
        bluesky_refresh_before_ms=int(v.bluesky_refresh_before * 1000), create_session_budget=v.create_session_budget,
    )


def build_app(settings: Settings) -> App:
    rules = build_rules()
    store = open_app_store(settings, rules)
    f = settings.feed
    handlers = []
    if settings.jobs.enabled:
        handlers.append(
            jobs_handler(
                lease_ms=int(settings.jobs.lease * 1000),
                max_tries=f.max_tries, timeout=f.handler_timeout, backoff=f.backoff,
            )
        )
    key = KeyLoader(settings.vault.key_file)
    services = Services(vault=lambda db: Vault(db, key))
    feed = Feed(store, handlers, lease_ms=int(f.lease * 1000), batch_size=f.batch_size, services=services)
    sweeper = Sweeper(store, rules, safety_interval=settings.sweep.safety_interval)
    maintainer = Maintainer(Ledger(store, "tick:vault"), key, platforms_for(settings), vault_policy(settings))
    ticks = [
        Tick("sweep", settings.sweep.safety_interval, lambda event, ctx: sweeper.sweep_once()),
        Tick("vault", settings.vault.every, maintainer.run),
    ]
    if settings.bot.handle:
        b = settings.bot

        def session_as(actor: str) -> Any:
            def session() -> Bluesky:
                # the vault tick keeps this session fresh; the bot only uses it
                secret = Vault(Ledger(store, actor), key).reveal(f"bluesky:{b.handle}")
                if "session" not in secret:
                    from vault import NeedsReauth

                    raise NeedsReauth(f"bluesky:{b.handle} has no session yet: the vault tick makes one after the paste is verified")
                return Bluesky(b.pds, secret["session"])

            return session

        guardrails = Guardrails.load(b.guardrails or None)
        ticks.append(Tick("ingest", b.ingest_every, Ingester(Ledger(store, "tick:ingest"), session_as("tick:ingest"), guardrails).run))
        ticks.append(Tick("reply", b.reply_every, Replier(Ledger(store, "tick:reply"), session_as("tick:reply"), b.reply_template).run))
    if settings.probe.lanes:
        prober = Prober(Ledger(store, "tick:probe"), dict(settings.probe.lanes))
        ticks.append(Tick("probe", settings.probe.every, prober.run))
    scheduler = Scheduler(store, ticks, owner=feed.owner, services=services)
    return App(settings, store, rules, handlers, feed, sweeper, scheduler, ticks, master_key=key, maintainer=maintainer)
