"""The reference jobs machine: ``pending -> running -> done``, swept home on lease expiry,
``failed`` after three attempts; a person retries a failed job (``failed -> pending``, attempts
back to 0, ``retries`` counted) or cancels a pending one. It is the smallest complete use of the
engine, and the template every product machine follows.

    doc = ledger.put("jobs", {"type": "job", "status": "pending", "input": {...}})
    # on_change claims it (if_rev), runs work("<jobId>:<attempt>", job), finishes with its claimId
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from .actor import ADMIN, handler, tick, user
from .context import Context
from .errors import Conflict, Forbidden, LedgerError
from .feed import Handler
from .guards import attempts_left, attempts_used_up, claim, fresh, lease_expired, renew, same_claim, started_over
from .lease import claim as take
from .lease import claim_write, finish, finish_write, heartbeat
from .machine import Edge, Machine
from .move import Move
from .product import Product
from .store import Change, Doc, Write, Written

log = logging.getLogger(__name__)

RESTART = {"attempts": 0, "claimId": None, "leaseUntil": None}  # what a retried job starts over without

JOBS = Machine(
    "jobs",
    type="job",
    start={"pending": fresh},
    edges=[
        Edge("pending", "running", by=handler("on_change"), guards=[claim]),
        Edge("running", "running", by=handler("on_change"), guards=[renew]),
        Edge("running", "done", by=handler("on_change"), guards=[same_claim]),
        Edge("running", "pending", by=tick("sweep"), guards=[lease_expired, attempts_left]),
        Edge("running", "failed", by=tick("sweep"), guards=[lease_expired, attempts_used_up]),
        Edge("pending", "failed", by=tick("sweep"), guards=[attempts_used_up]),
        Edge("failed", "pending", by=[user(), ADMIN], guards=[started_over]),  # a person's retry
        Edge("pending", "cancelled", by=[user(), ADMIN]),
    ],
    fixed=["input"],
    max_attempts=3,
    settled=["failed"],  # its work has ended, until a person retries it
    moves=[
        Move("retry", "failed", "pending", reset=RESTART, count="retries", stamp="retriedAt"),
        Move("cancel", "pending", "cancelled", reset={"claimId": None, "leaseUntil": None}, stamp="cancelledAt"),
    ],
)

Work = Callable[[str, Doc, Context], Any]
"""``work(key, job, ctx) -> result``: ``key`` is ``"<jobId>:<attempt>"``, stable per attempt,
for idempotent side effects. The result (JSON) is stored on the done job."""


def noop(key: str, job: Doc, ctx: Context) -> Any:
    """The default work: nothing, recording which attempt and which process did it."""
    return {"key": key, "pid": os.getpid()}


QUICK_WORK_S = 0.005
"""Work this quick (on average over the last jobs) is claimed a batch at a time, in one write, and
finished with the batch's other jobs, in one more (``ctx.later``): for work that takes longer the
claim and finish of each job are its own writes, a small share of its time."""


class _Pace:
    """How long the work has been taking in this process: an average that follows the last jobs."""

    def __init__(self) -> None:
        self.average: float | None = None

    def saw(self, seconds: float) -> None:
        self.average = seconds if self.average is None else 0.8 * self.average + 0.2 * seconds

    def ahead(self, jobs: int, lease_ms: int) -> int:
        """How many of a batch's ``jobs`` to claim at once: all of them when the work is quick and all of them
        would be done well within their lease (a quarter of it), else none (each is claimed when it runs)."""
        if self.average is None or self.average >= QUICK_WORK_S or self.average * jobs >= lease_ms / 4000:
            return 0
        return jobs


def _is_pending(change: Change) -> bool:
    return not change.deleted and change.doc.get("type") == "job" and change.doc.get("status") == "pending"


def jobs_handler(
    work: Work = noop, *, lease_ms: int = 30_000, name: str = "on_change", skip_own: bool | None = None, **options: Any,
) -> Handler:
    """The on_change handler for ``jobs``: claim pending jobs, do the work, finish.

    ``skip_own`` (the feed passes over the handler's own writes): its claim and finish write
    running and done, which it ignores, so skipping them is safe unless ``work`` itself writes
    jobs through ``ctx.db`` (a job it creates would never be delivered). It defaults to True
    for the default work and False for any other; pass True for work that writes no jobs.

    While the work is quick (``QUICK_WORK_S``) the handler claims every pending job of a feed batch in
    one write (its ``prepare`` hook: each job on its own revision, one that moved on is refused alone)
    and finishes them in one more; each job is still claimed, worked and finished exactly as alone.
    """
    pace = _Pace()

    def prepare(changes: Sequence[Change], ctx: Context) -> tuple[str, list[Write]] | None:
        jobs = [c for c in changes if _is_pending(c)]
        ahead = pace.ahead(len(jobs), lease_ms)
        if ahead < 1:
            return None
        now = ctx.now()
        return "jobs", [claim_write(c.doc, "running", lease_ms, now) for c in jobs[:ahead]]

    def on_change(change: Change, ctx: Context) -> None:
        doc = change.doc
        if not _is_pending(change):
            return  # our own writes (running, done) and the sweep's end here: chains stop
        held: Written | None = None
        if isinstance(ctx.prepared, dict):  # claimed with the batch (once: a retry claims for itself)
            held = ctx.prepared.pop((change.id, change.rev), None)
        try:
            if held is None:
                held = take(ctx.db, "jobs", doc, "running", lease_ms, ctx.now())
            elif isinstance(held, LedgerError):
                raise held
            elif held["leaseUntil"] - ctx.now() < lease_ms // 2:  # claimed with a batch that has been slow
                held = heartbeat(ctx.db, "jobs", held, lease_ms, ctx.now())
        except Conflict:
            return  # stale event, or another worker won the claim (or took it back)
        except Forbidden as exc:
            log.info("jobs: not claiming %s: %s", doc["_id"], exc.reason)
            return
        started = time.perf_counter()
        result = work(f"{held['_id']}:{held['attempts']}", held, ctx)
        took = time.perf_counter() - started
        pace.saw(took)
        if took < QUICK_WORK_S:
            ctx.later("jobs", finish_write(held, "done", result=result))  # with the batch's other finishes
        else:
            finish(ctx.db, "jobs", held, "done", result=result)

    if skip_own is None:
        skip_own = work is noop
    return Handler(name, ["jobs"], on_change, skip_own=skip_own, prepare=prepare, **options)


# ---- the product declaration ------------------------------------------------------------


def _handlers(section: Any) -> list[Handler]:
    return [jobs_handler(lease_ms=int(section.lease * 1000), settings=section)] if section.enabled else []


PRODUCT = Product(
    "jobs", "The reference jobs machine: pending -> running -> done, swept home on lease expiry.",
    machines=[JOBS], settings="ledger.jobs_settings:JobsSettings", handlers=_handlers,
)

PRODUCTS = (PRODUCT,)
