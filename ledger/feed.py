"""The change feed: handlers subscribed to databases, driven by the change log.

- Each handler has a durable cursor; delivery is at-least-once, in commit order, in batches
  of up to ten changes leased to one consumer (so several processes share the work, and a
  dead process's batch is taken over when its short lease runs out).
- A handler that raises gets the *same* change again after an exponential backoff (from one
  second); after ``max_tries`` the change goes to a dead-letter document in ``deadletters``
  and the cursor moves on.
- A handler that runs past its time limit counts as a failed try and is redelivered. A running
  feed calls handlers on its runner threads (no hand-off per change); its watchdog keeps a long
  call's batch lease alive and, at the time limit, abandons the runner and starts another.
  ``drain()`` calls them on a worker thread it can abandon.
- The feed wakes on commit: directly for writes in this process, by NOTIFY (PostgreSQL) or a
  datagram on this process's socket in ``<db>.wake/`` (SQLite: ``ledger/wake.py``) for other
  processes. No polling interval sits in the latency (SQLite polls ``data_version`` only as a
  1 s safety net, or every 10 ms where the sockets cannot be used).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from .actor import handler as handler_actor
from .actor import user
from .clock import SYSTEM, Clock
from .context import Context, Services, make_context
from .document import check_db
from .errors import Conflict, LedgerError
from .guards import fresh
from .machine import Edge, Machine
from .store import Batch, Change, Elsewhere, Ledger, Store

log = logging.getLogger(__name__)

DEADLETTERS = "deadletters"


@dataclass
class Handler:
    """An on_change handler: ``fn(change, ctx)`` for every committed write to ``dbs``."""

    name: str
    dbs: Sequence[str]
    fn: Callable[[Change, Context], None]
    max_tries: int = 5
    timeout: float = 15 * 60.0
    backoff: float = 1.0
    group: str | None = None  # cursor key; handlers sharing one split the work between them
    settings: Any = None  # the product's settings section, as ctx.settings
    # changes written by this handler's own actor are not delivered (the cursor passes them):
    # for a handler that ignores its own writes, each one saves a claim and a call. Handlers
    # sharing a group should agree on it (a change one of them skips is skipped for the group).
    skip_own: bool = False

    def __post_init__(self) -> None:
        self.dbs = tuple(check_db(d) for d in self.dbs)
        handler_actor(self.name)

    @property
    def actor(self) -> str:
        """The actor this handler writes as: ``handler:<name>``."""
        return f"handler:{self.name}"

    @property
    def cursor(self) -> str:
        """The key of the durable cursor: the group, else the name."""
        return self.group or self.name

    def wants(self, change: Change | Elsewhere) -> bool:
        """Whether a commit of ``change`` may give this handler something to do."""
        return change.db in self.dbs and not (self.skip_own and change.actor == self.actor)


def deadletter_machine() -> Machine:
    """Dead letters: written once by the feed, dismissed by a person when dealt with."""
    return Machine(
        DEADLETTERS,
        kind="dead-letter",
        start={"open": fresh},
        edges=[Edge("open", "dismissed", by=user())],
        create_by=[handler_actor()],
    )


class Feed:
    """Runs handlers over the change log. ``start()`` for threads, ``drain()`` for tests."""

    def __init__(
        self,
        store: Store,
        handlers: Sequence[Handler],
        *,
        clock: Clock = SYSTEM,
        owner: str | None = None,
        lease_ms: int = 10_000,
        batch_size: int = 10,
        idle_interval: float = 1.0,
        services: Services | None = None,
    ) -> None:
        self.store = store
        self.services = services
        self.handlers = list(handlers)
        self.clock = clock
        self.owner = owner or f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease_ms = lease_ms
        self.batch_size = batch_size
        self.idle_interval = idle_interval
        self._stop = threading.Event()
        self._wakes = {h.cursor: threading.Event() for h in self.handlers}
        self._workers: dict[str, _Worker] = {}
        self._threads: list[threading.Thread] = []
        self._calls: dict[threading.Thread, _Call] = {}  # handler calls in progress on runner threads
        self._calls_lock = threading.Lock()
        self._runner = threading.local()  # .inline: this thread is a runner started by start()
        self._watchdog: threading.Thread | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self.delivered = 0

    # ---- lifecycle -----------------------------------------------------------------
    def start(self) -> None:
        """Run every handler on its own thread, woken by commits, until ``stop()``."""
        self._unsubscribe = self.store.subscribe(self._on_commit, hints=True)
        for h in self.handlers:
            self._spawn(h, None)
        self._watchdog = threading.Thread(target=self._watch, name="feed:watchdog", daemon=True)
        self._watchdog.start()

    def _spawn(self, h: Handler, resume: _Call | None) -> None:
        """A runner thread for ``h``; ``resume``: first finish the batch whose call timed out."""
        t = threading.Thread(target=self._run, args=(h, resume), name=f"feed:{h.cursor}", daemon=True)
        with self._calls_lock:
            self._threads = [x for x in self._threads if x.is_alive()]
            self._threads.append(t)
        t.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the runners (each finishes the call it is in) and the watchdog."""
        self._stop.set()
        for event in self._wakes.values():
            event.set()
        with self._calls_lock:
            threads = list(self._threads)
        for t in threads:
            t.join(timeout)
        if self._watchdog is not None:
            self._watchdog.join(timeout)
        if self._unsubscribe:
            self._unsubscribe()

    @property
    def running(self) -> bool:
        """Whether any runner thread is alive (one whose handler call was abandoned is not counted)."""
        with self._calls_lock:
            return any(t.is_alive() for t in self._threads)

    def _on_commit(self, change: Change | Elsewhere | None) -> None:
        for h in self.handlers:
            if change is None or h.wants(change):
                self._wakes[h.cursor].set()

    def _run(self, h: Handler, resume: _Call | None = None) -> None:
        wake = self._wakes[h.cursor]
        self._runner.inline = True
        try:
            if resume is not None:
                self._deliver_batch(h, resume.batch, failed=(resume.change.seq, resume.error))
        except _Abandoned:
            return
        except LedgerError as exc:
            log.warning("feed %s: %s", h.cursor, exc.reason)
        except Exception:
            log.exception("feed %s: unexpected failure", h.cursor)
        while not self._stop.is_set():
            wake.clear()  # before the claim: a commit from now on wakes the wait below
            try:
                more = self._step(h)
            except _Abandoned:
                return  # this thread's handler call ran past its time: another thread took over
            except LedgerError as exc:
                log.warning("feed %s: %s", h.cursor, exc.reason)
                more = False
            except Exception:
                log.exception("feed %s: unexpected failure", h.cursor)
                more = False
            if not more:
                # nothing, or a short batch: the claim read everything there was, so only a
                # commit since (or the idle interval, for expired leases) can bring more
                wake.wait(self.idle_interval)

    def drain(self, max_batches: int = 10_000) -> int:
        """Deliver everything pending to every handler, in this thread. Returns batches run."""
        done = 0
        progress = True
        while progress and done < max_batches:
            progress = False
            for h in self.handlers:
                if self.step(h):
                    done += 1
                    progress = True
        return done

    # ---- delivery ------------------------------------------------------------------
    def step(self, h: Handler) -> bool:
        """Claim one batch for ``h`` and deliver it. False when there was nothing to do."""
        return self._step(h) is not None

    def _step(self, h: Handler) -> bool | None:
        """One batch: None when there was none, else whether more may be waiting at once
        (a full batch, or a dead consumer's batch taken over)."""
        skip = h.actor if h.skip_own else None
        batch = self.store.feed_claim(h.cursor, h.dbs, self.owner, self.lease_ms, self.batch_size, skip_actor=skip)
        if batch is None:
            return None
        self._deliver_batch(h, batch)
        return batch.taken or len(batch.changes) >= self.batch_size

    def _deliver_batch(self, h: Handler, batch: Batch, failed: tuple[int, str] | None = None) -> None:
        """Deliver ``batch`` from ``batch.pos`` on; ``failed``: (seq, error) of a call that
        already failed at ``batch.tries`` (a timed-out call, taken over by a new thread)."""
        lease_until = self.clock.now_ms() + self.lease_ms
        for change in batch.changes:
            if change.seq < batch.pos:
                continue  # delivered before a failure recorded further on
            tries = batch.tries if change.seq == batch.pos else 0
            while True:
                error: str | None
                if failed is not None and failed[0] == change.seq:
                    error, failed = failed[1], None
                else:
                    error, lease_until = self._deliver(h, batch, change, tries, lease_until)
                if error is None:
                    self.delivered += 1
                    break
                if error == _LOST:
                    return
                tries += 1
                log.warning(
                    "handler %s failed on %s/%s (try %d of %d): %s", h.name, change.db, change.id, tries, h.max_tries, error,
                    extra={"handler": h.name, "db": change.db, "id": change.id, "rev": change.rev, "seq": change.seq},
                )
                if tries >= h.max_tries:
                    self._dead_letter(h, change, error, tries)
                    break
                batch.pos, batch.tries = change.seq, tries
                if not self.store.feed_renew(batch, self.owner, self.lease_ms):
                    return
                delay = h.backoff * 2 ** (tries - 1)
                renewed = self._wait(batch, delay, self.clock.now_ms() + self.lease_ms)
                if renewed is None:
                    return  # lost the lease: another consumer has the batch now
                if self._stop.is_set():
                    self.store.feed_renew(batch, self.owner, -1)  # hand it back at once
                    return
                lease_until = renewed
        self.store.feed_finish(batch, self.owner)

    def _wait(self, batch: Batch, seconds: float, lease_until: int) -> int | None:
        """Sleep ``seconds`` (wakes on stop) while keeping the batch's lease alive."""
        end = time.monotonic() + seconds
        while not self._stop.is_set():
            left = end - time.monotonic()
            if left <= 0:
                break
            self._stop.wait(min(left, self.lease_ms / 3000))
            if lease_until - self.clock.now_ms() < self.lease_ms / 2:
                if not self.store.feed_renew(batch, self.owner, self.lease_ms):
                    return None
                lease_until = self.clock.now_ms() + self.lease_ms
        return lease_until

    def _deliver(self, h: Handler, batch: Batch, change: Change, tries: int, lease_until: int) -> tuple[str | None, int]:
        ctx = make_context(Ledger(self.store, h.actor), self.clock, h.name, self.services, settings=h.settings, tries=tries)
        if getattr(self._runner, "inline", False):
            return self._deliver_inline(h, batch, change, tries, lease_until, ctx)
        worker = self._workers.get(h.cursor)
        if worker is None:
            worker = self._workers[h.cursor] = _Worker(h.cursor)
        future = worker.submit(h.fn, change, ctx)
        deadline = time.monotonic() + h.timeout
        while True:
            wait = max(0.001, min(deadline - time.monotonic(), self.lease_ms / 3000))
            try:
                future.result(timeout=wait)
                return None, lease_until
            except FutureTimeout:
                now = self.clock.now_ms()
                if time.monotonic() >= deadline:
                    worker.abandon()
                    del self._workers[h.cursor]
                    return f"timed out after {h.timeout:g} s", lease_until
                if lease_until - now < self.lease_ms / 2:
                    batch.pos, batch.tries = change.seq, tries
                    if not self.store.feed_renew(batch, self.owner, self.lease_ms):
                        log.warning("handler %s: lost the batch lease while a change was running", h.name)
                        return _LOST, lease_until
                    lease_until = now + self.lease_ms
            except Exception as exc:  # the handler's own failure: redeliver
                return f"{type(exc).__name__}: {exc}"[:2000], lease_until

    # ---- handler calls on the runner thread ------------------------------------------
    # A runner started by start() calls the handler itself: a hand-off to another thread and
    # back per change is two thread wake-ups on the way from a commit to the handler. The
    # watchdog keeps the batch's lease alive during a long call and, when a call outlives the
    # handler's timeout, abandons that thread (it ends, doing nothing more, if the call ever
    # returns) and starts a new runner that counts the call as a failed try and goes on.
    def _deliver_inline(
        self, h: Handler, batch: Batch, change: Change, tries: int, lease_until: int, ctx: Context,
    ) -> tuple[str | None, int]:
        call = _Call(h, batch, change, tries, lease_until, time.monotonic() + h.timeout)
        with self._calls_lock:
            self._calls[call.thread] = call
        error = None
        try:
            h.fn(change, ctx)
        except Exception as exc:  # the handler's own failure: redeliver
            error = f"{type(exc).__name__}: {exc}"[:2000]
        finally:
            with self._calls_lock:
                if self._calls.get(call.thread) is call:
                    del self._calls[call.thread]
        if call.abandoned:
            raise _Abandoned
        if call.lost:
            log.warning("handler %s: lost the batch lease while a change was running", h.name)
            return _LOST, call.lease_until
        return error, call.lease_until

    def _watch(self) -> None:
        """Renew the leases of long inline calls; take over from calls past their timeout."""
        tick = max(0.005, min(0.05, self.lease_ms / 3000))
        while not self._stop.wait(tick):
            with self._calls_lock:
                calls = list(self._calls.values())
            for call in calls:
                try:
                    self._check(call)
                except LedgerError as exc:
                    log.warning("feed %s: %s", call.h.cursor, exc.reason)

    def _check(self, call: _Call) -> None:
        if time.monotonic() >= call.deadline:
            with self._calls_lock:
                if self._calls.get(call.thread) is not call:
                    return  # it returned meanwhile
                del self._calls[call.thread]
                call.abandoned = True
                self._threads = [t for t in self._threads if t is not call.thread]
            call.error = f"timed out after {call.h.timeout:g} s"
            call.batch.pos, call.batch.tries = call.change.seq, call.tries
            if not self._stop.is_set():
                self._spawn(call.h, call)
            return
        now = self.clock.now_ms()
        if not call.lost and call.lease_until - now < self.lease_ms / 2:
            call.batch.pos, call.batch.tries = call.change.seq, call.tries
            if self.store.feed_renew(call.batch, self.owner, self.lease_ms):
                call.lease_until = now + self.lease_ms
            else:
                call.lost = True

    def _dead_letter(self, h: Handler, change: Change, error: str, tries: int) -> None:
        body = {
            "kind": "dead-letter", "status": "open", "handler": h.name, "db": change.db,
            "docId": change.id, "rev": change.rev, "seq": change.seq, "error": error,
            "tries": tries, "at": self.clock.now_ms(),
        }
        try:
            self.store.put(DEADLETTERS, body, f"{h.cursor}:{change.seq}", actor=h.actor, create_only=True)
        except Conflict:
            pass  # recorded by an earlier owner of this batch
        log.error(
            "handler %s gave up on %s/%s after %d tries; see %s/%s:%d", h.name, change.db, change.id, tries,
            DEADLETTERS, h.cursor, change.seq,
            extra={"handler": h.name, "db": change.db, "id": change.id, "seq": change.seq},
        )


