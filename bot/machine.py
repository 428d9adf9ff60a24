"""The mention-builds machine: database ``requests``, ``kind: "mention"``."""

from __future__ import annotations

from ledger import Edge, Machine, attempts_left, attempts_used_up, claim, device, lease_expired, renew, same_claim, tick

DB = "requests"
STATE_DB = "bot"  # the ingest checkpoint and other bookkeeping of the bot's own

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
    ],
    fixed=["uri", "cid", "authorDid", "text"],
    max_attempts=3,
)
