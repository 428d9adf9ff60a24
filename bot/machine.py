"""The mention-builds machines: the mentions (database ``requests``, ``kind: "mention"``) and the
builder's daily token budget (database ``bot``, ``kind: "token-budget"``, one document a day)."""

from __future__ import annotations

from typing import Any

from ledger import (
    ADMIN,
    Edge,
    GuardContext,
    Machine,
    Move,
    attempts_left,
    attempts_used_up,
    claim,
    device,
    guard,
    lease_expired,
    renew,
    same_claim,
    started_over,
    tick,
    user,
)

DB = "requests"
STATE_DB = "bot"  # the ingest checkpoint and other bookkeeping of the bot's own

# what a rebuilt mention starts over without (the build's claim and result; the reply's record key stays)
REBUILD = {"attempts": 0, "claimId": None, "leaseUntil": None, "result": None}

MENTIONS = Machine(
    DB,
    kind="mention",
    start={"pending-build": None, "skipped": None},
    create_by=[tick("ingest")],
    edges=[
        Edge("pending-build", "building", by=device("builder"), guards=[claim]),
        Edge("building", "building", by=device("builder"), guards=[renew]),
        Edge("building", "built", by=device("builder"), guards=[same_claim]),
        Edge("building", "build-failed", by=device("builder"), guards=[same_claim]),
        Edge("building", "pending-build", by=tick("sweep"), guards=[lease_expired, attempts_left]),
        Edge("building", "build-failed", by=tick("sweep"), guards=[lease_expired, attempts_used_up]),
        # the reply: fix the record key (and note rate-limit waits) first, then post, then record
        Edge("built", "built", by=tick("reply")),
        Edge("built", "replied", by=tick("reply")),
        Edge("built", "error", by=tick("reply")),
        Edge("built", "skipped", by=tick("reply")),
        # a person's rebuild: the build starts over; a reply's fixed record key (replyRkey) is kept, so a
        # reply that went out before the error is found again, never posted twice
        Edge(["build-failed", "error"], "pending-build", by=[user(), ADMIN], guards=[started_over]),
    ],
    fixed=["uri", "cid", "authorDid", "text"],
    max_attempts=3,
    settled=["build-failed", "error"],  # its work has ended, until a person rebuilds it
    moves=[Move("retry", ["build-failed", "error"], "pending-build", reset=REBUILD, count="retries", stamp="retriedAt",
                label="Rebuild")],
)


BUDGET_KIND = "token-budget"
COUNTERS = ("tokensIn", "tokensOut", "used", "builds")


def budget_id(day: str) -> str:
    """The budget document of a UTC day (``YYYY-MM-DD``)."""
    return f"{BUDGET_KIND}-{day}"


@guard
def counted_up(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    """A budget's counters are whole numbers that never go down, and its id names its day."""
    if ctx.doc_id and ctx.doc_id != budget_id(str(new.get("day", ""))):
        return f"a token budget's id must be {budget_id(str(new.get('day', '')))!r} for day {new.get('day')!r}"
    for name in COUNTERS:
        value = new.get(name, 0)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return f"a token budget's {name} must be a whole number of at least 0"
        before = (old or {}).get(name, 0)
        if isinstance(before, int) and value < before:
            return f"a token budget's {name} only counts up ({before} -> {value}): read it again and add to it"
    return None


TOKEN_BUDGET = Machine(
    STATE_DB,
    kind=BUDGET_KIND,
    start={"counting": counted_up},
    create_by=[device("builder"), ADMIN],
    edges=[Edge("counting", "counting", by=device("builder"), guards=[counted_up])],
    terminal=(),
    fixed=["day"],
)
