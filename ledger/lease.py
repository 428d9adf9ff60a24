"""Leases: claim, heartbeat and finish helpers, and the sweep that takes expired work back.

A claim writes the working status with a fresh ``claimId``, ``leaseUntil`` and
``attempts + 1`` using the ``_rev`` of the read, so exactly one claimant wins. A finish
carries the claimId (the ``same_claim`` guard) and the revision of the claim or last
heartbeat, so a finish after the lease was taken back is refused.

The sweep follows the machines: every edge that ``tick:sweep`` may write and that is guarded
by ``lease_expired`` is a way home for an expired lease. It writes with the ``_rev`` of its
read, so it never overwrites work that finished in between. It wakes at the earliest
``leaseUntil`` it knows of (commits tell it of new leases), and on a safety interval.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from .clock import Clock
from .errors import Conflict, Forbidden, LedgerError
from .guards import lease_expired
from .machine import Machine, Rules
from .store import Change, Doc, Ledger, Store, Write

log = logging.getLogger(__name__)

SWEEP_ACTOR = "tick:sweep"


def _body(doc: Doc) -> Doc:
    return {k: v for k, v in doc.items() if not k.startswith("_")}


def claim_write(doc: Doc, status: str, lease_ms: int, now_ms: int, **fields: Any) -> Write:
    """The write that takes ``doc`` (as read) into ``status``: a fresh claimId, the lease, one more attempt."""
    new = _body(doc)
    new.update(fields)
    new.update(
        status=status,
        claimId=uuid.uuid4().hex,
        leaseUntil=now_ms + lease_ms,
        attempts=int(doc.get("attempts") or 0) + 1,
    )
    return Write(new, doc["_id"], if_rev=doc["_rev"])


def claim(db: Ledger, dbname: str, doc: Doc, status: str, lease_ms: int, now_ms: int, **fields: Any) -> Doc:
    """Take ``doc`` (as read) into ``status``; raises Conflict if someone else got there first."""
    w = claim_write(doc, status, lease_ms, now_ms, **fields)
    return db.put(dbname, w.doc, w.id, if_rev=w.if_rev)


def heartbeat(db: Ledger, dbname: str, held: Doc, lease_ms: int, now_ms: int) -> Doc:
    """Renew the lease of a held document; returns the new revision to finish with."""
    new = _body(held)
    new["leaseUntil"] = now_ms + lease_ms
    return db.put(dbname, new, held["_id"], if_rev=held["_rev"])


def finish_write(held: Doc, status: str, **fields: Any) -> Write:
    """The write that moves a held document on with its claimId (refused if the claim was taken back)."""
    new = _body(held)
    new.pop("leaseUntil", None)
    new.update(fields)
    new["status"] = status
    return Write(new, held["_id"], if_rev=held["_rev"])


def finish(db: Ledger, dbname: str, held: Doc, status: str, **fields: Any) -> Doc:
    """Move a held document on with its claimId; refused as a stale claim if it was taken back."""
    w = finish_write(held, status, **fields)
    try:
        return db.put(dbname, w.doc, w.id, if_rev=w.if_rev)
    except Conflict:
        head = db.get(dbname, held["_id"])
        if head.get("claimId") != held.get("claimId") or head.get("status") != held.get("status"):
            raise Forbidden(f"stale claim: {dbname}/{held['_id']} was taken back ({head.get('status')} now)") from None
        raise


class Sweeper:
    """Returns expired leases to the pool (or to failure) for every machine that says how."""

    def __init__(self, store: Store, rules: Rules, *, clock: Clock, safety_interval: float = 30.0) -> None:
        self.store = store
        self.clock = clock
        self.safety_interval = safety_interval
        self.db = Ledger(store, SWEEP_ACTOR, clock)
        self.plans = [(m, _sweep_edges(m)) for m in rules.machines]
        self.plans = [(m, edges) for m, edges in self.plans if edges]
        self.leased_states = {(m.db, s) for m, edges in self.plans for e in edges for s in e.src}
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._next: int | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._foreign = False
        self.returned = 0
        self.failed = 0

    def sweep_once(self) -> int | None:
        """Take back every expired lease now. Returns the earliest lease still running (ms)."""
        now = self.clock.now_ms()
        earliest: int | None = None
        for machine, edges in self.plans:
            states = sorted({s for e in edges for s in e.src})
            for state in states:
                for doc in self.db.query_all(machine.db, "status", state):
                    if not machine.governs(doc):
                        continue
                    lease = doc.get("leaseUntil")
                    if isinstance(lease, int) and lease > now:
                        earliest = lease if earliest is None else min(earliest, lease)
                        continue
                    self._take_back(machine, edges, doc, now)
        return earliest

    def _take_back(self, machine: Machine, edges: list[Any], doc: Doc, now: int) -> None:
        body = _body(doc)
        for edge in edges:
            if doc.get("status") not in edge.src:
                continue
            new = dict(body)
            new.pop("leaseUntil", None)
            new.pop("claimId", None)
            new["status"] = edge.dst
            new["sweptAt"] = now  # when it was taken back: what grouped errors show as first and last seen
            new["lastError"] = (
                f"lease expired during attempt {body.get('attempts', 0)} of {machine.max_attempts}"
                if "attempts" in body else "lease expired"
            )
            try:
                machine.check(body, new, SWEEP_ACTOR, now)
            except Forbidden:
                continue
            try:
                self.db.put(machine.db, new, doc["_id"], if_rev=doc["_rev"])
            except (Conflict, Forbidden):
                return  # it moved on between our read and our write: nothing to take back
            if edge.dst in machine.ends:
                self.failed += 1
            else:
                self.returned += 1
            log.info(
                "sweep: %s/%s lease expired, now %s", machine.db, doc["_id"], edge.dst,
                extra={"db": machine.db, "id": doc["_id"], "rev": doc["_rev"], "actor": SWEEP_ACTOR},
            )
            return

    # ---- the deadline-driven loop --------------------------------------------------
    def start(self) -> None:
        """Run the sweeper in a daemon thread, woken at the next lease deadline."""
        self._unsubscribe = self.store.subscribe(self._on_commit)
        self._thread = threading.Thread(target=self._run, name="sweep", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the sweeper's thread, waiting up to ``timeout`` seconds."""
        self._stop.set()
        self._wake.set()
        if self._thread:
            self._thread.join(timeout)
        if self._unsubscribe:
            self._unsubscribe()

    def _on_commit(self, change: Change | None) -> None:
        if change is None:
            # another process committed: it may hold leases we have not seen; rescan soon
            self._foreign = True
            self._wake.set()
            return
        if (change.db, change.doc.get("status")) not in self.leased_states:
            return
        lease = change.doc.get("leaseUntil")
        if isinstance(lease, int):
            with self._lock:
                if self._next is None or lease < self._next:
                    self._next = lease
                    self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._foreign = False
            with self._lock:
                self._next = None  # leases committed during the scan land here
            try:
                earliest = self.sweep_once()
            except LedgerError as exc:
                log.warning("sweep failed: %s", exc.reason)
                earliest = None
            last_scan = time.monotonic()
            with self._lock:
                if earliest is not None and (self._next is None or earliest < self._next):
                    self._next = earliest
            while not self._stop.is_set():
                self._wake.clear()
                with self._lock:
                    target = self._next
                wait = last_scan + self.safety_interval - time.monotonic()
                if target is not None:
                    wait = min(wait, (target - self.clock.now_ms()) / 1000)
                if self._foreign:
                    wait = min(wait, last_scan + self.RESCAN_EVERY - time.monotonic())
                if wait <= 0:
                    break
                self._wake.wait(wait)

    RESCAN_EVERY = 0.05  # at most this often for commits made by other processes


def _sweep_edges(machine: Machine) -> list[Any]:
    return [
        e for e in machine.edges
        if lease_expired in e.guards and any(p.matches(SWEEP_ACTOR) for p in e.by)
    ]
