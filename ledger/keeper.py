"""Calls under a lease: run a call under a time limit while its lease is renewed, and abandon it
past the limit. The one way the engine does it: the change feed's handler calls (on a running
feed's runner threads, and in ``drain()``), and the builder lane's codegen (``bot/build.py``).

- A ``Lease`` is something held until a time on the clock (a feed batch, a claimed document),
  with the way to extend it. ``keep()`` renews it when less than half of it is left.
- A ``Keeper`` runs calls: each one registered with the keeper's one thread, which renews the
  call's lease while it runs and, when the call outlives its time limit, abandons it.
  ``inline=True`` runs the call on the caller's own thread (no hand-off: a running feed's
  runner calls its handler itself, which saves two thread wake-ups per change); past its limit
  the keeper calls ``on_abandon`` (the feed starts a runner that goes on without it), and when
  the abandoned call does return, the caller learns that it was abandoned and must do nothing
  more. ``inline=False`` runs the call on a thread of its own, so the caller gets its answer at
  the time limit and goes on, leaving that thread to end whenever the call does.
- A lease lost during a call (another consumer took the batch, the sweep took the document
  back) cannot stop the call; the outcome says so, and the caller writes nothing of it.

Leases are timed on the injected clock (so a fake clock moves them); the time limit is the
monotonic clock's, since it bounds real work.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .clock import Clock
from .errors import LedgerError

log = logging.getLogger(__name__)

LINGER_S = 1.0  # the keeper's thread ends after this long with no call to watch (the next call starts it again)


class Lease:
    """Something held until ``until`` (epoch ms on ``clock``); ``renew()`` extends it by ``lease_ms``,
    returning False when it was lost (raising, e.g. a store that does not answer, is a try to repeat)."""

    def __init__(self, renew: Callable[[], bool], lease_ms: int, clock: Clock, *, until: int | None = None) -> None:
        self._renew = renew
        self.lease_ms = lease_ms
        self.clock = clock
        self.until = until if until is not None else clock.now_ms() + lease_ms
        self.lost = False

    def renew(self) -> bool:
        """Extend the lease now; False (and ``lost``) when it was lost."""
        if self.lost:
            return False
        now = self.clock.now_ms()
        if self._renew():
            self.until = now + self.lease_ms
            return True
        self.lost = True
        return False

    def keep(self) -> bool:
        """Renew the lease if less than half of it is left; False when it is lost."""
        if self.lost:
            return False
        if self.until - self.clock.now_ms() >= self.lease_ms / 2:
            return True
        return self.renew()


@dataclass
class Outcome:
    """How a call ended: its ``value``, or its ``error`` ("Type: message", or "timed out after N s") and the
    ``exception`` it raised (for a caller that lets it go on up); ``lost``:
    its lease was lost meanwhile; ``abandoned``: an inline call that returned after its time limit (another
    took over: do nothing more)."""

    value: Any = None
    error: str | None = None
    exception: BaseException | None = None
    timed_out: bool = False
    lost: bool = False
    abandoned: bool = False


class _Call:
    """A call in progress, as the keeper's thread sees it."""

    __slots__ = ("lease", "deadline", "timeout", "on_abandon", "meanwhile", "lock", "over", "timed_out", "ended")

    def __init__(self, lease: Lease, timeout: float | None, on_abandon: Callable[[], None] | None,
                 meanwhile: Callable[[], object] | None = None) -> None:
        self.lease = lease
        self.meanwhile = meanwhile
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout if timeout is not None else None
        self.on_abandon = on_abandon
        self.lock = threading.Lock()  # held while the keeper renews: a call that ends waits for it, so no renewal follows
        self.over = False  # ended or abandoned: the keeper lets it be
        self.timed_out = False
        self.ended = threading.Event()  # the call returned (or, on a thread of its own, was given up on)


