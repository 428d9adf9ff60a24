"""The change feed: handlers subscribed to databases, driven by the change log.

- Each handler has a durable cursor; delivery is at-least-once, in commit order, in batches
  of up to ten changes leased to one consumer (so several processes share the work, and a
  dead process's batch is taken over when its short lease runs out).
- A handler that raises gets the *same* change again after an exponential backoff (from one
  second); after ``max_tries`` the change goes to a dead-letter document in ``deadletters``
  and the cursor moves on.
- A handler that runs past its time limit counts as a failed try and is redelivered. Every call
  runs under the batch's lease (``ledger/keeper.py``): a running feed calls handlers on its
  runner threads (no hand-off per change), and at the time limit the keeper abandons that
  runner and starts another; ``drain()`` calls each on a thread of its own that it can leave.
- The feed wakes on commit: directly for writes in this process, by NOTIFY (PostgreSQL) or a
  datagram on this process's socket in ``<db>.wake/`` (SQLite: ``ledger/wake.py``) for other
  processes. No polling interval sits in the latency (SQLite polls ``data_version`` only as a
  1 s safety net, or every 10 ms where the sockets cannot be used).
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .actor import ADMIN, user
from .actor import handler as handler_actor
from .clock import Clock
from .context import Context, Services, make_context
from .document import check_db
from .errors import Conflict, LedgerError
from .guards import fresh
from .keeper import Keeper, Lease
from .machine import Edge, Machine
from .move import Move
from .store import MAX_BATCH, Batch, Change, Elsewhere, Ledger, NextClaim, Store, Write, Writes

if TYPE_CHECKING:
    from .wake import Lead

log = logging.getLogger(__name__)

DEADLETTERS = "deadletters"
# A batch's later writes (ctx.later) are made before the next call once the first of them is FLUSH_S old,
# by the keeper's thread when a call is still running at its next look (5-50 ms: a slow call does not hold
# the quick ones' writes back), and always before the feed waits to retry and before it moves its cursor.
FLUSH_S = 0.05
# Where other processes may skip a busy runner's wake-ups (SQLite's boards, store.skips_wakeups), a runner that
# delivered a batch stays "hot" for HOT_S: it says it is not waiting and looks for work after pauses growing from
# HOT_FIRST_S to HOT_LOOK_S (a read, without the writer lock) instead of waiting for a wake-up; the short first
# pauses keep a writer that waits for each job's result (ping-pong) near the wake-up's latency. A steady stream of commits from another process then
# costs their writer no wake-up at all: waking a sleeping thread in another process cost the writer ~100 us of a
# ~250 us create here, and was the SQLite jobs bench's largest cost (docs/benchmarks.md, round 3, session 29).
# After HOT_S without work it says it waits, looks once more, and sleeps until a wake-up, as before.
HOT_S = 0.02
HOT_FIRST_S = 0.0001
HOT_LOOK_S = 0.001
# A runner whose group's lead another process's hot runner holds (ledger/wake.py's Lead) stands by: it looks at
# the lead every STANDBY_S (shared memory, no read of the database) and for work itself only when the leader has
# been in one batch for JOIN_S, has stopped looking, or has let the lead go (then it takes it).
STANDBY_S = 0.005


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
    # once per batch, before its first call: ``prepare(changes, ctx) -> (db, [Write]) | None`` for the batch's
    # changes still to deliver: writes made as the handler's actor with the batch's claim, in its transaction
    # (the jobs handler claims the batch's jobs). Every call's ``ctx.prepared`` maps each write's
    # (id, if_rev) to its outcome (the document written, or the refusal). It runs inside the claim's
    # transaction: quick, and without the store (ctx.db is not to be used); if it raises, nothing is prepared.
    prepare: Callable[[Sequence[Change], Context], tuple[str, list[Write]] | None] | None = None

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
    """Dead letters: written once by the feed; a person dismisses one when it is dealt with, or replays
    it (``open -> replay``): the feed's ``replay`` handler (``ledger.replay``) calls the handler that
    gave up with the same change again, and writes ``replayed``, or ``open`` with the new error."""
    people = [user(), ADMIN]
    return Machine(
        DEADLETTERS,
        kind="dead-letter",
        start={"open": fresh},
        edges=[
            Edge("open", "dismissed", by=people),
            Edge("open", "replay", by=people),
            Edge("replay", "replayed", by=handler_actor("replay")),
            Edge("replay", "open", by=handler_actor("replay")),
        ],
        create_by=[handler_actor()],
        moves=[Move("dismiss", "open", "dismissed", stamp="dismissedAt"),
               Move("retry", "open", "replay", stamp="replayAskedAt", label="Replay")],
    )


class Feed:
    """Runs handlers over the change log. ``start()`` for threads, ``drain()`` for tests."""

    def __init__(
        self,
        store: Store,
        handlers: Sequence[Handler],
        *,
        clock: Clock,
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
        self._runners = itertools.count(1)  # names for the runner threads (store.waiting)
        self._wakes = {h.cursor: threading.Event() for h in self.handlers}
        self._threads: list[threading.Thread] = []
        self._threads_lock = threading.Lock()
        self._runner = threading.local()  # .inline: this thread is a runner started by start()
        # every handler call runs under its batch's lease; a look at them every 5-50 ms (a third of the lease at most)
        self._keeper = Keeper("feed:keeper", tick=max(0.005, min(0.05, lease_ms / 3000)))
        self._unsubscribe: Callable[[], None] | None = None
        self.delivered = 0

    # ---- lifecycle -----------------------------------------------------------------
    def start(self) -> None:
        """Run every handler on its own thread, woken by commits, until ``stop()``."""
        wants = [(tuple(h.dbs), h.actor if h.skip_own else None) for h in self.handlers]
        self._unsubscribe = self.store.subscribe(self._on_commit, hints=True, wants=wants, paced=True)
        for h in self.handlers:
            self._spawn(h, None)

    def _spawn(self, h: Handler, resume: _Resume | None) -> None:
        """A runner thread for ``h``; ``resume``: first finish the batch whose call timed out."""
        t = threading.Thread(target=self._run, args=(h, resume), name=f"feed:{h.cursor}", daemon=True)
        with self._threads_lock:
            self._threads = [x for x in self._threads if x.is_alive()]
            self._threads.append(t)
        t.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the runners (each finishes the call it is in) and the keeper."""
        self._stop.set()
        for event in self._wakes.values():
            event.set()
        with self._threads_lock:
            threads = list(self._threads)
        for t in threads:
            t.join(timeout)
        self._keeper.close(timeout)
        if self._unsubscribe:
            self._unsubscribe()

    @property
    def running(self) -> bool:
        """Whether any runner thread is alive (one whose handler call was abandoned is not counted)."""
        with self._threads_lock:
            return any(t.is_alive() for t in self._threads)

    def _on_commit(self, change: Change | Elsewhere | None) -> None:
        for h in self.handlers:
            if change is None or h.wants(change):
                self._wakes[h.cursor].set()

    def _run(self, h: Handler, resume: _Resume | None = None) -> None:
        wake = self._wakes[h.cursor]
        self._runner.inline = True
        if resume is not None and not self._deliver_alone(
            h, resume.batch, failed=(resume.seq, resume.error), lease=resume.lease, prepared=resume.prepared,
        ):
            return
        runner = f"{h.cursor}#{next(self._runners)}"  # said waiting before each claim, busy once it has a batch
        skips = self.store.skips_wakeups
        woken = False
        hot_until = 0.0  # while hot (after a batch), the runner looks for itself and says it is not waiting
        pause = HOT_FIRST_S
        # the group's lead among processes (ledger/wake.py), taken while hot; made now, as a file in the wake-up
        # folder: made later, it would move the folder's mtime, and senders would wake every process for a while
        lead: Lead | _NoLead | None = (self.store.lead(h.cursor) or _NoLead()) if skips else None
        carried: Batch | None = None  # the next batch, claimed with the last one's finish
        try:
            while not self._stop.is_set():
                wake.clear()  # before the claim: a commit from now on wakes the wait below
                hot = skips and time.monotonic() < hot_until
                if lead is not None and carried is None:
                    if not hot:
                        lead.release()  # it waits for wake-ups now: the others look for themselves
                    elif not lead.take() and lead.covered():
                        # another process's hot runner looks for this group's work: stand by, neither
                        # reading nor woken, and look again shortly (its batch may run long, it may stop)
                        self.store.waiting(runner, False)
                        wake.wait(STANDBY_S)
                        hot_until = max(hot_until, time.monotonic() + HOT_S)
                        continue
                # when waiting, other processes' commits wake this process
                self.store.waiting(runner, not hot and carried is None)
                try:
                    if lead is not None:
                        lead.busy(True)
                    batch, carried = carried, None
                    more, carried = self._step_on(h, woken, runner, batch)
                except _Abandoned:
                    return  # this thread's handler call ran past its time: another thread took over
                except LedgerError as exc:
                    log.warning("feed %s: %s", h.cursor, exc.reason)
                    more = False
                except Exception:
                    log.exception("feed %s: unexpected failure", h.cursor)
                    more = False
                if lead is not None and more is not True:
                    lead.busy(False)  # (after a batch that found more waiting it stays busy: a backlog)
                if more is not None and skips:
                    hot_until, pause = time.monotonic() + HOT_S, HOT_FIRST_S
                if more is None and hot:
                    wake.wait(pause)  # this process's own commits still wake it at once
                    pause = min(pause * 2, HOT_LOOK_S)
                    woken = True  # (its own skipped changes are passed by the idle interval's claim)
                elif more is None or (more is False and not skips):
                    # nothing, or a short batch: the claim read everything there was, so only a
                    # commit since (or the idle interval, for expired leases) can bring more
                    woken = wake.wait(self.idle_interval)
                else:
                    # a full batch: more may be waiting; a short one where other processes sent no
                    # wake-up while it was busy (store.waiting): look again (a read, when nothing
                    # came but its own writes), as a woken runner does
                    woken = more is False
            if carried is not None:  # stopping with a batch in hand: it is delivered, and nothing more claimed
                self._deliver_alone(h, carried)
        finally:
            self.store.waiting(runner, False)
            if lead is not None:
                lead.close()

    def _deliver_alone(self, h: Handler, batch: Batch, **options: Any) -> bool:
        """``_deliver_batch`` outside the runner's loop, its failures logged; False when this thread's handler call
        was abandoned (another runner took over)."""
        try:
            self._deliver_batch(h, batch, **options)
        except _Abandoned:
            return False
        except LedgerError as exc:
            log.warning("feed %s: %s", h.cursor, exc.reason)
        except Exception:
            log.exception("feed %s: unexpected failure", h.cursor)
        return True

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

    def _step(self, h: Handler, woken: bool = False, runner: str | None = None) -> bool | None:
        """One batch: None when there was none, else whether more may be waiting at once
        (a full batch, or a dead consumer's batch taken over). ``woken``: a commit woke the runner;
        ``runner``: the runner thread's name for ``store.waiting`` (busy while it delivers a batch)."""
        return self._step_on(h, woken, runner, None, chain=False)[0]

    def _step_on(
        self, h: Handler, woken: bool, runner: str | None, batch: Batch | None, chain: bool = True,
    ) -> tuple[bool | None, Batch | None]:
        """``_step`` on ``batch`` (claimed with the last one's finish) or on a batch it claims; with ``chain``, the
        finish also claims the next batch, returned second (True first: a batch in hand)."""
        if batch is None:
            skip = h.actor if h.skip_own else None
            batch = self.store.feed_claim(h.cursor, h.dbs, self.owner, self.lease_ms, self.batch_size, skip_actor=skip,
                                          also=self._claim_hook(h), woken=woken)
        if batch is None:
            return None, None
        if runner is not None:
            self.store.waiting(runner, False)  # it claims again when this batch is done
        nxt = self._deliver_batch(h, batch, chain=chain)
        if nxt is not None:
            return True, nxt
        return batch.taken or len(batch.changes) >= self.batch_size, None

    def _claim_hook(self, h: Handler) -> Callable[[Batch], Writes | None] | None:
        return (lambda b: self._claim_writes(h, b)) if h.prepare is not None else None

    def _deliver_batch(self, h: Handler, batch: Batch, failed: tuple[int, str] | None = None,
                       lease: Lease | None = None, prepared: Any = None, chain: bool = False) -> Batch | None:
        """Deliver ``batch`` from ``batch.pos`` on; ``failed``: (seq, error) of a call that
        already failed at ``batch.tries`` (a timed-out call, taken over by a new thread, with its ``lease``
        and what the batch's prepare hook gave). ``chain``: the finish claims the handler's next batch in
        its transaction (unless the feed is stopping), returned here; a claim of its own saved."""
        if lease is None:
            lease = Lease(lambda: self.store.feed_renew(batch, self.owner, self.lease_ms), self.lease_ms, self.clock)
        work = _Work(prepared)
        if batch.made is not None:  # made with the claim
            work.prepared = {(w.id, w.if_rev): o for w, o in zip(batch.made.writes, batch.made.outcomes, strict=True)}
        completed = False
        try:
            for change in batch.changes:
                if change.seq < batch.pos:
                    continue  # delivered before a failure recorded further on
                tries = batch.tries if change.seq == batch.pos else 0
                while True:
                    if work.later and time.monotonic() - work.since >= FLUSH_S:
                        self._flush(h, work)
                    error: str | None
                    if failed is not None and failed[0] == change.seq:
                        error, failed = failed[1], None
                    else:
                        error = self._deliver(h, batch, change, tries, lease, work)
                    if error is None:
                        self.delivered += 1
                        break
                    if error == _LOST:
                        return None
                    tries += 1
                    log.warning(
                        "handler %s failed on %s/%s (try %d of %d): %s", h.name, change.db, change.id, tries, h.max_tries, error,
                        extra={"handler": h.name, "db": change.db, "id": change.id, "rev": change.rev, "seq": change.seq},
                    )
                    self._flush(h, work)  # what the calls before it did, before any wait
                    if tries >= h.max_tries:
                        self._dead_letter(h, change, error, tries)
                        break
                    batch.pos, batch.tries = change.seq, tries
                    if not lease.renew():  # records the failed try with the batch
                        return None
                    if not self._wait(h.backoff * 2 ** (tries - 1), lease):
                        return None  # lost the lease: another consumer has the batch now
                    if self._stop.is_set():
                        self.store.feed_renew(batch, self.owner, -1)  # hand it back at once
                        return None
            completed = True
        finally:
            # on every way out the calls that returned did their work: their later writes are made (the last
            # group with the batch's finish, in its transaction)
            flushed, last = self._flush(h, work, keep_last=completed)
        if not (completed and flushed):
            return None
        also = Writes(last[0], last[1], h.actor) if last is not None else None
        then = None
        if chain and not self._stop.is_set():
            then = NextClaim(h.cursor, h.dbs, self.owner, self.lease_ms, self.batch_size,
                             skip_actor=h.actor if h.skip_own else None, also=self._claim_hook(h))
        self.store.feed_finish(batch, self.owner, also=also, then=then)
        if also is not None:
            self._refused(h, also.db, also.writes, also.outcomes)
        return then.batch if then is not None else None

    def _claim_writes(self, h: Handler, batch: Batch) -> Writes | None:
        """The prepare hook's writes for a batch being claimed (inside the claim's transaction)."""
        changes = [c for c in batch.changes if c.seq >= batch.pos]
        if not changes or h.prepare is None:
            return None
        ctx = make_context(Ledger(self.store, h.actor, self.clock), h.name, self.services, settings=h.settings)
        try:
            made = h.prepare(changes, ctx)
        except Exception as exc:  # noqa: BLE001 - the calls go on without it
            reason = exc.reason if isinstance(exc, LedgerError) else f"{type(exc).__name__}: {exc}"
            log.warning("handler %s: preparing a batch of %d failed, each change goes alone: %s", h.name, len(changes), reason,
                        extra={"handler": h.name})
            return None
        return Writes(made[0], made[1], h.actor) if made is not None and made[1] else None

    def _flush(self, h: Handler, work: _Work, keep_last: bool = False) -> tuple[bool, tuple[str, list[Write]] | None]:
        """Make the later writes of the batch's calls so far, one ``put_many`` per database; False when the
        store failed (the batch is then not finished: it is delivered again once its lease runs out).
        ``keep_last``: the last database's writes (up to MAX_BATCH) are handed back unwritten, for the finish."""
        with work.lock:
            writes, work.later = work.later, []
        if not writes:
            return True, None
        groups: list[tuple[str, list[Write]]] = []
        by_db: dict[str, list[Write]] = {}
        for db, w in writes:
            by_db.setdefault(db, []).append(w)
        for db, group in by_db.items():
            groups.extend((db, group[i:i + MAX_BATCH]) for i in range(0, len(group), MAX_BATCH))
        last = groups.pop() if keep_last else None
        ledger = Ledger(self.store, h.actor, self.clock)
        ok = True
        for db, chunk in groups:
            try:
                outcomes = ledger.put_many(db, chunk)
            except LedgerError as exc:
                log.warning("handler %s: %d later writes to %s failed: %s", h.name, len(chunk), db, exc.reason,
                            extra={"handler": h.name, "db": db})
                ok = False
                continue
            self._refused(h, db, chunk, outcomes)
        return ok, last

    def _refused(self, h: Handler, db: str, writes: Sequence[Write], outcomes: Sequence[Any]) -> None:
        for w, outcome in zip(writes, outcomes, strict=True):
            if isinstance(outcome, LedgerError):
                log.warning("handler %s: its later write of %s/%s was refused: %s", h.name, db, w.id, outcome.reason,
                            extra={"handler": h.name, "db": db, "id": w.id})

    def _wait(self, seconds: float, lease: Lease) -> bool:
        """Sleep ``seconds`` (wakes on stop) while keeping the batch's lease; False when it was lost."""
        end = time.monotonic() + seconds
        while not self._stop.is_set():
            left = end - time.monotonic()
            if left <= 0:
                break
            self._stop.wait(min(left, self.lease_ms / 3000))
            if not lease.keep():
                return False
        return True

    def _deliver(self, h: Handler, batch: Batch, change: Change, tries: int, lease: Lease, work: _Work) -> str | None:
        """One call of the handler under the batch's lease: None, its failure, or _LOST. A runner started by
        ``start()`` calls it itself; past its time limit the keeper starts another runner, which counts the
        call as a failed try and goes on, and this thread ends (_Abandoned) whenever the call returns."""
        ctx = make_context(Ledger(self.store, h.actor, self.clock), h.name, self.services, settings=h.settings, tries=tries)
        ctx.prepared, ctx.deferred = work.prepared, []
        batch.pos, batch.tries = change.seq, tries  # what a renewal records of the batch's progress
        inline = bool(getattr(self._runner, "inline", False))
        me = threading.current_thread()

        def take_over() -> None:  # from the keeper's thread, at the time limit
            with self._threads_lock:
                self._threads = [t for t in self._threads if t is not me]
            batch.pos, batch.tries = change.seq, tries
            if not self._stop.is_set():
                self._spawn(h, _Resume(batch, change.seq, f"timed out after {h.timeout:g} s", lease, work.prepared))

        outcome = self._keeper.call(h.fn, change, ctx, lease=lease, timeout=h.timeout, inline=inline,
                                    on_abandon=take_over if inline else None, thread_name=f"handler:{h.cursor}",
                                    meanwhile=(lambda: self._flush(h, work)[0]) if work.later else None)
        if outcome.abandoned:
            raise _Abandoned
        if outcome.lost:
            log.warning("handler %s: lost the batch lease while a change was running", h.name)
            return _LOST
        if outcome.error is None and ctx.deferred:
            with work.lock:
                if not work.later:
                    work.since = time.monotonic()
                work.later.extend(ctx.deferred)
        return outcome.error

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


class _NoLead:
    """Where the store has no leads: every runner looks for its own work."""

    held = True

    def take(self) -> bool:
        return True

    def covered(self) -> bool:
        return False

    def busy(self, busy: bool) -> None:
        pass

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass


class _Abandoned(BaseException):
    """Ends a runner thread whose handler call ran past its time (another runner took over)."""


@dataclass
class _Resume:
    """A batch whose handler call timed out on a runner thread, for the runner that takes over."""

    batch: Batch
    seq: int
    error: str
    lease: Lease
    prepared: Any = None


@dataclass
class _Work:
    """What a batch's calls share: the prepare hook's result, and the later writes not made yet (since when)."""

    prepared: Any = None
    later: list[tuple[str, Write]] = field(default_factory=list)
    since: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)  # the runner adds, the keeper's thread may write
