"""What was done and what failed, per minute, over the last hour; queue depth per minute; and
outcomes by platform (for ``/metrics``): read incrementally from the change log, never by scanning
documents.

- **Done and failed per minute, apart**: a committed write that puts a document of a machine into
  one of its end states (``Machine.ends``: ``done``, ``replied``, ...; not a follow-up such as
  ``commented``, which only ever comes after ``done``) counts as done for that machine in the minute
  of its commit; one into a failure a person looks at (``error``, ``failed``: ``samples.is_failure``)
  counts as failed. On start the reader finds the first change of the last hour by a binary
  search on ``seq`` (the log is in commit order, so ``at`` grows with it) and reads from
  there, at most ``BACKFILL`` changes back; then it reads only what is new, a page at a time.
- **Queue depth**: the documents in a machine's working states (neither ends nor failed), sampled from the store's
  counters once a minute by the ``sample`` tick into the ``samples`` database (``hub/samples.py``),
  so the chart's hour survives a restart; read back with ``by_time``.
- **Outcomes**: every such terminal write by machine, platform (the document's ``platform``
  field, if any) and status, counted since the reader started.

Everything is bounded: 60 buckets per machine and outcome, 61 samples read, one counter per
(machine, platform, status).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from ledger import LedgerError, Rules, Store

from ..samples import is_failure, read_samples

log = logging.getLogger(__name__)

MINUTE = 60_000
WINDOW = 60  # minutes
PAGE = 1000
BACKFILL = 20_000  # changes read back at most when the reader starts
EVERY = 2.0  # seconds between reads in the background


class Activity:
    """See the module docstring. Thread-safe; ``advance()`` reads what is new. ``now`` (epoch ms)
    is the store's clock unless given."""

    def __init__(self, store: Store, rules: Rules, *, now: Callable[[], int]) -> None:
        self.store = store
        self.rules = rules
        self.now = now  # the hub's one clock
        self.cursor: int | None = None
        self.done: dict[str, dict[int, int]] = {m.name: {} for m in rules.machines}
        self.failed: dict[str, dict[int, int]] = {m.name: {} for m in rules.machines}
        self.outcomes: Counter[tuple[str, str, str]] = Counter()
        self.depth: list[tuple[int, dict[str, int]]] = []
        self.started_at = self.now()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    # ---- reading ---------------------------------------------------------------------------
    def _start_seq(self) -> int:
        """The seq to read after: the last change before the window (at most BACKFILL back)."""
        head = self.store.head_seq()
        since = self.now() - WINDOW * MINUTE
        lo = max(0, head - BACKFILL)
        first = self.store.changes(lo, 1)
        if not first or first[0].at >= since:
            return lo
        lo, hi = first[0].seq, head  # lo: a change before the window; every change after hi is in it
        while lo < hi:
            mid = (lo + hi + 1) // 2
            found = self.store.changes(mid - 1, 1)  # the first change at or after mid
            if found and found[0].seq <= hi and found[0].at < since:
                lo = found[0].seq
            else:
                hi = mid - 1
        return lo

    def advance(self, pages: int = 10) -> int:
        """Read up to ``pages`` pages of new changes and the last hour's depth samples. Returns the changes read."""
        with self._lock:
            if self.cursor is None:
                self.cursor = self._start_seq()
            total = 0
            for _ in range(pages):
                batch = self.store.changes(self.cursor, PAGE)
                for c in batch:
                    if not c.deleted:
                        self._count(c.db, c.doc, c.at)
                if batch:
                    self.cursor = batch[-1].seq
                total += len(batch)
                if len(batch) < PAGE:
                    break
            self._read_depth()
            self._trim()
            return total

    def _count(self, db: str, doc: dict[str, Any], at: int) -> None:
        m = self.rules.machine_for(db, doc)
        status = doc.get("status")
        if m is None or not isinstance(status, str):
            return
        if is_failure(m, status):
            kept = self.failed
        elif status in m.ends - m.follow_ups:
            kept = self.done
        else:
            return
        minute = at // MINUTE
        buckets = kept.setdefault(m.name, {})
        buckets[minute] = buckets.get(minute, 0) + 1
        platform = doc.get("platform")
        self.outcomes[(m.name, platform if isinstance(platform, str) else "", status)] += 1

    def _read_depth(self) -> None:
        self.depth = read_samples(self.store, (self.now() // MINUTE - WINDOW) * MINUTE, WINDOW + 1)

    def _trim(self) -> None:
        oldest = self.now() // MINUTE - WINDOW
        for buckets in (*self.done.values(), *self.failed.values()):
            for minute in [k for k in buckets if k <= oldest]:
                del buckets[minute]

    # ---- the background reader -------------------------------------------------------------
    def start(self, stopping: threading.Event) -> None:
        """Read in a daemon thread every ``EVERY`` seconds until ``stopping`` is set (idempotent)."""
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, args=(stopping,), name="console-activity", daemon=True)
            self._thread.start()

    def _run(self, stopping: threading.Event) -> None:
        while not stopping.is_set():
            try:
                self.advance()
            except LedgerError as exc:
                log.warning("console activity: %s", exc.reason)
            except Exception:  # noqa: BLE001 - a closed store at shutdown, a bug: the chart stops, the hub does not
                if stopping.is_set():
                    return
                log.exception("console activity reader failed")
            stopping.wait(EVERY)

    # ---- what the charts and metrics read --------------------------------------------------
    def series(self) -> dict[str, Any]:
        """Done and failed per minute (60 values per machine each, oldest first) and the depth samples (the last hour's)."""
        with self._lock:
            end = self.now() // MINUTE
            minutes = list(range(end - WINDOW + 1, end + 1))
            done = {name: [b.get(m, 0) for m in minutes] for name, b in self.done.items()}
            failed = {name: [b.get(m, 0) for m in minutes] for name, b in self.failed.items()}
            depth = [(at, dict(d)) for at, d in self.depth if at // MINUTE > end - WINDOW]
            return {"minutes": [m * MINUTE for m in minutes], "done": done, "failed": failed, "depth": depth,
                    "since": depth[0][0] if depth else None}

    def outcome_counts(self) -> list[tuple[str, str, str, int]]:
        """(machine, platform, status, count) for every terminal write seen."""
        with self._lock:
            return [(m, p, s, n) for (m, p, s), n in sorted(self.outcomes.items())]