class Keeper:
    """Runs calls under their leases and time limits (see the module docstring). ``tick``: seconds between
    two looks at the calls in progress (renewals and time limits are that precise)."""

    def __init__(self, name: str = "lease-keeper", *, tick: float = 0.05) -> None:
        self.name = name
        self.tick = tick
        self._calls: list[_Call] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()

    def call(
        self, fn: Callable[..., Any], *args: Any, lease: Lease, timeout: float | None = None, inline: bool = True,
        on_abandon: Callable[[], None] | None = None, thread_name: str | None = None,
        meanwhile: Callable[[], object] | None = None,
    ) -> Outcome:
        """Run ``fn(*args)`` while ``lease`` is kept, for at most ``timeout`` seconds (None: no limit). See the
        module docstring for ``inline`` and ``on_abandon`` (called from the keeper's thread). ``meanwhile``:
        called once from the keeper's thread if the call is still running at the keeper's next look."""
        call = _Call(lease, timeout, on_abandon, meanwhile)
        self._watch(call)
        if inline:
            return self._inline(call, fn, args)
        return self._apart(call, fn, args, thread_name or f"{self.name}:call")

    def _inline(self, call: _Call, fn: Callable[..., Any], args: tuple[Any, ...]) -> Outcome:
        out = Outcome()
        try:
            out.value = fn(*args)
        except Exception as exc:  # the call's own failure: the caller decides
            out.error, out.exception = _failure(exc), exc
        finally:
            with call.lock:
                call.over = True
        if call.timed_out:
            return Outcome(error=f"timed out after {call.timeout:g} s", timed_out=True, abandoned=True, lost=call.lease.lost)
        out.lost = call.lease.lost
        return out

    def _apart(self, call: _Call, fn: Callable[..., Any], args: tuple[Any, ...], name: str) -> Outcome:
        out = Outcome()

        def run() -> None:
            try:
                out.value = fn(*args)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                out.error, out.exception = _failure(exc), exc
            finally:
                with call.lock:
                    call.over = True
                call.ended.set()

        threading.Thread(target=run, name=name, daemon=True).start()
        call.ended.wait()
        if call.timed_out:
            return Outcome(error=f"timed out after {call.timeout:g} s", timed_out=True, lost=call.lease.lost)
        out.lost = call.lease.lost
        return out

    # ---- the keeper's thread ------------------------------------------------------------------
    def _watch(self, call: _Call) -> None:
        with self._lock:
            self._calls.append(call)
            if self._thread is None and not self._closed.is_set():
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()

    def _run(self) -> None:
        idle_since: float | None = None
        while not self._closed.wait(self.tick):
            with self._lock:
                self._calls = [c for c in self._calls if not c.over]
                calls = list(self._calls)
                if not calls:
                    now = time.monotonic()
                    idle_since = idle_since or now
                    if now - idle_since >= LINGER_S:
                        self._thread = None
                        return
                    continue
            idle_since = None
            for call in calls:
                self._look(call)

    def _look(self, call: _Call) -> None:
        meanwhile, call.meanwhile = call.meanwhile, None
        if meanwhile is not None and not call.over:
            try:
                meanwhile()
            except Exception:  # noqa: BLE001 - logged; the call and the keeper go on
                log.exception("%s: the work beside a call failed", self.name)
        with call.lock:
            if call.over:
                return
            if call.deadline is not None and time.monotonic() >= call.deadline:
                call.over = call.timed_out = True
                call.ended.set()
                abandon = call.on_abandon
            else:
                abandon = None
                try:
                    call.lease.keep()
                except LedgerError as exc:  # not answered this time: the next look tries again
                    log.warning("%s: could not renew a lease: %s", self.name, exc.reason)
                except Exception:  # noqa: BLE001 - the keeper goes on for the other calls
                    log.exception("%s: renewing a lease failed", self.name)
        if abandon is not None:
            try:
                abandon()
            except Exception:  # noqa: BLE001 - logged; the keeper goes on
                log.exception("%s: taking over from an abandoned call failed", self.name)

    def close(self, timeout: float = 5.0) -> None:
        """Stop the keeper's thread (calls in progress are no longer renewed nor timed)."""
        self._closed.set()
        with self._lock:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def __enter__(self) -> Keeper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _failure(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:2000]


__all__ = ["Keeper", "Lease", "Outcome"]