_LOST = "\0lost"


class _Abandoned(BaseException):
    """Ends a runner thread whose handler call ran past its time (another runner took over)."""


class _Call:
    """A handler call in progress on a runner thread, as the watchdog sees it."""

    __slots__ = ("h", "batch", "change", "tries", "lease_until", "deadline", "thread", "abandoned", "lost", "error")

    def __init__(self, h: Handler, batch: Batch, change: Change, tries: int, lease_until: int, deadline: float) -> None:
        self.h, self.batch, self.change, self.tries = h, batch, change, tries
        self.lease_until, self.deadline = lease_until, deadline
        self.thread = threading.current_thread()
        self.abandoned = False
        self.lost = False
        self.error = ""


class _Worker:
    """One daemon thread running a handler's calls for ``drain()``, so a hung call can be abandoned."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[tuple[Future[None], Callable[..., None], tuple[object, ...]] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=f"handler:{name}", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., None], *args: object) -> Future[None]:
        future: Future[None] = Future()
        self._jobs.put((future, fn, args))
        return future

    def abandon(self) -> None:
        self._jobs.put(None)

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            future, fn, args = job
            try:
                fn(*args)
            except BaseException as exc:  # noqa: BLE001 - handed to the feed
                future.set_exception(exc)
            else:
                future.set_result(None)
