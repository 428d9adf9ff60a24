"""Scheduled ticks: APScheduler 3.x interval jobs, each run recorded once per
(tick, scheduled time) in the store so that two processes never run the same instance.

Every process aligns its schedule to the epoch, so all processes agree on the scheduled
times; whichever records a run first does it, the others skip it.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from .actor import tick as tick_actor
from .clock import Clock, parse_interval
from .context import Context, Services, make_context
from .errors import Invalid, LedgerError
from .pause import tick_paused
from .store import Ledger, Store

log = logging.getLogger(__name__)

EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class TickEvent:
    """One run of a tick: which tick, the slot it runs for, and whether a person asked for it."""
    name: str
    scheduled_time: datetime
    manual: bool = False

    @property
    def scheduled_ms(self) -> int:
        """The slot as epoch milliseconds (the tick run's key)."""
        return int(self.scheduled_time.timestamp() * 1000)


@dataclass
class Tick:
    """A function run every ``every`` (``"30s"``, ``"5m"``, seconds) once across all processes."""
    name: str
    every: str | float
    fn: Callable[[TickEvent, Context], Any]
    settings: Any = None  # the product's settings section, as ctx.settings
    seconds: float = field(init=False)

    def __post_init__(self) -> None:
        tick_actor(self.name)
        self.seconds = parse_interval(self.every)

    @property
    def actor(self) -> str:
        """The actor its writes are made as: ``tick:<name>``."""
        return f"tick:{self.name}"


class Scheduler:
    """Runs ticks on their epoch-aligned slots; each slot is claimed once across processes."""
    def __init__(
        self, store: Store, ticks: Sequence[Tick], *, clock: Clock, owner: str | None = None,
        services: Services | None = None,
    ) -> None:
        self.store = store
        self.services = services  # ctx.vault (backend ticks may decrypt) and ctx.http
        self.ticks = {t.name: t for t in ticks}
        self.clock = clock
        self.owner = owner or f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._scheduler: Any = None

    def context(self, t: Tick) -> Context:
        """The context a run of ``t`` gets (its Ledger, clock, settings, services)."""
        return make_context(Ledger(self.store, t.actor, self.clock), t.name, self.services, settings=t.settings)

    def scheduled_time(self, t: Tick, now_ms: int | None = None) -> datetime:
        """The latest epoch-aligned slot at or before now: the same in every process."""
        now = (now_ms if now_ms is not None else self.clock.now_ms()) / 1000
        base = EPOCH.timestamp()
        slot = base + ((now - base) // t.seconds) * t.seconds
        return datetime.fromtimestamp(round(slot, 3), tz=UTC)

    def run(self, name: str, scheduled_time: datetime | None = None, *, manual: bool = False) -> str:
        """Run one instance of tick ``name`` unless another process already has.

        Returns ``"ok"``, ``"error"``, ``"paused"`` (the tick is paused: ``ledger/pause.py``; the run is
        recorded so, and the tick's function is not called) or ``"skipped"`` (the instance was already recorded).
        """
        t = self.ticks.get(name)
        if t is None:
            known = ", ".join(sorted(self.ticks)) or "none"
            raise Invalid(f"no tick named {name!r}; known ticks: {known}")
        if scheduled_time is None:
            scheduled_time = (
                datetime.fromtimestamp(self.clock.now_ms() / 1000, tz=UTC) if manual else self.scheduled_time(t)
            )
        event = TickEvent(name, scheduled_time, manual)
        while not self.store.claim_tick_run(name, event.scheduled_ms, self.owner):
            if not manual:
                log.debug("tick %s at %s already run elsewhere", name, scheduled_time.isoformat())
                return "skipped"
            # a run asked for by a person is never skipped: another one that began in the same
            # millisecond has that slot, so this one is recorded a millisecond later
            scheduled_time += timedelta(milliseconds=1)
            event = TickEvent(name, scheduled_time, manual)
        try:
            if tick_paused(self.store, name) is not None:
                log.info("tick %s is paused: run at %s recorded as paused", name, scheduled_time.isoformat())
                self.store.finish_tick_run(name, event.scheduled_ms, "paused")
                return "paused"
            t.fn(event, self.context(t))
        except Exception as exc:
            reason = exc.reason if isinstance(exc, LedgerError) else f"{type(exc).__name__}: {exc}"
            log.warning("tick %s failed: %s", name, reason, exc_info=not isinstance(exc, LedgerError))
            self.store.finish_tick_run(name, event.scheduled_ms, "error", reason[:2000])
            return "error"
        self.store.finish_tick_run(name, event.scheduled_ms, "ok")
        return "ok"

    def start(self) -> None:
        """Start the background scheduler (APScheduler) for every tick."""
        from apscheduler.schedulers.background import BackgroundScheduler
        from apscheduler.triggers.interval import IntervalTrigger

        self._scheduler = BackgroundScheduler(timezone=UTC)
        for t in self.ticks.values():
            self._scheduler.add_job(
                self._fire, IntervalTrigger(seconds=t.seconds, start_date=EPOCH, timezone=UTC),
                args=[t.name], id=t.name, name=t.actor, max_instances=1, coalesce=True,
                misfire_grace_time=max(1, int(t.seconds)),
            )
        self._scheduler.start()

    def _fire(self, name: str) -> None:
        try:
            self.run(name)
        except LedgerError as exc:  # the store itself failed: log, next slot tries again
            log.warning("tick %s could not run: %s", name, exc.reason)

    def stop(self, wait: bool = True) -> None:
        """Stop the background scheduler; ``wait`` for running ticks to end."""
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=wait)
            self._scheduler = None

    @property
    def running(self) -> bool:
        """Whether the background scheduler is running."""
        return self._scheduler is not None and self._scheduler.running
