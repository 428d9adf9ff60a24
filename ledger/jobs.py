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
from collections.abc import Callable
from typing import Any

from .actor import ADMIN, handler, tick, user
from .context import Context
from .errors import Conflict, Forbidden
from .feed import Handler
from .guards import attempts_left, attempts_used_up, claim, fresh, lease_expired, renew, same_claim, started_over
from .lease import claim as take
from .lease import finish
from .machine import Edge, Machine
from .move import Move
from .product import Product
from .store import Change, Doc

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


def jobs_handler(
    work: Work = noop, *, lease_ms: int = 30_000, name: str = "on_change", skip_own: bool | None = None, **options: Any,
) -> Handler:
    """The on_change handler for ``jobs``: claim pending jobs, do the work, finish.

    ``skip_own`` (the feed passes over the handler's own writes): its claim and finish write
    running and done, which it ignores, so skipping them is safe unless ``work`` itself writes
    jobs through ``ctx.db`` (a job it creates would never be delivered). It defaults to True
    for the default work and False for any other; pass True for work that writes no jobs.
    """

    def on_change(change: Change, ctx: Context) -> None:
        doc = change.doc
        if change.deleted or doc.get("type") != "job" or doc.get("status") != "pending":
            return  # our own writes (running, done) and the sweep's end here: chains stop
        try:
            held = take(ctx.db, "jobs", doc, "running", lease_ms, ctx.now())
        except Conflict:
            return  # stale event, or another worker won the claim
        except Forbidden as exc:
            log.info("jobs: not claiming %s: %s", doc["_id"], exc.reason)
            return
        result = work(f"{held['_id']}:{held['attempts']}", held, ctx)
        finish(ctx.db, "jobs", held, "done", result=result)

    if skip_own is None:
        skip_own = work is noop
    return Handler(name, ["jobs"], on_change, skip_own=skip_own, **options)


# ---- the product declaration ------------------------------------------------------------


def _handlers(section: Any) -> list[Handler]:
    return [jobs_handler(lease_ms=int(section.lease * 1000), settings=section)] if section.enabled else []


PRODUCT = Product(
    "jobs", "The reference jobs machine: pending -> running -> done, swept home on lease expiry.",
    machines=[JOBS], settings="ledger.jobs_settings:JobsSettings", handlers=_handlers,
)

PRODUCTS = (PRODUCT,)
